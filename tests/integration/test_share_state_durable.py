"""Share-partition state survives its leader (KIP-932's share coordinator), on 3 brokers.

A share partition writes every change of durable state (acknowledged, released,
archived offsets and its start offset) to the share coordinator, which keeps it in
``__share_group_state`` (acks=all, so every in-sync replica has it); the partition's
next leader reads it back. Phase one sets the state precisely with a raw member
(ShareFetch, then ShareAcknowledge: ACCEPT some, RELEASE some, hold the rest until its
connection closes, which ends its share session and releases them); phase two is
confluent-kafka's ``ShareConsumer`` reading after the leader was stopped, or after the
whole cluster restarted on its data directory. Acknowledged records never come back;
released ones come back with their delivery count (2). Tests wait for states.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.share.share_partition import RecordState, SharePartition
from protocol.builders import request_builder
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.helpers.cluster import leader_of
from tests.integration.conftest import FAST_GROUPS, running_cluster
from tests.integration.test_consumer_group_configs import _alter
from tests.integration.test_share_groups import WAIT, ShareMember, _produce, _start, _stop

pytestmark = pytest.mark.asyncio

ACCEPT, RELEASE = 1, 2
ACCEPTED = range(0, 5)
RELEASED = range(5, 7)
HELD = range(7, 10)  # released when the member's connection closes
SETTINGS = {
    "share.coordinator.state.topic.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
}
MEMBER = "raw-member"


def _share_partition(app: MiniKafka, group: str, topic: str) -> SharePartition | None:
    """The share partition on the partition's current leader."""
    leader = leader_of(app, topic)
    if leader in app.stopped_brokers:
        return None
    return app.brokers[leader].services.share_partition_manager.share_partition(group, (topic, 0))


def _written(app: MiniKafka, group: str, topic: str, writes: int) -> bool:
    """The leader handed ``writes`` state writes to the persister, and every one of them
    was answered: the coordinator's in-sync replicas have them."""
    sp = _share_partition(app, group, topic)
    manager = app.brokers[leader_of(app, topic)].services.share_partition_manager
    return sp is not None and sp.writes >= writes and manager.pending_writes == 0


async def _raw_request(raw: RawClient, api_key: int, message: str, **fields: Any) -> Any:
    return await raw.request(api_key, 1, message, **fields)


def _partitions(api_key: int, topic_id: uuid.UUID, acks: tuple[tuple[int, int, int], ...]) -> Any:
    b = request_builder(api_key, 1)
    batches = tuple(
        b.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=(t,))
        for f, last, t in acks
    )
    if api_key == 78:
        partition = b.FetchPartition(partition_index=0, acknowledgement_batches=batches)
        return (b.FetchTopic(topic_id=topic_id, partitions=(partition,)),)
    partition = b.AcknowledgePartition(partition_index=0, acknowledgement_batches=batches)
    return (b.AcknowledgeTopic(topic_id=topic_id, partitions=(partition,)),)


async def _set_state(app: MiniKafka, group: str, topic: str) -> None:
    """The raw member acquires offsets 0-9, accepts 0-4, releases 5-6 and holds 7-9
    until its connection closes."""
    leader = app.brokers[leader_of(app, topic)]
    raw = await RawClient.connect(leader.advertised_host, leader.port)
    topic_id = app.cluster.topics[topic].topic_id
    common = {"group_id": group, "member_id": MEMBER}
    fetch = {"min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500}
    try:
        opened = await _raw_request(
            raw, 78, "ShareFetchRequest", **common, **fetch, share_session_epoch=0,
            max_wait=0, topics=_partitions(78, topic_id, ()), forgotten_topics_data=(),
        )  # fmt: skip
        assert opened.error_code == ErrorCode.none
        await wait_until(
            lambda: (sp := _share_partition(app, group, topic)) is not None and sp.initialized,
            "the share partition initialised from the share coordinator",
            **WAIT,
        )
        await asyncio.to_thread(_produce, app.bootstrap, topic, [b"%d" % i for i in range(10)])
        got = await _raw_request(
            raw, 78, "ShareFetchRequest", **common, **fetch, share_session_epoch=1,
            max_wait=30_000, topics=_partitions(78, topic_id, ()), forgotten_topics_data=(),
        )  # fmt: skip
        acquired = [
            (a.first_offset, a.last_offset, a.delivery_count)
            for t in got.responses
            for p in t.partitions
            for a in p.acquired_records
        ]
        assert acquired == [(0, 9, 1)]
        acks = ((0, 4, ACCEPT), (5, 6, RELEASE))
        acked = await _raw_request(
            raw, 79, "ShareAcknowledgeRequest", **common, share_session_epoch=2,
            topics=_partitions(79, topic_id, acks),
        )  # fmt: skip
        assert [p.error_code for t in acked.responses for p in t.partitions] == [ErrorCode.none]
        # the answer came once the share coordinator's in-sync replicas had the state
        assert _written(app, group, topic, 1)
    finally:
        await raw.close()
    await wait_until(lambda: _written(app, group, topic, 2), "the held ones released", **WAIT)
    sp = _share_partition(app, group, topic)
    assert sp is not None and all(
        sp.record_state(o) == (RecordState.AVAILABLE, 1, None) for o in HELD
    )


async def _read_the_rest(app: MiniKafka, group: str, topic: str) -> dict[int, int]:
    """A ShareConsumer reads (and acknowledges) what the group has left: offset ->
    delivery count."""
    member = ShareMember(app.bootstrap, group, topic)
    tasks = await _start([member])
    try:
        await wait_until(
            lambda: (
                (sp := _share_partition(app, group, topic)) is not None
                and sp.initialized
                and sp.start_offset >= 10
            ),
            "every record done with",
            **WAIT,
        )
    finally:
        await _stop([member], tasks)
    assert not member.errors
    delivered = member.delivered()
    assert len(delivered) == len({offset for offset, _ in delivered})  # each once
    return dict(delivered)


def _expected() -> dict[int, int]:
    return {o: 2 for o in (*RELEASED, *HELD)}


async def test_acknowledgements_survive_a_leader_failover() -> None:
    group, topic = f"share-{uuid.uuid4().hex[:8]}", "share-failover"
    async with running_cluster(brokers=3, **SETTINGS) as app:
        app.cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
        await _set_state(app, group, topic)
        old = leader_of(app, topic)
        await app.stop_broker(old)
        await wait_until(lambda: leader_of(app, topic) not in (old, -1), "a new leader", **WAIT)
        assert await _read_the_rest(app, group, topic) == _expected()
        # the share partitions reached the share coordinator over TCP (Kafka's APIs)
        counts = app.request_metrics.values()
        assert sum(m.request_count("ReadShareGroupState") for m in counts) >= 2
        assert sum(m.request_count("WriteShareGroupState") for m in counts) >= 3


async def test_acknowledgements_survive_a_restart_with_a_data_dir(tmp_path: Path) -> None:
    group, topic = f"share-{uuid.uuid4().hex[:8]}", "share-restart"
    async with running_cluster(brokers=3, data_dir=tmp_path, **SETTINGS) as app:
        app.cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
        await _set_state(app, group, topic)
    config = BrokerConfig.model_validate({**FAST_GROUPS, **SETTINGS})
    async with MiniKafka(config, brokers=3, port=0, data_dir=tmp_path) as again:
        assert await _read_the_rest(again, group, topic) == _expected()


async def test_share_auto_offset_reset_earliest_reads_what_was_there_before() -> None:
    """A GROUP config set with AdminClient's IncrementalAlterConfigs: a share partition
    without durable state starts at the log start instead of the high watermark."""
    group, topic = f"share-{uuid.uuid4().hex[:8]}", "share-earliest"
    async with running_cluster(brokers=3, **SETTINGS) as app:
        app.cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
        await asyncio.to_thread(_produce, app.bootstrap, topic, [b"%d" % i for i in range(4)])
        await asyncio.to_thread(
            _alter, app.bootstrap, group, {"share.auto.offset.reset": "earliest"}
        )
        member = ShareMember(app.bootstrap, group, topic)
        tasks = await _start([member])
        try:
            await wait_until(lambda: len(member.offsets()) >= 4, "the 4 records delivered", **WAIT)
        finally:
            await _stop([member], tasks)
        assert sorted(member.delivered()) == [(o, 1) for o in range(4)]


async def test_describe_share_group_offsets_reads_the_start_offsets() -> None:
    """DescribeShareGroupOffsets (90): each partition's share-partition start offset as the
    share coordinator has it (-1 without durable state), the lag behind the high
    watermark, and Kafka's errors for an unknown group or topic. As Kafka 4.2's, the
    durable start offset stays where the acknowledgement's write found it (0: it moves
    with the next write) and the lag subtracts the offsets past it already done."""
    group, topic = f"share-{uuid.uuid4().hex[:8]}", "share-described"
    async with running_cluster(**SETTINGS) as app:
        app.cluster.create_topic(topic, 2, 1, {})
        member = ShareMember(app.bootstrap, group, topic)
        tasks = await _start([member])
        try:
            await wait_until(
                lambda: all(
                    (sp := _on_leader(app, group, topic, p)) is not None and sp.initialized
                    for p in (0, 1)
                ),
                "both share partitions initialised",
                **WAIT,
            )
            await asyncio.to_thread(_produce, app.bootstrap, topic, [b"a", b"b", b"c"])
            await wait_until(
                lambda: (
                    (sp := _on_leader(app, group, topic, 0)) is not None
                    and sp.start_offset == 3
                    and app.brokers[0].services.share_partition_manager.pending_writes == 0
                ),
                "the three acknowledged",
                **WAIT,
            )
        finally:
            await _stop([member], tasks)
        raw = await RawClient.connect(app.bootstrap)
        try:
            b = request_builder(90, 1)
            described = await raw.request(
                90,
                1,
                "DescribeShareGroupOffsetsRequest",
                groups=(
                    b.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None),
                    b.DescribeShareGroupOffsetsRequestGroup(
                        group_id=group,
                        topics=(
                            b.DescribeShareGroupOffsetsRequestTopic(
                                topic_name="no-such-topic", partitions=(0,)
                            ),
                        ),
                    ),
                    b.DescribeShareGroupOffsetsRequestGroup(group_id="no-such-group", topics=None),
                ),
            )
        finally:
            await raw.close()
    every, unknown_topic, unknown_group = described.groups
    assert every.error_code == ErrorCode.none and [t.topic_name for t in every.topics] == [topic]
    assert [
        (p.partition_index, p.start_offset, p.lag, p.error_code) for p in every.topics[0].partitions
    ] == [(0, 0, 0, ErrorCode.none), (1, -1, -1, ErrorCode.none)]
    assert [p.error_code for p in unknown_topic.topics[0].partitions] == [
        ErrorCode.unknown_topic_or_partition
    ]
    assert unknown_group.error_code == ErrorCode.group_id_not_found


def _on_leader(app: MiniKafka, group: str, topic: str, partition: int) -> SharePartition | None:
    leader = leader_of(app, topic, partition)
    manager = app.brokers[leader].services.share_partition_manager
    return manager.share_partition(group, (topic, partition))
