"""A quota-throttled producer: ``producer_byte_rate`` set for its client id through the
admin API (AlterClientQuotas), then acks=all sends to ``sim-events``, one record per
Produce, each response's ``throttle_time`` waited out before that broker is asked again
(`RawCluster`; KIP-219's broker mutes the connection meanwhile anyway).

Sends are not retried (no idempotence: a retry could write twice), so what it was told is
written is exactly what it must find: acknowledged records go to ``acked_all`` with the
idempotent producer's, for the lost-write checks. The throttle it honoured is counted in
the event log (`EventLog.throttled_ms`).
"""

from __future__ import annotations

import asyncio
import random

from kio.schema.errors import ErrorCode

from protocol.builders import request_builder
from protocol.record_builder import build_record_batch
from simulation.clients.raw import RawCluster, RawError
from simulation.history import History
from virtual_time.determinism import DEFAULT_EPOCH_S

CLIENT_ID = "sim-throttled"
#: Bytes per second: below what one record every 1/rate s of ~80-byte batches needs.
BYTE_RATE = 50.0
PRODUCE, ALTER_CLIENT_QUOTAS = 0, 49


async def set_quota(cluster: RawCluster, client_id: str, byte_rate: float) -> ErrorCode:
    b = request_builder(ALTER_CLIENT_QUOTAS, 1)
    answer = await cluster.call(
        -1, ALTER_CLIENT_QUOTAS, 1, "AlterClientQuotasRequest",
        entries=(b.EntryData(
            entity=(b.EntityData(entity_type="client-id", entity_name=client_id),),
            ops=(b.OpData(key="producer_byte_rate", value=byte_rate, remove=False),),
        ),),
        validate_only=False,
    )  # fmt: skip
    code: ErrorCode = answer.entries[0].error_code
    return code


async def produce_throttled(
    bootstrap: str, stop_at_s: float, history: History, rng: random.Random, topic: str,
    rate_per_s: float,
) -> None:  # fmt: skip
    cluster = RawCluster(
        bootstrap, CLIENT_ID, on_throttle=lambda ms: history.events.throttled(CLIENT_ID, ms)
    )
    loop = asyncio.get_running_loop()
    try:
        while loop.time() < stop_at_s:
            try:
                if await set_quota(cluster, CLIENT_ID, BYTE_RATE) is ErrorCode.none:
                    break
            except RawError:
                pass
            await asyncio.sleep(1.0)
        n = 0
        leaders: dict[int, int] = {}
        while loop.time() < stop_at_s:
            value = b"q-%d" % n
            partition = n % 3
            n += 1
            try:
                if partition not in leaders:
                    leaders = await cluster.leaders(topic)
                leader = leaders.get(partition)
                if leader is None or not await _send(
                    cluster, history, topic, partition, leader, value
                ):
                    leaders = {}  # a new leader, probably: ask the metadata again
            except RawError as exc:
                leaders = {}
                history.send_failures[f"throttled {type(exc).__name__}"] += 1
            await asyncio.sleep(rng.expovariate(rate_per_s))
    finally:
        await cluster.close()


async def _send(
    cluster: RawCluster, history: History, topic: str, partition: int, leader: int,
    value: bytes,
) -> bool:  # fmt: skip
    loop = asyncio.get_running_loop()
    batch = build_record_batch(
        [(None, value, ())], timestamp_ms=int((DEFAULT_EPOCH_S + loop.time()) * 1000)
    )
    b = request_builder(PRODUCE, 9)
    answer = await cluster.call(
        leader, PRODUCE, 9, "ProduceRequest", transactional_id=None, acks=-1, timeout=10_000,
        topic_data=(b.TopicProduceData(name=topic, partition_data=(
            b.PartitionProduceData(index=partition, records=batch),)),),
    )  # fmt: skip
    found = answer.responses[0].partition_responses[0]
    if found.error_code is not ErrorCode.none:
        history.send_failures[f"throttled {found.error_code.name}"] += 1
        return False
    history.acked_all[(topic, partition, int(found.base_offset))] = value
    return True
