"""The produce/fetch data path as aiokafka users drive it, against a real minikafka.

Every test starts a broker in this event loop (port 0) and talks to it only through
aiokafka over TCP. What the broker does internally is looked at in one place only: the
Fetch purgatory's ``expired_count``, to prove that an empty long-poll really waited in
the purgatory and expired there (asserting on elapsed time would be flaky).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import InvalidTimestampError, OffsetOutOfRangeError
from aiokafka.structs import ConsumerRecord

from broker.app import MiniKafka
from testkit.polling import wait_until

CREATE_TIME, LOG_APPEND_TIME = 0, 1


# ------------------------------------------------------------------------------ helpers


@pytest.fixture
async def producer(kafka: MiniKafka) -> AsyncIterator[AIOKafkaProducer]:
    p = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


def _consumer(kafka: MiniKafka, **options: object) -> AIOKafkaConsumer:
    settings: dict[str, object] = {
        "bootstrap_servers": kafka.bootstrap,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
    }
    settings.update(options)
    return AIOKafkaConsumer(**settings)


async def _read(consumer: AIOKafkaConsumer, count: int, rounds: int = 50) -> list[ConsumerRecord]:
    """``count`` records via getmany, giving up after ``rounds`` empty polls."""
    got: list[ConsumerRecord] = []
    empty = 0
    while len(got) < count:
        batch = await consumer.getmany(timeout_ms=200)
        if not batch:
            empty += 1
            assert empty < rounds, f"only {len(got)} of {count} records arrived"
            continue
        for records in batch.values():
            got.extend(records)
    return got


# --------------------------------------------------------------------- produce, consume


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
async def test_every_compression_type_round_trips(kafka: MiniKafka, compression: str) -> None:
    """Compressed batches are stored as sent and come back whole, keys and headers too."""
    topic = f"codec-{compression}"
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka.bootstrap, compression_type=compression, linger_ms=50
    )
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                value=(f"value-{i}-" * 20).encode(),
                key=f"k{i}".encode(),
                headers=[("n", str(i).encode())],
                partition=0,
            )
            for i in range(100)
        ]
        offsets = [(await f).offset for f in futures]
    finally:
        await producer.stop()
    assert offsets == list(range(100))

    consumer = _consumer(kafka)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got = await _read(consumer, 100)
    finally:
        await consumer.stop()
    assert [r.offset for r in got] == list(range(100))
    assert [r.value for r in got] == [(f"value-{i}-" * 20).encode() for i in range(100)]
    assert [r.key for r in got] == [f"k{i}".encode() for i in range(100)]
    assert [list(r.headers) for r in got] == [[("n", str(i).encode())] for i in range(100)]


@pytest.mark.parametrize("acks", [0, 1, "all"])
async def test_every_acks_setting_delivers(kafka: MiniKafka, acks: int | str) -> None:
    topic = f"acks-{acks}"
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, acks=acks)
    await producer.start()
    try:
        metadata = [await producer.send_and_wait(topic, f"m{i}".encode()) for i in range(20)]
    finally:
        await producer.stop()
    if acks == 0:
        # No answer comes back, so the client cannot know the offsets.
        assert metadata == [None] * 20
    else:
        assert [md.offset for md in metadata] == list(range(20))

    tp = TopicPartition(topic, 0)
    consumer = _consumer(kafka)
    await consumer.start()
    try:
        # acks=0 gives no completion signal: wait for the log end to show every record.
        async def all_landed() -> bool:
            return bool((await consumer.end_offsets([tp]))[tp] == 20)

        await wait_until(all_landed, "20 records at the log end", step_s=0.02)
        consumer.assign([tp])
        got = await _read(consumer, 20)
    finally:
        await consumer.stop()
    assert [r.value for r in got] == [f"m{i}".encode() for i in range(20)]


async def test_send_batch_appends_one_batch(kafka: MiniKafka, producer: AIOKafkaProducer) -> None:
    batch = producer.create_batch()
    for i in range(10):
        assert batch.append(key=None, value=f"b{i}".encode(), timestamp=None) is not None
    batch.close()
    future = await producer.send_batch(batch, "batched", partition=0)
    first = await future
    assert first.offset == 0
    second = producer.create_batch()
    second.append(key=b"k", value=b"after", timestamp=None)
    second.close()
    assert (await (await producer.send_batch(second, "batched", partition=0))).offset == 10

    consumer = _consumer(kafka)
    await consumer.start()
    try:
        consumer.assign([TopicPartition("batched", 0)])
        got = await _read(consumer, 11)
    finally:
        await consumer.stop()
    assert [r.value for r in got] == [f"b{i}".encode() for i in range(10)] + [b"after"]
    assert [r.offset for r in got] == list(range(11))


async def test_getmany_reads_every_partition(kafka: MiniKafka, producer: AIOKafkaProducer) -> None:
    kafka.cluster.create_topic("many", 3, 1, {})
    for p in range(3):
        for i in range(5):
            await producer.send("many", f"{p}:{i}".encode(), partition=p)
    await producer.flush()
    tps = [TopicPartition("many", p) for p in range(3)]
    consumer = _consumer(kafka)
    await consumer.start()
    try:
        consumer.assign(tps)
        got = await _read(consumer, 15)
    finally:
        await consumer.stop()
    for p in range(3):
        mine = [r for r in got if r.partition == p]
        assert [r.value for r in mine] == [f"{p}:{i}".encode() for i in range(5)]


# ------------------------------------------------------------------- positions, offsets


async def test_seek_and_offset_queries(kafka: MiniKafka, producer: AIOKafkaProducer) -> None:
    base_ts = 1_600_000_000_000
    for i in range(10):
        await producer.send("seek", f"s{i}".encode(), partition=0, timestamp_ms=base_ts + i * 1000)
    await producer.flush()
    tp = TopicPartition("seek", 0)
    consumer = _consumer(kafka)
    await consumer.start()
    try:
        consumer.assign([tp])
        assert await consumer.beginning_offsets([tp]) == {tp: 0}
        assert await consumer.end_offsets([tp]) == {tp: 10}

        consumer.seek(tp, 7)
        assert [r.offset for r in await _read(consumer, 3)] == [7, 8, 9]

        await consumer.seek_to_beginning(tp)
        first = await consumer.getone()
        assert (first.offset, first.value) == (0, b"s0")

        await consumer.seek_to_end(tp)
        assert await consumer.position(tp) == 10

        found = await consumer.offsets_for_times(
            {tp: base_ts + 4500}  # between records 4 and 5: the first at or after is 5
        )
        assert found[tp] is not None
        assert (found[tp].offset, found[tp].timestamp) == (5, base_ts + 5000)
        exact = await consumer.offsets_for_times({tp: base_ts})
        assert (exact[tp].offset, exact[tp].timestamp) == (0, base_ts)
        beyond = await consumer.offsets_for_times({tp: base_ts + 60_000})
        assert beyond[tp] is None

        records = await _read_from(consumer, tp, 3, 2)
        assert [r.timestamp for r in records] == [base_ts + 3000, base_ts + 4000]
        assert all(r.timestamp_type == CREATE_TIME for r in records)
    finally:
        await consumer.stop()


async def _read_from(
    consumer: AIOKafkaConsumer, tp: TopicPartition, offset: int, count: int
) -> list[ConsumerRecord]:
    consumer.seek(tp, offset)
    return (await _read(consumer, count))[:count]


# ------------------------------------------------------------------------ fetch limits


async def test_limits_smaller_than_one_batch_still_return_it(
    kafka: MiniKafka, producer: AIOKafkaProducer
) -> None:
    """KIP-74: a consumer must progress even when one batch exceeds its byte limits."""
    big = producer.create_batch()
    for i in range(12):
        assert big.append(key=None, value=bytes([65 + i]) * 1000, timestamp=None) is not None
    big.close()
    await (await producer.send_batch(big, "limits", partition=0))
    await producer.send_and_wait("limits", b"x" * 3000, partition=0)

    consumer = _consumer(kafka, fetch_max_bytes=1024, max_partition_fetch_bytes=512)
    await consumer.start()
    try:
        consumer.assign([TopicPartition("limits", 0)])
        got = await _read(consumer, 13)
    finally:
        await consumer.stop()
    assert [r.offset for r in got] == list(range(13))
    assert [r.value for r in got[:12]] == [bytes([65 + i]) * 1000 for i in range(12)]
    assert got[-1].value == b"x" * 3000


async def test_fetch_past_the_end_is_reset_earliest(
    kafka: MiniKafka, producer: AIOKafkaProducer
) -> None:
    for i in range(3):
        await producer.send_and_wait("oor", f"o{i}".encode(), partition=0)
    tp = TopicPartition("oor", 0)
    consumer = _consumer(kafka, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, 50)  # OFFSET_OUT_OF_RANGE from the broker -> reset to earliest
        got = await _read(consumer, 3)
    finally:
        await consumer.stop()
    assert [r.offset for r in got] == [0, 1, 2]


async def test_fetch_past_the_end_is_reset_latest(
    kafka: MiniKafka, producer: AIOKafkaProducer
) -> None:
    for i in range(3):
        await producer.send_and_wait("oor-latest", f"o{i}".encode(), partition=0)
    tp = TopicPartition("oor-latest", 0)
    consumer = _consumer(kafka, auto_offset_reset="latest")
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, 50)

        async def reset() -> bool:
            await consumer.getmany(timeout_ms=50)
            return bool(await consumer.position(tp) == 3)

        await wait_until(reset, "position reset to the log end", step_s=0.02)
        await producer.send_and_wait("oor-latest", b"new", partition=0)
        got = await _read(consumer, 1)
    finally:
        await consumer.stop()
    assert [(r.offset, r.value) for r in got] == [(3, b"new")]


async def test_fetch_past_the_end_without_reset_raises(
    kafka: MiniKafka, producer: AIOKafkaProducer
) -> None:
    await producer.send_and_wait("oor-none", b"x", partition=0)
    tp = TopicPartition("oor-none", 0)
    consumer = _consumer(kafka, auto_offset_reset="none")
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, 50)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(50):
                await consumer.getmany(timeout_ms=200)
    finally:
        await consumer.stop()


async def test_empty_fetch_expires_in_the_purgatory(kafka: MiniKafka) -> None:
    """A fetch with nothing to read waits for max_wait in the Fetch purgatory, then is
    answered empty; the consumer sees no records."""
    kafka.cluster.create_topic("quiet", 1, 1, {})
    purgatory = kafka.brokers[0].purgatories["Fetch"]
    before = purgatory.expired_count
    consumer = _consumer(kafka, fetch_max_wait_ms=50)
    await consumer.start()
    try:
        consumer.assign([TopicPartition("quiet", 0)])
        for _ in range(100):
            assert await consumer.getmany(timeout_ms=100) == {}
            if purgatory.expired_count >= before + 2:
                break
    finally:
        await consumer.stop()
    assert purgatory.expired_count >= before + 2


# --------------------------------------------------------------------------- timestamps


async def test_log_append_time_topic_returns_broker_timestamps(kafka: MiniKafka) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(
                    "appended",
                    num_partitions=1,
                    replication_factor=1,
                    topic_configs={"message.timestamp.type": "LogAppendTime"},
                )
            ]
        )
    finally:
        await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)
    await producer.start()
    sent_ts = 1_000  # 1970: whatever the producer says, the broker's time wins
    before_ms = int(time.time() * 1000)
    try:
        md = await producer.send_and_wait("appended", b"v", partition=0, timestamp_ms=sent_ts)
    finally:
        await producer.stop()
    after_ms = int(time.time() * 1000)
    assert md.timestamp_type == LOG_APPEND_TIME
    # Wall-clock epoch milliseconds, as Kafka's LogAppendTime (not a monotonic clock).
    assert before_ms - 1 <= md.timestamp <= after_ms + 1

    consumer = _consumer(kafka)
    await consumer.start()
    try:
        consumer.assign([TopicPartition("appended", 0)])
        (record,) = await _read(consumer, 1)
    finally:
        await consumer.stop()
    assert record.timestamp_type == LOG_APPEND_TIME
    assert record.timestamp == md.timestamp
    assert record.value == b"v"


async def test_a_timestamp_too_far_in_the_future_is_invalid_timestamp(
    kafka: MiniKafka, producer: AIOKafkaProducer
) -> None:
    # Kafka 4's message.timestamp.after.max.ms: one hour (KIP-937, KIP-1030).
    day_ahead = int(time.time() * 1000) + 24 * 3_600_000
    with pytest.raises(InvalidTimestampError):
        await producer.send_and_wait("future", b"late", partition=0, timestamp_ms=day_ahead)
    md = await producer.send_and_wait("future", b"now", partition=0)
    assert md.offset == 0  # the refused record was not appended
