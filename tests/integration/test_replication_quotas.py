"""Replication quotas hold back a follower catching up, as Kafka's do.

Three brokers in this test's event loop, an RF 3 topic with ``min.insync.replicas`` 2.
One follower's replication is paused (the control endpoint's fault) until the leader
drops it from the ISR, while aiokafka writes a megabyte. Then confluent-kafka's
AdminClient sets a throttle with IncrementalAlterConfigs — as ``kafka-reassign-partitions.sh
--throttle`` does: the BROKER rate (``leader.`` on the leader, or ``follower.`` on the
follower) and the TOPIC's throttled replicas ``*`` — and the follower resumes.

States waited for, never times: the throttled follower makes progress yet stays out of
the ISR, behind the leader, with the side's byte-rate sensor counting, while acks=all is
answered by the two replicas in sync (Kafka never throttles an in-sync replica); once the
throttle is removed it catches up and rejoins the ISR. (With ``min.insync.replicas`` 3
the high watermark would stop while the follower is out -- Kafka 4's strict min ISR with
eligible leader replicas -- and a follower at the high watermark rejoins at once: there
would be nothing to throttle.) A reassignment throttled as the tool throttles it (leader
side on the current replica, follower side on the one being added) completes only once
the throttle is lifted. A throttle that holds nothing back fails every test: each waits
for the side's ``throttled_count`` (reads or fetches held back) before looking.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.quota.replication_quota_manager import ReplicationQuotas
from testkit.polling import wait_until
from tests.helpers.cluster import isr, leader_of, raw_to_leader
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

TOPIC = "throttled"
RATE = 10_000  # bytes a second: the megabyte would take 100 s to catch up
VALUE = b"r" * 10_000
RECORDS = 100
LONG = 1200  # polls of 50 ms: a minute, for a loaded machine (and the bound that
# fails a test whose throttle never holds anything back)


def alter_configs(
    bootstrap: str, brokers: dict[int, dict[str, str | None]], topic: dict[str, str | None]
) -> None:
    """IncrementalAlterConfigs with confluent-kafka: SET each value, DELETE each None
    (one BROKER resource a call, as librdkafka requires)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    def entries(configs: dict[str, str | None]) -> list[Any]:
        return [
            ConfigEntry(
                name,
                value or "",
                incremental_operation=(
                    AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
                ),
            )
            for name, value in configs.items()
        ]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    calls = [
        [ConfigResource("BROKER", str(b), incremental_configs=entries(c))]
        for b, c in brokers.items()
    ]
    calls.append([ConfigResource("TOPIC", TOPIC, incremental_configs=entries(topic))])
    for resources in calls:
        for future in admin.incremental_alter_configs(resources, request_timeout=60).values():
            future.result()


def reassign(bootstrap: str, replicas: list[int]) -> None:
    """kafka-python's alter_partition_reassignments for partition 0."""
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.alter_partition_reassignments({KafkaTopicPartition(TOPIC, 0): replicas})
    finally:
        admin.close()


def throttle(side: str, rate: int | None) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """(the BROKER configs, the TOPIC configs) that throttle ``side`` (None: remove)."""
    return (
        {f"{side}.replication.throttled.rate": None if rate is None else str(rate)},
        {f"{side}.replication.throttled.replicas": None if rate is None else "*"},
    )


async def _fill(app: MiniKafka) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks=1)
    await producer.start()
    try:
        sent = [await producer.send(TOPIC, VALUE, partition=0) for _ in range(RECORDS)]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


async def _acks_all(app: MiniKafka) -> ErrorCode:
    raw = await raw_to_leader(app, TOPIC, 0)
    try:
        error, _ = await raw.produce(TOPIC, 0, b"acks-all", acks=-1, timeout_ms=30_000)
    finally:
        await raw.close()
    return error


def _quotas(app: MiniKafka, broker_id: int) -> ReplicationQuotas:
    quotas = app.brokers[broker_id].replica_manager.replication_quotas
    assert quotas is not None
    return quotas


@pytest.mark.parametrize("side", ["leader", "follower"])
async def test_a_throttle_keeps_a_catching_up_follower_out_of_the_isr(side: str) -> None:
    overrides: dict[str, Any] = {
        "replica.lag.time.max.ms": "1000",
        "replica.fetch.max.bytes": "16384",  # one 10 kB batch a fetch
    }
    async with running_cluster(3, **overrides) as app:
        app.cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
        leader_id = leader_of(app, TOPIC)
        follower_id = max(b for b in range(3) if b != leader_id)
        leader = app.brokers[leader_id].replica_manager.partitions[(TOPIC, 0)]
        follower = app.brokers[follower_id].replica_manager.partitions[(TOPIC, 0)]
        app.pause_replication(follower_id)
        await _fill(app)
        await wait_until(lambda: follower_id not in isr(app, TOPIC), "ISR shrink", attempts=LONG)
        assert follower.log_end_offset == 0

        throttled_id = leader_id if side == "leader" else follower_id
        broker_configs, topic_configs = throttle(side, RATE)
        await asyncio.to_thread(
            alter_configs, app.bootstrap, {throttled_id: broker_configs}, topic_configs
        )
        app.resume_replication(follower_id)
        quota = getattr(_quotas(app, throttled_id), side)
        await wait_until(
            lambda: follower.log_end_offset >= 3 and quota.throttled_count >= 2,
            "progress, held back",
            attempts=LONG,
        )
        # No await since the wait: the state of one instant.
        assert follower.log_end_offset < leader.log_end_offset
        assert follower_id not in isr(app, TOPIC)
        assert quota.byte_rate() > 0
        assert quota.upper_bound == RATE
        assert await _acks_all(app) is ErrorCode.none  # the throttled follower holds none up

        broker_configs, topic_configs = throttle(side, None)
        await asyncio.to_thread(
            alter_configs, app.bootstrap, {throttled_id: broker_configs}, topic_configs
        )
        await wait_until(lambda: follower_id in isr(app, TOPIC), "ISR expand", attempts=LONG)
        assert await _acks_all(app) is ErrorCode.none
        assert follower.log_end_offset >= RECORDS


async def test_a_throttled_reassignment_completes_once_the_throttle_is_lifted() -> None:
    """As ``kafka-reassign-partitions.sh --throttle`` sets it: the leader side on the
    current replica (``0:0``), the follower side on the one being added (``0:1``)."""
    async with running_cluster(3, **{"replica.fetch.max.bytes": "16384"}) as app:
        app.cluster.create_topic(TOPIC, 1, 1, {}, assignment=[[0]])
        await _fill(app)
        rates: dict[int, dict[str, str | None]] = {
            0: {"leader.replication.throttled.rate": str(RATE)},
            1: {"follower.replication.throttled.rate": str(RATE)},
        }
        replicas: dict[str, str | None] = {
            "leader.replication.throttled.replicas": "0:0",
            "follower.replication.throttled.replicas": "0:1",
        }
        await asyncio.to_thread(alter_configs, app.bootstrap, rates, replicas)
        await asyncio.to_thread(reassign, app.bootstrap, [0, 1])
        state = app.cluster.topics[TOPIC].partitions[0]
        await wait_until(lambda: (TOPIC, 0) in app.brokers[1].replica_manager.partitions, "added")
        adding = app.brokers[1].replica_manager.partitions[(TOPIC, 0)]
        leader_quota, follower_quota = _quotas(app, 0).leader, _quotas(app, 1).follower
        await wait_until(
            lambda: (
                adding.log_end_offset >= 3
                and leader_quota.throttled_count + follower_quota.throttled_count >= 2
            ),
            "progress, held back",
            attempts=LONG,
        )
        # No await since the wait: the state of one instant.
        assert adding.log_end_offset < RECORDS
        assert (state.replicas, state.adding_replicas, state.isr) == ([0, 1], [1], [0])
        assert leader_quota.byte_rate() > 0 and follower_quota.byte_rate() > 0

        lifted = {broker: {name: None for name in configs} for broker, configs in rates.items()}
        await asyncio.to_thread(
            alter_configs, app.bootstrap, lifted, {name: None for name in replicas}
        )
        await wait_until(lambda: state.adding_replicas == [], "reassigned", attempts=LONG)
        assert (state.replicas, sorted(state.isr)) == ([0, 1], [0, 1])
        assert adding.log_end_offset >= RECORDS
