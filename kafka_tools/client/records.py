"""Producing (Kafka's default partitioner, retries on leader changes) and fetching."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.client.cluster import (
    FETCH,
    PRODUCE,
    RETRIABLE,
    AdminError,
    KafkaClient,
    error_name,
)
from protocol.builders import Builder
from protocol.record_batch import (
    CorruptRecordError,
    Record,
    iter_batches,
    iter_records,
)
from protocol.record_builder import build_record_batch

# -- producing --------------------------------------------------------------------------


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (a signed 32-bit result), which its partitioner uses."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(length // 4):
        k = int.from_bytes(data[i * 4 : i * 4 + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail, rest = length & ~3, length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: bytes | None, partitions: int, sticky: int) -> int:
    """Kafka's default partitioner: murmur2 of the key, else the batch's sticky one."""
    if key is None:
        return sticky
    return (murmur2(key) & 0x7FFFFFFF) % partitions


async def produce(
    client: KafkaClient,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes]],
    acks: int = -1,
    timeout_ms: int = 30000,
    partition: int | None = None,
    retries: int = 10,
) -> int:
    """Send ``records`` (key, value) to ``topic`` as one batch per partition; returns
    how many were acknowledged. Leader changes are retried after a metadata refresh."""
    view = await client.partitions_of(topic, auto_create=True)
    count = len(view.partitions)
    if partition is not None and partition not in view.partitions:
        raise AdminError(f"topic {topic!r} has no partition {partition} (it has {count})")
    sticky = partition if partition is not None else random.randrange(count)
    pending: dict[int, list[tuple[bytes | None, bytes]]] = {}
    for key, value in records:
        p = partition if partition is not None else partition_for(key, count, sticky)
        pending.setdefault(p, []).append((key, value))
    for attempt in range(retries + 1):
        failed: dict[int, list[tuple[bytes | None, bytes]]] = {}
        errors: list[str] = []
        by_leader: dict[int, list[int]] = {}
        for p in pending:
            by_leader.setdefault(view.partitions[p].leader, []).append(p)
        for leader, parts in by_leader.items():
            now_ms = int(time.time() * 1000)
            batches = {
                p: build_record_batch([(k, v, []) for k, v in pending[p]], timestamp_ms=now_ms)
                for p in parts
            }

            def build(b: Builder, version: int, batches: dict[int, bytes] = batches) -> Any:
                return b.ProduceRequest(
                    transactional_id=None,
                    acks=acks,
                    timeout=timeout_ms,
                    topic_data=(
                        b.TopicProduceData(
                            name=topic,
                            partition_data=tuple(
                                b.PartitionProduceData(index=p, records=data)
                                for p, data in batches.items()
                            ),
                        ),
                    ),
                )

            try:
                if leader < 0:
                    raise ConnectionError("no leader")
                response = await client.call(PRODUCE, build, leader)
            except (OSError, ConnectionError) as exc:
                client.forget(leader)
                errors.append(str(exc))
                failed.update({p: pending[p] for p in parts})
                continue
            if response is None:  # acks=0
                continue
            for topic_response in response.responses:
                for result in topic_response.partition_responses:
                    error = result.error_code
                    if error is ErrorCode.none:
                        continue
                    p = int(result.index)
                    if error in RETRIABLE:
                        failed[p] = pending[p]
                        errors.append(f"{topic}-{p}: {error_name(error)}")
                    else:
                        message = getattr(result, "error_message", None)
                        detail = f" ({message})" if message else ""
                        raise AdminError(f"produce to {topic}-{p}: {error_name(error)}{detail}")
        if not failed:
            return len(records)
        if attempt == retries:
            raise AdminError(f"produce to {topic} failed after {retries} retries: {errors[-1]}")
        await asyncio.sleep(min(0.1 * (attempt + 1), 1.0))
        view = await client.partitions_of(topic)
        pending = failed
    return len(records)


# -- fetching ---------------------------------------------------------------------------


@dataclass
class FetchResult:
    records: list[tuple[str, int, Record]]
    #: partitions whose position is out of range (they need a reset)
    out_of_range: list[tuple[str, int]]
    #: partitions whose leader moved (refresh metadata)
    stale: list[tuple[str, int]]


async def fetch(
    client: KafkaClient,
    positions: dict[tuple[str, int], int],
    max_wait_ms: int = 500,
    max_bytes: int = 52428800,
    partition_max_bytes: int = 1048576,
) -> FetchResult:
    """One Fetch per leader for ``positions``; records at or after each position."""
    result = FetchResult([], [], [])
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp in positions:
        view = client.cluster.topics.get(tp[0])
        leader = view.partitions[tp[1]].leader if view and tp[1] in view.partitions else -1
        if leader < 0:
            result.stale.append(tp)
            continue
        by_leader.setdefault(leader, []).append(tp)

    async def one(leader: int, tps: list[tuple[str, int]]) -> None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(partition)

        def build(b: Builder, version: int) -> Any:
            return b.FetchRequest(
                cluster_id=None,
                replica_id=-1,
                max_wait=max_wait_ms,
                min_bytes=1,
                max_bytes=max_bytes,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=tuple(
                    b.FetchTopic(
                        topic=t,
                        partitions=tuple(
                            b.FetchPartition(
                                partition=p,
                                current_leader_epoch=-1,
                                fetch_offset=positions[(t, p)],
                                last_fetched_epoch=-1,
                                log_start_offset=-1,
                                partition_max_bytes=partition_max_bytes,
                            )
                            for p in ps
                        ),
                    )
                    for t, ps in by_topic.items()
                ),
                forgotten_topics_data=(),
                rack_id="",
            )

        try:
            response = await client.call(FETCH, build, leader, timeout_s=max_wait_ms / 1000 + 30)
        except (OSError, ConnectionError):
            client.forget(leader)
            result.stale.extend(tps)
            return
        for topic_response in response.responses:
            topic = str(topic_response.topic)
            for data in topic_response.partitions:
                tp = (topic, int(data.partition_index))
                error = data.error_code
                if error is ErrorCode.offset_out_of_range:
                    result.out_of_range.append(tp)
                    continue
                if error is not ErrorCode.none:
                    result.stale.append(tp)
                    continue
                position = positions[tp]
                for record in _records(bytes(data.records or b"")):
                    if record.offset >= position:
                        result.records.append((topic, tp[1], record))

    await asyncio.gather(*(one(leader, tps) for leader, tps in by_leader.items()))
    return result


def _records(data: bytes) -> list[Record]:
    """The data records of a fetched partition (control batches left out); a partial
    batch at the end (a fetch size limit) is left for the next fetch."""
    out: list[Record] = []
    view = memoryview(data)
    try:
        for pos, header in iter_batches(view, allow_partial_tail=True):
            if header.is_control:
                continue
            out.extend(iter_records(view[pos : pos + header.size]))
    except CorruptRecordError as exc:
        raise AdminError(f"fetched a corrupt record batch: {exc}") from None
    return out
