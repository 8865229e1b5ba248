"""Share groups as Kafka 4.3/4.4 run them, with confluent-kafka 2.16's ``ShareConsumer``.

The GROUP configs set through the Admin API as a user would (``share.isolation.level``,
``share.record.lock.duration.ms`` within the broker's configured bounds,
``share.delivery.count.limit``, ``share.partition.max.record.locks``), KIP-1206's
batch-optimized acquisition past ``max.poll.records``, and a deleted-and-recreated topic
whose records start fresh. Each group reads from the earliest offset
(``share.auto.offset.reset``), so records may be produced before the consumer starts.
Tests wait for states (bounded), never for fixed times.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from broker.app import MiniKafka
from broker.share.share_partition import SharePartition
from testkit.polling import wait_until
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

_QUIET = {"log_level": 3}
WAIT = {"attempts": 1200, "step_s": 0.05}  # 60 s at most, on a loaded machine


def _set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in {"share.auto.offset.reset": "earliest", **configs}.items()
    ]
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


class Member:
    """A share consumer polling in its own thread, recording (value, delivery count);
    in explicit mode ``decide`` says how each delivery is acknowledged; a None answer
    leaves it unacknowledged and the member stops polling (librdkafka refuses a poll
    before every record of the last is acknowledged) until it is stopped."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf: Any) -> None:
        self.decide = conf.pop("decide", None)
        if self.decide is not None:
            conf["share.acknowledgement.mode"] = "explicit"
        self.consumer = ShareConsumer(
            {"bootstrap.servers": bootstrap, "group.id": group, **_QUIET, **conf}
        )
        self.topic = topic
        self.polls: list[list[tuple[bytes, int]]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def deliveries(self) -> list[tuple[bytes, int]]:
        with self._lock:
            return [d for poll in self.polls for d in poll]

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                batch = [m for m in self.consumer.poll(0.1) or () if m.error() is None]
                if not batch:
                    continue
                with self._lock:
                    self.polls.append([(m.value(), m.delivery_count()) for m in batch])
                held = False
                for msg in batch if self.decide is not None else ():
                    kind = self.decide(msg.value(), msg.delivery_count())
                    if kind is None:
                        held = True
                    else:
                        self.consumer.acknowledge(msg, kind)
                if held:  # no poll before every record is acknowledged: hold until stopped
                    self._stop.wait(60)
        finally:
            self.consumer.close()

    async def __aenter__(self) -> Member:
        self._task = asyncio.create_task(asyncio.to_thread(self.run))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await asyncio.wait_for(self._task, 60)


def _share_partition(app: MiniKafka, group: str, topic: str) -> SharePartition | None:
    return app.brokers[0].services.share_partition_manager.share_partition(group, (topic, 0))


def _produce(bootstrap: str, topic: str, values: list[bytes], **conf: Any) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **_QUIET, **conf})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0


def _transactions(bootstrap: str, topic: str) -> Producer:
    """Committed a0-a2, aborted b0-b2, then c0-c2 left open (the caller commits)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}", **_QUIET}
    )
    producer.init_transactions(30)
    for prefix, end in ((b"a", producer.commit_transaction), (b"b", producer.abort_transaction)):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, value=prefix + b"%d" % i, partition=0)
        producer.flush(30)
        end(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"c%d" % i, partition=0)
    producer.flush(30)
    return producer


async def test_read_committed_share_group_skips_aborted_and_waits_behind_open_transactions() -> (
    None
):
    group, topic = f"rc-{uuid.uuid4().hex[:8]}", "share-read-committed"
    async with running_cluster() as app:
        app.cluster.create_topic(topic, 1, 1, {})
        await asyncio.to_thread(
            _set_group_configs, app.bootstrap, group, {"share.isolation.level": "read_committed"}
        )
        producer = await asyncio.to_thread(_transactions, app.bootstrap, topic)
        # a record after the open transaction: past the LSO, not delivered yet
        await asyncio.to_thread(_produce, app.bootstrap, topic, [b"d0"])
        async with Member(app.bootstrap, group, topic) as member:
            await wait_until(
                lambda: len(member.deliveries()) >= 3, "the committed transaction", **WAIT
            )
            sp = _share_partition(app, group, topic)
            partition = app.brokers[0].services.replica_manager.online_partition((topic, 0))
            assert sp is not None and partition is not None
            # a0-a2, marker, b0-b2 (archived once their abort marker is written), marker:
            # the share partition ends at the LSO, before the open transaction
            await wait_until(lambda: sp.end_offset == 8, "the end offset at the LSO", **WAIT)
            assert partition.last_stable_offset == 8
            assert [v for v, _ in member.deliveries()] == [b"a0", b"a1", b"a2"]
            await asyncio.to_thread(producer.commit_transaction, 30)
            await wait_until(
                lambda: len(member.deliveries()) >= 7, "the rest, once committed", **WAIT
            )
        values = [v for v, _ in member.deliveries()]
        assert values == [b"a0", b"a1", b"a2", b"c0", b"c1", b"c2", b"d0"]
        assert {count for _, count in member.deliveries()} == {1}


async def test_group_configs_within_the_brokers_bounds_and_whole_batches() -> None:
    """share.record.lock.duration.ms=5000 is accepted by a broker whose minimum is 1000
    (confluent-kafka-python's test broker); the group's delivery count limit archives a
    record released twice; max.poll.records=5 gets a 20-record batch whole (KIP-1206)."""
    group, topic = f"cfg-{uuid.uuid4().hex[:8]}", "share-group-configs"
    bounds = {
        "group.share.record.lock.duration.ms": "1000",
        "group.share.min.record.lock.duration.ms": "1000",
    }
    async with running_cluster(**bounds) as app:
        app.cluster.create_topic(topic, 1, 1, {})
        configs = {
            "share.record.lock.duration.ms": "5000",
            "share.delivery.count.limit": "2",
            "share.partition.max.record.locks": "100",
        }
        await asyncio.to_thread(_set_group_configs, app.bootstrap, group, configs)
        with pytest.raises(KafkaException, match=r"share\.delivery\.count\.limit"):
            await asyncio.to_thread(
                _set_group_configs, app.bootstrap, group, {"share.delivery.count.limit": "11"}
            )
        values = [b"%d" % i for i in range(20)]
        await asyncio.to_thread(_produce, app.bootstrap, topic, values, **{"linger.ms": 500})

        def decide(value: bytes, _count: int) -> Any:
            return AcknowledgeType.RELEASE if value == b"0" else AcknowledgeType.ACCEPT

        async with Member(
            app.bootstrap, group, topic, decide=decide, **{"max.poll.records": 5}
        ) as member:
            await wait_until(
                lambda: (
                    (sp := _share_partition(app, group, topic)) is not None
                    and sp.start_offset == 20
                ),
                "every record accepted or archived",
                **WAIT,
            )
        # the whole batch, past max.poll.records
        assert [len(poll) for poll in member.polls][:1] == [20], member.polls
        # released at each delivery, archived at the group's limit (2), not Kafka's 5:
        # librdkafka sometimes drops the redelivery, whose lock then runs out (5 s) and
        # archives it as well
        assert [c for v, c in member.deliveries() if v == b"0"] in ([1, 2], [1])
        sp = _share_partition(app, group, topic)
        assert sp is not None and sp.config.record_lock_duration_ms == 5000
        assert sp.config.max_record_locks == 100


async def test_a_recreated_topic_starts_fresh_for_the_share_group() -> None:
    group, topic = f"re-{uuid.uuid4().hex[:8]}", "share-recreated"
    async with running_cluster() as app:
        admin = AdminClient({"bootstrap.servers": app.bootstrap, **_QUIET})
        app.cluster.create_topic(topic, 1, 1, {})
        await asyncio.to_thread(_set_group_configs, app.bootstrap, group, {})
        await asyncio.to_thread(_produce, app.bootstrap, topic, [b"old0", b"old1"])
        # delivered and never acknowledged: their delivery count is 1 when the topic goes
        async with Member(app.bootstrap, group, topic, decide=lambda _v, _c: None) as first:
            await wait_until(lambda: len(first.deliveries()) == 2, "the old records", **WAIT)
            old_id = app.cluster.topics[topic].topic_id
            for future in admin.delete_topics([topic]).values():
                await asyncio.to_thread(future.result, 30)
        coordinator = app.brokers[0].services.coordinators.share
        await wait_until(
            lambda: (
                not [k for s in coordinator._shards.values() for k in s if k.topic_id == old_id]
            ),
            "the deleted topic's share state deleted",
            **WAIT,
        )
        app.cluster.create_topic(topic, 1, 1, {})
        await asyncio.to_thread(_produce, app.bootstrap, topic, [b"new0", b"new1", b"new2"])
        async with Member(app.bootstrap, group, topic) as second:
            await wait_until(lambda: len(second.deliveries()) >= 3, "the new records", **WAIT)
        assert second.deliveries() == [(b"new0", 1), (b"new1", 1), (b"new2", 1)]
