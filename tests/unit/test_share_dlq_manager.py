"""ShareGroupDLQManager on the manual clock: the share.version 2 gate, Kafka's
validation messages, the Produce it sends (the DLQ partition, Kafka's headers, a copied
key and value), CreateTopics for a missing topic, retries on the timer, and the meters."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.cluster.features import SHARE_VERSION, FeatureControl, UpgradeType
from broker.replica.partition import ReadResult
from broker.share.dlq.dlq_manager import DLQConfig, ShareGroupDLQManager
from broker.share.dlq.dlq_records import CLIENT_REJECT, DLQRecordParameter
from protocol.record_batch import iter_batches, iter_records
from protocol.record_builder import build_record_batch
from purgatory import ManualClock, SystemTimer

DLQ = "dlq.orders"
WALL_MS = 1_700_000_000_000


class Settings:
    def __init__(self, topic: str = DLQ, copy: bool = False) -> None:
        self.topic, self.copy = topic, copy

    def deadletterqueue_topic(self, group_id: str) -> tuple[str, bool]:
        return self.topic, self.copy


class Channels:
    """Records each request; the test answers them."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int, Any, Callable[[Any | None], None]]] = []

    def send(
        self,
        broker_id: int,
        api_key: int,
        version: int,
        body: Any,
        on_response: Callable[[Any | None], None],
    ) -> None:
        self.sent.append((broker_id, api_key, body, on_response))

    async def stop(self) -> None:
        pass


class SourcePartition:
    """The source partition's leader: offsets 0-4, key k<n>, value v<n>, a header."""

    def read(self, offset: int, max_bytes: int, *, up_to_log_end: bool) -> ReadResult:
        records = [(f"k{n}".encode(), f"v{n}".encode(), [("h", b"x")]) for n in range(5)]
        return ReadResult(records=build_record_batch(records, base_offset=0, timestamp_ms=1))


class Replicas:
    def online_partition(self, tp: tuple[str, int]) -> SourcePartition | None:
        return SourcePartition() if tp == ("orders", 1) else None

    def wall_clock_ms(self) -> int:
        return WALL_MS


def _manager(
    level: int = 2, settings: Settings | None = None, auto_create: bool = False
) -> tuple[ShareGroupDLQManager, ClusterMetadata, Channels, ManualClock, SystemTimer]:
    metadata = ClusterMetadata()
    for broker in (0, 1, 2):
        metadata.register_broker(broker, "127.0.0.1", 9092 + broker)
    features = FeatureControl()
    if level != 1:
        upgrade = UpgradeType.UPGRADE if level > 1 else UpgradeType.SAFE_DOWNGRADE
        assert features.update_features({SHARE_VERSION: (level, upgrade)}).error is ErrorCode.none
    clock = ManualClock()
    timer = SystemTimer(clock)
    channels = Channels()
    manager = ShareGroupDLQManager(
        0,
        DLQConfig(auto_create_topics_enable=auto_create),
        metadata,
        features,
        settings or Settings(),
        Replicas(),  # type: ignore[arg-type]
        timer,
        channels,
    )
    return manager, metadata, channels, clock, timer


def _dlq_topic(metadata: ClusterMetadata, partitions: int = 2, enable: str = "true") -> None:
    assignment = [[p % 3] for p in range(partitions)]
    configs = {"errors.deadletterqueue.group.enable": enable} if enable else {}
    metadata.create_topic(DLQ, partitions, 1, configs, assignment=assignment)


def _param(first: int = 2, last: int = 3) -> DLQRecordParameter:
    return DLQRecordParameter("g", "orders", uuid.uuid4(), 1, first, last, 4, CLIENT_REJECT)


def _produce_response(partition: int, error: ErrorCode = ErrorCode.none) -> SimpleNamespace:
    result = SimpleNamespace(index=partition, error_code=error, error_message=None)
    return SimpleNamespace(responses=[SimpleNamespace(partition_responses=[result])])


def _records(body: Any) -> list[Any]:
    data = body.topic_data[0].partition_data[0].records
    return [r for pos, h in iter_batches(data) for r in iter_records(data[pos : pos + h.size])]


def test_the_dlq_is_on_at_share_version_2_with_a_topic_named() -> None:
    assert not _manager(level=1)[0].enabled("g")
    assert _manager(level=2)[0].enabled("g")
    assert not _manager(level=2, settings=Settings(topic=""))[0].enabled("g")


@pytest.mark.parametrize(
    ("topic", "exists", "message"),
    [
        (
            "__dlq",
            False,
            "Configured DLQ topic name in share group: g cannot start with __, topic: __dlq.",
        ),
        (
            DLQ,
            "false",
            "DLQ is not enabled on configured DLQ topic for share group: g, topic: dlq.orders",
        ),
        (
            "orders-dlq",
            False,
            "Configured DLQ topic name does not comply with the DLQ topic prefix in share "
            "group: g, topic: orders-dlq, prefix: dlq.",
        ),
        (
            DLQ,
            False,
            "DLQ topic does not exist and auto create is disabled on cluster for share group: g, "
            "topic: dlq.orders.",
        ),
        (DLQ, "true", None),
    ],
)
def test_validation_gives_kafkas_messages(topic: str, exists: object, message: str | None) -> None:
    manager, metadata, _channels, _clock, _timer = _manager(settings=Settings(topic=topic))
    if exists:
        _dlq_topic(metadata, enable=str(exists))
    assert manager.validate("g") == message


def test_a_dynamic_broker_config_changes_the_prefix() -> None:
    manager, metadata, _channels, _clock, _timer = _manager(settings=Settings(topic="dead.orders"))
    metadata.set_broker_configs("", {"errors.deadletterqueue.topic.name.prefix": "dead."})
    metadata.create_topic(
        "dead.orders", 1, 1, {"errors.deadletterqueue.group.enable": "true"}, [[0]]
    )
    assert manager.validate("g") is None


def test_a_run_is_produced_to_its_partitions_leader_with_kafkas_headers() -> None:
    manager, metadata, channels, _clock, _timer = _manager()
    _dlq_topic(metadata, partitions=2)  # source partition 1 -> DLQ partition 1, led by 1
    done: list[int] = []
    manager.enqueue(_param(), lambda: done.append(1))
    ((broker, api_key, body, answer),) = channels.sent
    assert (broker, api_key, body.acks) == (1, 0, -1)
    assert body.topic_data[0].name == DLQ and body.topic_data[0].partition_data[0].index == 1
    records = _records(body)
    assert [(r.key, r.value, r.timestamp) for r in records] == [(None, None, WALL_MS)] * 2
    assert records[0].headers == [
        ("__dlq.errors.topic", b"orders"),
        ("__dlq.errors.partition", b"1"),
        ("__dlq.errors.offset", b"2"),
        ("__dlq.errors.group", b"g"),
        ("__dlq.errors.delivery.count", b"4"),
        ("__dlq.errors.message", b"Offset rejected by client."),
    ]
    assert done == [] and manager.in_flight == 1
    answer(_produce_response(1))
    assert done == [1] and manager.in_flight == 0
    metrics = manager.metrics["g"]
    assert (metrics.records, metrics.produce_requests, metrics.failed_produce_requests) == (2, 1, 0)


def test_copy_record_enable_copies_key_value_and_headers() -> None:
    manager, metadata, channels, _clock, _timer = _manager(settings=Settings(copy=True))
    _dlq_topic(metadata)
    manager.enqueue(_param(3, 4), lambda: None)
    records = _records(channels.sent[0][2])
    assert [(r.key, r.value) for r in records] == [(b"k3", b"v3"), (b"k4", b"v4")]
    assert records[0].headers[:2] == [("h", b"x"), ("__dlq.errors.topic", b"orders")]


def test_a_run_that_fails_validation_is_not_written_and_ends_at_once() -> None:
    manager, _metadata, channels, _clock, _timer = _manager()  # no topic, no auto-create
    done: list[int] = []
    manager.enqueue(_param(), lambda: done.append(1))
    assert done == [1] and channels.sent == [] and manager.metrics == {}


def test_not_leader_is_retried_after_the_backoff_and_other_errors_fail() -> None:
    manager, metadata, channels, clock, timer = _manager()
    _dlq_topic(metadata)
    done: list[int] = []
    manager.enqueue(_param(), lambda: done.append(1))
    channels.sent[0][3](_produce_response(1, ErrorCode.not_leader_or_follower))
    assert len(channels.sent) == 1
    clock.advance(1000)
    timer.advance_clock()
    assert len(channels.sent) == 2 and done == []
    channels.sent[1][3](_produce_response(1, ErrorCode.record_list_too_large))
    assert done == [1]
    metrics = manager.metrics["g"]
    assert (metrics.records, metrics.produce_requests, metrics.failed_produce_requests) == (0, 2, 1)


def test_an_unreachable_leader_is_given_up_after_five_attempts() -> None:
    manager, metadata, channels, clock, timer = _manager()
    _dlq_topic(metadata)
    done: list[int] = []
    manager.enqueue(_param(), lambda: done.append(1))
    for attempt in range(5):
        channels.sent[-1][3](None)
        clock.advance(30_000)
        timer.advance_clock()
        assert len(channels.sent) == min(attempt + 2, 5)
    assert done == [1] and manager.metrics["g"].failed_produce_requests == 1


def test_a_missing_topic_is_created_when_the_cluster_allows_it() -> None:
    manager, metadata, channels, _clock, _timer = _manager(auto_create=True)
    done: list[int] = []
    manager.enqueue(_param(), lambda: done.append(1))
    ((broker, api_key, body, answer),) = channels.sent
    assert (broker, api_key) == (0, 19)
    (topic,) = body.topics
    assert (topic.name, topic.num_partitions, topic.replication_factor) == (DLQ, -1, -1)
    assert {c.name: c.value for c in topic.configs} == {
        "errors.deadletterqueue.group.enable": "true",
        "message.timestamp.type": "CreateTime",
    }
    _dlq_topic(metadata, partitions=1)  # what the CreateTopics did
    answer(SimpleNamespace(topics=[SimpleNamespace(error_code=0, error_message=None)]))
    assert channels.sent[-1][1] == 0  # then the Produce
    channels.sent[-1][3](_produce_response(0))
    assert done == [1]


def test_a_large_run_is_split_into_batches_of_max_message_bytes() -> None:
    manager, metadata, channels, _clock, _timer = _manager()
    _dlq_topic(metadata)
    metadata.update_configs(DLQ, {"max.message.bytes": "400"})
    manager.enqueue(_param(0, 9), lambda: None)
    sizes = []
    while channels.sent and channels.sent[-1][3] is not None:
        _broker, _key, body, answer = channels.sent.pop()
        sizes.append(len(_records(body)))
        answer(_produce_response(1))
    assert sum(sizes) == 10 and len(sizes) > 1
    assert manager.metrics["g"].records == 10


def test_a_retry_validates_again_and_ends_when_the_topic_is_gone() -> None:
    manager, metadata, channels, clock, timer = _manager()
    _dlq_topic(metadata)
    done: list[int] = []
    manager.enqueue(_param(), lambda: done.append(1))
    channels.sent[0][3](_produce_response(1, ErrorCode.not_leader_or_follower))
    metadata.delete_topic(DLQ)
    clock.advance(1000)
    timer.advance_clock()
    assert len(channels.sent) == 1 and done == [1] and manager.in_flight == 0
