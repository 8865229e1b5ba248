"""Produce-time timestamp bounds (KIP-937), on the manual clock.

The replica manager is built whole over a ``ManualClock`` that is also its wall clock
(the clock that bounds timestamps), as in ``test_replica_manager.py``: "now" is whatever
the test says. The answer on the wire (record_errors, error message, a duplicate's
timestamp past the year 9999) goes through the dispatcher (``dispatch_node``), whose
wall clock is the real one, so those tests keep their timestamps decades away from it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.cluster.controller import Controller
from broker.config.broker_config import BrokerConfig
from broker.log import LogManager
from broker.replica.partition import AppendResult, Partition, TopicPartition
from broker.replica.replica_fetcher import ReplicaFetcherManager
from broker.replica.replica_manager import ReplicaManager
from broker.replica.timestamp_validation import INVALID_TIMESTAMP_MESSAGE, LONG_MAX
from broker.server.purgatories import PurgatorySet
from protocol.builders import MAX_DATETIME_MS, request_builder
from protocol.compression import GZIP, NONE
from protocol.record_batch import ATTR_TIMESTAMP_TYPE, compute_crc
from protocol.record_builder import build_record_batch
from purgatory import ManualClock
from tests.helpers.dispatch_node import Node, dispatch_node

NOW = 1_700_000_000_000
HOUR = 3_600_000
TOPIC = "t"
TP: TopicPartition = (TOPIC, 0)
PRODUCE = 0


@contextlib.asynccontextmanager
async def replica_manager(
    broker: dict[str, Any] | None = None, topic: dict[str, str] | None = None
) -> AsyncIterator[ReplicaManager]:
    """Broker 0 leading a one-partition topic; its wall clock is the manual clock at NOW."""
    clock = ManualClock(NOW)
    config = BrokerConfig.model_validate(broker or {})
    metadata = ClusterMetadata(cluster_id="test-cluster")
    metadata.register_broker(0, "127.0.0.1", 1)
    metadata.create_topic(TOPIC, 1, 1, topic or {}, assignment=[[0]])
    purgatories = PurgatorySet(clock, config)
    hosted: dict[TopicPartition, Partition] = {}
    manager = ReplicaManager(
        0,
        metadata,
        config,
        clock,
        purgatories,
        LogManager(None),
        Controller(metadata),
        ReplicaFetcherManager(0, config, metadata, clock, hosted),
        wall_clock_ms=clock.now_ms,
    )
    await manager.start()
    try:
        yield manager
    finally:
        await manager.stop()


def producer_batch(timestamps: list[int], compression: int = NONE) -> bytes:
    """A batch as the Java client and aiokafka write it: baseTimestamp is the first
    record's, maxTimestamp the largest (so a later record may be below the first)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, ts in enumerate(timestamps):
        builder.append(i, timestamp=ts, key=None, value=b"v%d" % i, headers=[])
    return bytes(builder.build())


def append(manager: ReplicaManager, records: bytes) -> AppendResult:
    return manager.append_to_leader(TP, records, required_acks=1)


def log_end(manager: ReplicaManager) -> int:
    partition = manager.online_partition(TP)
    assert partition is not None
    return partition.log_end_offset


# -- the bounds ---------------------------------------------------------------------------


async def test_a_record_further_after_now_than_after_max_ms_is_invalid_timestamp() -> None:
    # Kafka 4's default: one hour after.
    async with replica_manager() as manager:
        result = append(manager, producer_batch([NOW, NOW + HOUR + 1]))
        assert result.error is ErrorCode.invalid_timestamp
        assert result.error_message == INVALID_TIMESTAMP_MESSAGE
        assert result.record_errors == (
            (
                1,
                f"Timestamp {NOW + HOUR + 1} of message with offset 1 is out of range. "
                f"The timestamp should be within [{NOW - LONG_MAX}, {NOW + HOUR}]",
            ),
        )
        assert result.base_offset == -1 and result.log_start_offset == 0
        assert log_end(manager) == 0  # nothing appended
        # exactly one hour after is within
        assert append(manager, producer_batch([NOW + HOUR])).error is ErrorCode.none
        assert log_end(manager) == 1


@pytest.mark.parametrize("compression", [NONE, GZIP])
async def test_a_record_further_before_now_than_before_max_ms_is_invalid_timestamp(
    compression: int,
) -> None:
    async with replica_manager({"log.message.timestamp.before.max.ms": 60_000}) as manager:
        # The first and the largest timestamps are within: only a walk finds the middle one.
        records = producer_batch([NOW, NOW - 60_001, NOW - 60_000, NOW + 5], compression)
        result = append(manager, records)
        assert result.error is ErrorCode.invalid_timestamp
        assert [index for index, _ in result.record_errors] == [1]
        assert "should be within [1699999940000, 1700003600000]" in result.record_errors[0][1]
        assert log_end(manager) == 0
        # exactly before.max.ms before is within
        within = producer_batch([NOW, NOW - 60_000, NOW + 5], compression)
        assert append(manager, within).error is ErrorCode.none
        assert log_end(manager) == 3


async def test_the_refusal_names_the_records_of_the_first_batch_with_one_and_appends_nothing() -> (
    None
):
    async with replica_manager({"log.message.timestamp.before.max.ms": 1_000}) as manager:
        good = build_record_batch([(None, b"ok", [])], timestamp_ms=NOW)
        bad = producer_batch([NOW - 5_000, NOW, NOW + 2 * HOUR])
        result = append(manager, good + bad + bad)
        assert result.error is ErrorCode.invalid_timestamp
        assert [index for index, _ in result.record_errors] == [0, 2]
        assert log_end(manager) == 0


async def test_timestamps_far_away_but_within_the_bounds_are_appended() -> None:
    # Year 292278994 (Long.MAX_VALUE ms) and 1970 are fine when the bounds allow them.
    async with replica_manager({"log.message.timestamp.after.max.ms": LONG_MAX}) as manager:
        assert append(manager, producer_batch([LONG_MAX, 0, 1])).error is ErrorCode.none
        assert append(manager, producer_batch([-1, NOW + 10 * 365 * 24 * HOUR])).error is (
            ErrorCode.none
        )
        assert log_end(manager) == 5


async def test_the_topic_config_overrides_the_broker_config() -> None:
    far = producer_batch([NOW + 24 * HOUR])
    async with replica_manager(
        {"log.message.timestamp.after.max.ms": 1_000},
        {"message.timestamp.after.max.ms": str(LONG_MAX)},
    ) as manager:
        assert append(manager, far).error is ErrorCode.none
    async with replica_manager(
        {"log.message.timestamp.after.max.ms": LONG_MAX},
        {"message.timestamp.after.max.ms": "1000"},
    ) as manager:
        assert append(manager, far).error is ErrorCode.invalid_timestamp
    async with replica_manager({}, {"message.timestamp.before.max.ms": "1000"}) as manager:
        assert append(manager, producer_batch([NOW - 1_001])).error is ErrorCode.invalid_timestamp


async def test_config_changes_apply_to_the_next_append() -> None:
    async with replica_manager() as manager:
        far = producer_batch([NOW + 2 * HOUR])
        assert append(manager, far).error is ErrorCode.invalid_timestamp
        # a dynamic cluster-wide broker default (AlterConfigs on BROKER "")
        manager.metadata.set_broker_configs("", {"log.message.timestamp.after.max.ms": "86400000"})
        assert append(manager, far).error is ErrorCode.none
        # a topic override (AlterConfigs on the topic) wins over it
        manager.metadata.update_configs(TOPIC, {"message.timestamp.after.max.ms": "60000"})
        assert append(manager, far).error is ErrorCode.invalid_timestamp


async def test_log_append_time_topics_are_not_checked() -> None:
    async with replica_manager(
        {"log.message.timestamp.before.max.ms": 0, "log.message.timestamp.after.max.ms": 0},
        {"message.timestamp.type": "LogAppendTime"},
    ) as manager:
        result = append(manager, producer_batch([LONG_MAX, 0]))
        assert result.error is ErrorCode.none
        assert result.log_append_time_ms == NOW


async def test_a_batch_flagged_log_append_time_is_judged_by_its_max_timestamp() -> None:
    # Kafka's Record.timestamp() of such a batch is its maxTimestamp, for every record.
    async with replica_manager() as manager:
        data = bytearray(producer_batch([NOW, NOW + 2 * HOUR]))
        data[22] |= ATTR_TIMESTAMP_TYPE  # attributes (low byte), inside the CRC
        data[17:21] = compute_crc(data).to_bytes(4, "big")
        result = append(manager, bytes(data))
        assert result.error is ErrorCode.invalid_timestamp
        assert [index for index, _ in result.record_errors] == [0, 1]


async def test_coordinator_appends_are_not_checked() -> None:
    from broker.replica.append_origin import AppendOrigin

    async with replica_manager({"log.message.timestamp.before.max.ms": 0}) as manager:
        # Our coordinators stamp their records with the monotonic clock.
        records = build_record_batch([(None, b"offset", [])], timestamp_ms=12_345)
        result = manager.append_to_leader(TP, records, 1, AppendOrigin.COORDINATOR)
        assert result.error is ErrorCode.none


async def test_records_that_do_not_add_up_are_invalid_record_when_walked() -> None:
    async with replica_manager({"log.message.timestamp.before.max.ms": 1_000}) as manager:
        data = bytearray(producer_batch([NOW]))
        data[61] = 0x7E  # the first record's length: far past the batch's end
        data[17:21] = compute_crc(data).to_bytes(4, "big")
        assert append(manager, bytes(data)).error is ErrorCode.invalid_record


# -- on the wire ----------------------------------------------------------------------------


@pytest.fixture
async def node() -> AsyncIterator[Node]:
    node = dispatch_node()
    manager = node.dispatcher.services.replica_manager
    await manager.start()
    node.dispatcher.services.metadata.create_topic(TOPIC, 1, 1, {})
    node.dispatcher.services.metadata.create_topic(
        "unbounded", 1, 1, {"message.timestamp.after.max.ms": str(LONG_MAX)}
    )
    yield node
    await manager.stop()


def _produce(node: Node, version: int, topic: str, records: bytes) -> Any:
    b = request_builder(PRODUCE, version)
    body = b.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=5000,
        topic_data=(
            b.TopicProduceData(
                name=topic, partition_data=(b.PartitionProduceData(index=0, records=records),)
            ),
        ),
    )
    (topic_answer,) = node.answer(node.send(PRODUCE, version, body)).responses
    (answer,) = topic_answer.partition_responses
    return answer


async def test_the_answer_carries_kafkas_record_errors_and_message(node: Node) -> None:
    # The dispatcher's wall clock is the real one: a century ahead is out of any hour.
    century = producer_batch([NOW, NOW + 100 * 365 * 24 * HOUR])
    answer = _produce(node, 9, TOPIC, century)
    assert answer.error_code == ErrorCode.invalid_timestamp
    assert answer.error_message == INVALID_TIMESTAMP_MESSAGE
    assert answer.base_offset == -1 and answer.log_append_time is None
    ((index, message),) = [
        (e.batch_index, e.batch_index_error_message) for e in answer.record_errors
    ]
    assert index == 1 and message.startswith(f"Timestamp {NOW + 100 * 365 * 24 * HOUR} of")
    # Before v8 there is no record_errors field: the error alone.
    assert _produce(node, 7, TOPIC, century).error_code == ErrorCode.invalid_timestamp


async def test_a_duplicate_batch_dated_past_year_9999_is_answered(node: Node) -> None:
    # The fuzzer's find: a duplicate is answered with its batch's maxTimestamp as log
    # append time (Kafka does so); Long.MAX_VALUE ms is year 292278994, which no datetime
    # holds. The answer now carries the latest instant one does.
    batch = build_record_batch(
        [(None, b"v", [])], timestamp_ms=LONG_MAX, producer_id=7, producer_epoch=0, base_sequence=0
    )
    first = _produce(node, 9, "unbounded", batch)
    assert first.error_code == ErrorCode.none and first.log_append_time is None
    again = _produce(node, 9, "unbounded", batch)
    assert again.error_code == ErrorCode.none and again.base_offset == first.base_offset
    assert round(again.log_append_time.timestamp() * 1000) == MAX_DATETIME_MS


# -- the configs -------------------------------------------------------------------------


def test_kafka_4_defaults_and_synonyms_as_describe_configs_lists_them() -> None:
    from broker.config.dynamic_config import broker_layers
    from broker.handlers.topic_configs import topic_config_entries

    config = BrokerConfig.model_validate({"log.message.timestamp.before.max.ms": "86400000"})
    assert config.log_message_timestamp_after_max_ms == HOUR
    assert BrokerConfig.model_validate({}).log_message_timestamp_before_max_ms == LONG_MAX
    metadata = ClusterMetadata()
    metadata.register_broker(0, "127.0.0.1", 1)
    entries = {
        e.name: e
        for e in topic_config_entries(
            broker_layers(config, metadata, 0), {"message.timestamp.after.max.ms": "5"}
        )
    }
    after, before = (
        entries["message.timestamp.after.max.ms"],
        entries["message.timestamp.before.max.ms"],
    )
    assert after.value == "5" and [(n, v) for n, v, _ in after.synonyms] == [
        ("message.timestamp.after.max.ms", "5"),
        ("log.message.timestamp.after.max.ms", "3600000"),
    ]
    assert before.value == "86400000" and [(n, v) for n, v, _ in before.synonyms] == [
        ("log.message.timestamp.before.max.ms", "86400000"),
        ("log.message.timestamp.before.max.ms", str(LONG_MAX)),
    ]


@pytest.mark.parametrize("value", ["-1", "9223372036854775808", "soon"])
def test_bad_values_are_refused_for_the_broker_and_the_topic(value: str) -> None:
    from broker.cluster.cluster_metadata import MetadataError
    from broker.config.broker_config import ConfigError, read_config
    from broker.handlers.topic_configs import validate_topic_configs

    with pytest.raises(ConfigError, match=r"log\.message\.timestamp\.after\.max\.ms"):
        read_config(overrides={"log.message.timestamp.after.max.ms": value})
    with pytest.raises(MetadataError) as refused:
        validate_topic_configs([("message.timestamp.before.max.ms", value)])
    assert refused.value.error is ErrorCode.invalid_config


# -- the record walk -----------------------------------------------------------------------


@pytest.mark.parametrize("compression", [NONE, GZIP])
def test_the_walk_reads_each_records_own_timestamp_and_offset(compression: int) -> None:
    from protocol.record_timestamps import records_outside_timestamps

    data = producer_batch([50, 10, -1, 90, 30], compression)
    assert records_outside_timestamps(data, 20, 60) == [(1, 1, 10), (3, 3, 90)]
    assert records_outside_timestamps(data, 0, 100) == []  # -1: no timestamp, never outside


def test_the_walk_refuses_records_that_do_not_add_up() -> None:
    from protocol.record_batch import InvalidRecordError
    from protocol.record_timestamps import records_outside_timestamps

    data = bytearray(producer_batch([1, 2, 3]))
    data[57:61] = (4).to_bytes(4, "big")  # recordsCount: one more than there is
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        records_outside_timestamps(bytes(data), 0, 10)
    data[8:12] = (len(data) - 12 - 3).to_bytes(4, "big")  # the last record cut short
    with pytest.raises(InvalidRecordError):
        records_outside_timestamps(bytes(data[:-3]), 0, 10)
