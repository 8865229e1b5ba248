"""A data directory with every coordinator's state in it, and what a broker answers of it.

``write_state`` drives a running broker (any version) to hold: committed offsets of a
classic group (``classic-group``) and of a KIP-848 consumer group (``kip848-group``),
both with a live member when the broker is killed; a committed transaction (with a
TxnOffsetCommit for ``txn-group``) and an aborted one on ``txn-topic``; share-group
state of ``share-group`` on ``share-topic`` (offsets 0-4 accepted, 5-6 released, 7
rejected, 8-9 released). ``observe`` asks a broker started on that directory what it
holds: OffsetFetch, DescribeGroups, ConsumerGroupDescribe, DescribeShareGroupOffsets,
the read_committed view, and what a share consumer is given next.

``python -m tests.helpers.coordinator_datadir OUT.tar.gz`` builds the archive
``tests/data/coordinator_datadir.tar.gz`` with the broker found on PYTHONPATH of
``BROKER_PYTHONPATH`` (the previous code) and prints the answers the old broker gave
on it, which ``tests/integration/test_coordinator_datadir.py`` holds as literals.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from protocol.builders import request_builder
from testkit.polling import wait_until
from testkit.raw_client import RawClient

_QUIET = {"log_level": 3}
# Long sessions: the live members are still members when the answers are asked for.
OVERRIDES = (
    "offsets.topic.num.partitions=3",
    "transaction.state.log.num.partitions=3",
    "share.coordinator.state.topic.num.partitions=3",
    "group.consumer.session.timeout.ms=600000",
    "group.consumer.max.session.timeout.ms=600000",
    "group.initial.rebalance.delay.ms=0",
)
CLASSIC, KIP848, TXN_GROUP, SHARE = "classic-group", "kip848-group", "txn-group", "share-group"


def start_broker(data_dir: Path, pythonpath: str, module: str) -> tuple[subprocess.Popen[str], str]:
    """``python -m MODULE serve`` on ``data_dir``; (process, bootstrap)."""
    args = [sys.executable, "-m", module, "serve", "--port", "0", "--data-dir", str(data_dir)]
    for override in OVERRIDES:
        args += ["--override", override]
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if os.environ.get("DEBUG_BROKER") else subprocess.DEVNULL,
        text=True,
        cwd=data_dir.parent,  # not a checkout: ``-m`` puts the cwd first on the path
        env={**os.environ, "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("minikafka ready: bootstrap="):
        proc.kill()
        raise RuntimeError(f"broker did not start: {line!r}")
    return proc, line.split("bootstrap=", 1)[1].split()[0]


def _until(check: Any, what: str, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out: {what}")


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **_QUIET})
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0


def _consume_and_commit(consumer: Consumer, topic: str, count: int) -> None:
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            seen += 1
    assert seen == count, seen
    consumer.commit(asynchronous=False)


def _transactions(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "txn-app", **_QUIET})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("txn-topic", value=b"committed-%d" % i, partition=0)
    meta = Consumer({"bootstrap.servers": bootstrap, "group.id": TXN_GROUP, **_QUIET})
    producer.send_offsets_to_transaction(
        [TopicPartition("classic-topic", 0, 2)], meta.consumer_group_metadata(), 30
    )
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(2):
        producer.produce("txn-topic", value=b"aborted-%d" % i, partition=0)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("txn-topic", value=b"after", partition=0)
    producer.commit_transaction(30)
    meta.close()


def _share(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, SHARE, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource], request_timeout=15).values():
        future.result(timeout=30)
    _produce(bootstrap, "share-topic", [b"s%d" % i for i in range(10)])
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": SHARE,
            "share.acknowledgement.mode": "explicit",
            **_QUIET,
        }
    )
    consumer.subscribe(["share-topic"])
    seen: set[int] = set()
    deadline = time.monotonic() + 60
    while len(seen) < 10 and time.monotonic() < deadline:
        for msg in consumer.poll(0.2) or ():
            if msg.error() is not None or msg.offset() in seen:
                continue
            seen.add(msg.offset())
            o = msg.offset()
            kind = (
                AcknowledgeType.ACCEPT
                if o < 5
                else AcknowledgeType.REJECT
                if o == 7
                else AcknowledgeType.RELEASE
            )
            consumer.acknowledge(msg, kind)
    assert len(seen) == 10, seen
    consumer.commit_sync(30)
    consumer.close()


def write_state(bootstrap: str) -> list[Consumer]:
    """Drive the broker; the live members (close them after the broker is gone)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    topics = [
        NewTopic("classic-topic", 2, 1),
        NewTopic("kip848-topic", 2, 1),
        NewTopic("txn-topic", 1, 1),
        NewTopic("share-topic", 1, 1),
    ]
    for future in admin.create_topics(topics).values():
        future.result(30)
    for topic in ("classic-topic", "kip848-topic"):
        _produce(bootstrap, topic, [b"a", b"b", b"c"], 0)
        _produce(bootstrap, topic, [b"d", b"e"], 1)
    common = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **_QUIET}
    classic = Consumer(
        {
            **common,
            "group.id": CLASSIC,
            "enable.auto.commit": False,
            "session.timeout.ms": 600000,
            "max.poll.interval.ms": 600000,
            "client.id": "classic-client",
        }
    )
    _consume_and_commit(classic, "classic-topic", 5)
    kip848 = Consumer(
        {
            **common,
            "group.id": KIP848,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "client.id": "kip848-client",
        }
    )
    _consume_and_commit(kip848, "kip848-topic", 5)
    _transactions(bootstrap)
    _share(bootstrap)
    return [classic, kip848]


# ----------------------------------------------------------------------- answers
async def _until_loaded(raw: RawClient, ask: Any, errors: Any) -> Any:
    """Ask until no error says the coordinator is still loading (14) or moving (15, 16)."""
    answers: list[Any] = []

    async def loaded() -> bool:
        answers.append(await ask(raw))
        return not {int(e) for e in errors(answers[-1])} & {14, 15, 16}

    await wait_until(loaded, "the coordinators' load", attempts=600)
    return answers[-1]


async def _offsets(raw: RawClient) -> dict[str, Any]:
    b = request_builder(9, 9)

    async def ask(raw: RawClient) -> Any:
        groups = tuple(
            b.OffsetFetchRequestGroup(group_id=g, member_epoch=-1, topics=None)
            for g in (CLASSIC, KIP848, TXN_GROUP)
        )
        return await raw.request(9, 9, "OffsetFetchRequest", groups=groups, require_stable=True)

    answer = await _until_loaded(raw, ask, lambda a: [g.error_code for g in a.groups])
    return {
        g.group_id: sorted(
            [t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata]
            for t in g.topics
            for p in t.partitions
        )
        for g in answer.groups
    }


async def _classic(raw: RawClient) -> list[Any]:
    async def ask(raw: RawClient) -> Any:
        return await raw.request(
            15, 5, "DescribeGroupsRequest", groups=(CLASSIC,), include_authorized_operations=False
        )

    answer = await _until_loaded(raw, ask, lambda a: [g.error_code for g in a.groups])
    (g,) = answer.groups
    members = [
        [
            m.member_id.startswith("classic-client-"),
            m.client_id,
            m.client_host,
            m.group_instance_id,
            m.member_metadata.hex(),
            m.member_assignment.hex(),
        ]
        for m in g.members
    ]
    return [int(g.error_code), g.group_state, g.protocol_type, g.protocol_data, members]


async def _kip848(raw: RawClient) -> list[Any]:
    async def ask(raw: RawClient) -> Any:
        return await raw.request(
            69,
            0,
            "ConsumerGroupDescribeRequest",
            group_ids=(KIP848,),
            include_authorized_operations=False,
        )

    answer = await _until_loaded(raw, ask, lambda a: [g.error_code for g in a.groups])
    (g,) = answer.groups

    def parts(a: Any) -> list[Any]:
        return sorted([str(t.topic_name), sorted(t.partitions)] for t in a.topic_partitions)

    members = [
        [
            m.client_id,
            m.client_host,
            m.member_epoch,
            list(m.subscribed_topic_names),
            m.subscribed_topic_regex,
            parts(m.assignment),
            parts(m.target_assignment),
        ]
        for m in g.members
    ]
    return [
        int(g.error_code),
        g.group_state,
        g.group_epoch,
        g.assignment_epoch,
        g.assignor_name,
        members,
    ]


async def _share_offsets(raw: RawClient) -> list[Any]:
    b = request_builder(90, 1)
    topic = b.DescribeShareGroupOffsetsRequestTopic(topic_name="share-topic", partitions=(0,))

    async def ask(raw: RawClient) -> Any:
        return await raw.request(
            90,
            1,
            "DescribeShareGroupOffsetsRequest",
            groups=(b.DescribeShareGroupOffsetsRequestGroup(group_id=SHARE, topics=(topic,)),),
        )

    answer = await _until_loaded(
        raw,
        ask,
        lambda a: (
            [g.error_code for g in a.groups]
            + [p.error_code for g in a.groups for t in g.topics for p in t.partitions]
        ),
    )
    return [int(g.error_code) for g in answer.groups] + [
        [t.topic_name, p.partition_index, p.start_offset, int(p.error_code)]
        for g in answer.groups
        for t in g.topics
        for p in t.partitions
    ]


async def _raw_answers(bootstrap: str) -> dict[str, Any]:
    raw = await RawClient.connect(bootstrap)
    try:
        return {
            "offsets": await _offsets(raw),
            "classic": await _classic(raw),
            "kip848": await _kip848(raw),
        }
    finally:
        await raw.close()


async def _share_offsets_of(bootstrap: str) -> list[Any]:
    """DescribeShareGroupOffsets once a share consumer has been in the group (share
    groups themselves are not durable here: before, the group is not found)."""
    raw = await RawClient.connect(bootstrap)
    try:
        return await _share_offsets(raw)
    finally:
        await raw.close()


def _read_committed(bootstrap: str) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            **_QUIET,
        }
    )
    consumer.assign([TopicPartition("txn-topic", 0, 0)])
    values: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() == -191:  # _PARTITION_EOF
                break
            raise KafkaException(msg.error())
        values.append(msg.value().decode())
    consumer.close()
    return values


def _share_next(bootstrap: str) -> list[list[int]]:
    """What a share consumer is given next: (offset, delivery count), in offset order."""
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": SHARE,
            "share.acknowledgement.mode": "explicit",  # none: closing releases them
            **_QUIET,
        }
    )
    consumer.subscribe(["share-topic"])
    got: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while len(got) < 4 and time.monotonic() < deadline:
        for msg in consumer.poll(0.2) or ():
            if msg.error() is None:
                got.setdefault(msg.offset(), msg.delivery_count())
    consumer.close()
    return sorted([o, c] for o, c in got.items())


def observe(bootstrap: str) -> dict[str, Any]:
    """What the broker at ``bootstrap`` answers of the state ``write_state`` left."""
    answers = asyncio.run(_raw_answers(bootstrap))
    answers["read_committed"] = _read_committed(bootstrap)
    answers["share_next"] = _share_next(bootstrap)
    answers["share_offsets"] = asyncio.run(_share_offsets_of(bootstrap))
    return answers


def _build(out: Path, pythonpath: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        proc, bootstrap = start_broker(data, pythonpath, "broker")
        try:
            members = write_state(bootstrap)
            time.sleep(1)  # the group coordinators' last appends
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        for consumer in members:
            consumer.close()
        with tarfile.open(out, "w:gz") as tar:
            tar.add(data, arcname="data")
        again = Path(tmp) / "again"
        shutil.copytree(data, again)
        proc, bootstrap = start_broker(again, pythonpath, "broker")
        try:
            return observe(bootstrap)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


if __name__ == "__main__":
    print(json.dumps(_build(Path(sys.argv[1]), os.environ["BROKER_PYTHONPATH"]), indent=1))
