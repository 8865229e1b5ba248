"""Replication quotas hold back a follower catching up, as Kafka's do.

Three brokers in this test's event loop, an RF 3 topic with ``min.insync.replicas`` 3.
One follower's replication is paused (the control endpoint's fault) until the leader
drops it from the ISR, while aiokafka writes a megabyte. Then confluent-kafka's
AdminClient sets a throttle with IncrementalAlterConfigs — as ``kafka-reassign-partitions.sh
--throttle`` does: the BROKER rate (``leader.`` on the leader, or ``follower.`` on the
follower) and the TOPIC's throttled replicas ``*`` — and the follower resumes.

States waited for, never times: the throttled follower makes progress yet stays out of
the ISR, behind the leader, with the side's byte-rate sensor counting, and an acks=all
produce is refused NOT_ENOUGH_REPLICAS (Kafka never throttles an in-sync replica, so a
throttle shows in acks=all as a partition kept below its minimum ISR, not as a parked
produce); once the throttle is removed it catches up, rejoins the ISR, and acks=all is
answered.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.quota.replication_quota_manager import ReplicationQuotas
from tests.helpers.cluster import isr, leader_of, raw_to_leader, wait_until
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

TOPIC = "throttled"
RATE = 10_000  # bytes a second: the megabyte would take 100 s to catch up
VALUE = b"r" * 10_000
RECORDS = 100
LONG = 1200  # polls of 50 ms: a minute, for a loaded machine


def alter_configs(bootstrap: str, broker_id: int, rate_name: str, rate: str | None) -> None:
    """IncrementalAlterConfigs: a BROKER rate and the TOPIC's throttled replicas (SET),
    or both removed (DELETE) when ``rate`` is None."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    op = AlterConfigOpType.SET if rate is not None else AlterConfigOpType.DELETE
    replicas_name = rate_name.replace(".rate", ".replicas")
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    resources = [
        ConfigResource(
            "BROKER",
            str(broker_id),
            incremental_configs=[ConfigEntry(rate_name, rate or "", incremental_operation=op)],
        ),
        ConfigResource(
            "TOPIC",
            TOPIC,
            incremental_configs=[ConfigEntry(replicas_name, "*", incremental_operation=op)],
        ),
    ]
    for future in admin.incremental_alter_configs(resources, request_timeout=60).values():
        future.result()


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
        app.cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "3"})
        leader_id = leader_of(app, TOPIC)
        follower_id = max(b for b in range(3) if b != leader_id)
        leader = app.brokers[leader_id].replica_manager.partitions[(TOPIC, 0)]
        follower = app.brokers[follower_id].replica_manager.partitions[(TOPIC, 0)]
        app.pause_replication(follower_id)
        await _fill(app)
        await wait_until(lambda: follower_id not in isr(app, TOPIC), "ISR shrink", attempts=LONG)
        assert follower.log_end_offset == 0

        throttled_id = leader_id if side == "leader" else follower_id
        rate_name = f"{side}.replication.throttled.rate"
        await asyncio.to_thread(alter_configs, app.bootstrap, throttled_id, rate_name, str(RATE))
        app.resume_replication(follower_id)
        await wait_until(lambda: follower.log_end_offset >= 3, "progress", attempts=LONG)
        # No await since the wait: the state of one instant.
        assert follower.log_end_offset < leader.log_end_offset
        assert follower_id not in isr(app, TOPIC)
        quota = getattr(_quotas(app, throttled_id), side)
        assert quota.byte_rate() > 0
        assert quota.upper_bound == RATE
        assert await _acks_all(app) is ErrorCode.not_enough_replicas

        await asyncio.to_thread(alter_configs, app.bootstrap, throttled_id, rate_name, None)
        await wait_until(lambda: follower_id in isr(app, TOPIC), "ISR expand", attempts=LONG)
        assert await _acks_all(app) is ErrorCode.none
        assert follower.log_end_offset >= RECORDS
