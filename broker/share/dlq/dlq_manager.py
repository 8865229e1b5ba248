"""ShareGroupDLQManager: writes a share group's dead-lettered records to its DLQ topic.

Kafka's ``DefaultShareGroupDLQManager`` over ``ShareGroupDLQStateManager`` (Kafka 4.4,
KIP-1191). ``enqueue`` takes a run of source offsets (``DLQRecordParameter``) and a
callback, and returns at once; the callback runs once the write has ended, written or
given up. The share partition archives the run then, either way.

Behavior:

- Active for a group when ``share.version`` is finalized at 2 or more and the group's
  ``errors.deadletterqueue.topic.name`` is set (``enabled``; Kafka's
  ``isDLQEnabledForGroup``).
- Validation first (Kafka's ``ShareGroupDLQValidator`` and ``validateDlqTopic``), with
  Kafka's messages, logged as errors; a run that fails it is not written:
  "Configured DLQ topic name in share group: G cannot start with __, topic: T.";
  "DLQ is not enabled on configured DLQ topic for share group: G, topic: T" (an existing
  topic without ``errors.deadletterqueue.group.enable=true``); "Configured DLQ topic name
  does not comply with the DLQ topic prefix in share group: G, topic: T, prefix: P"
  (the broker's ``errors.deadletterqueue.topic.name.prefix``, default ``dlq.``); "DLQ
  topic does not exist and auto create is disabled on cluster for share group: G, topic:
  T." (``errors.deadletterqueue.auto.create.topics.enable``, default false). Both broker
  configs are cluster-wide dynamic, as Kafka's: read at each write.
- A missing topic is created with a CreateTopics request (the broker's default partition
  count and replication factor, ``errors.deadletterqueue.group.enable=true`` and
  ``message.timestamp.type=CreateTime``); TOPIC_ALREADY_EXISTS (a concurrent create) and
  THROTTLING_QUOTA_EXCEEDED are retried.
- The records (``dlq_records.py``) go in Produce requests (acks=-1) to the leader of
  DLQ partition ``source partition % DLQ partitions``, a batch at a time within the DLQ
  topic's ``max.message.bytes``. NOT_LEADER_OR_FOLLOWER and an unreachable leader are
  retried after 1 s, doubling up to 30 s, five attempts (Kafka's backoff, without its
  jitter: the retries read the injected timer); any other error fails the write.
- With ``errors.deadletterqueue.copy.record.enable`` the source records are read from the
  local log (up to 1 MiB a read, as Kafka's ``DLQ_MAX_FETCH_BYTES``) and their key,
  value and headers copied; offsets that cannot be read get headers only.
- Kafka's ShareGroupMetrics per group: DeadLetterQueueRecordCount (records written),
  DeadLetterQueueTotalProduceRequestsPerSec (Produce requests sent) and
  DeadLetterQueueFailedProduceRequestsPerSec (writes that failed), at ``/metrics``.

Delivery is at least once across a share-partition leader change: a run is ARCHIVING
(durable delivery state 3) until its write ends, so a new leader writes it again; Kafka
says as much ("more than one DLQ record could be written"). A write that fails is not
retried past its attempts: its records are archived without a DLQ record.

Differences from Kafka: the requests go one at a time per destination broker (Kafka's
send thread coalesces the waiting produces of one node into one request); the
CreateTopics goes to this broker (Kafka's to a random one); a broker that never listens
(``in_process_share_state``) has no channel and fails every write.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.cluster.features import SHARE_VERSION, FeatureControl
from broker.config.dynamic_config import dynamic_layers
from broker.replica.replica_manager import ReplicaManager
from broker.share.dlq.dlq_records import (
    DLQRecordParameter,
    build_dlq_batches,
    destination_partition,
)
from protocol.builders import request_builder
from protocol.record_batch import CorruptRecordError, Record, iter_batches, iter_records
from purgatory import SystemTimer, TimerTask

log = logging.getLogger("broker.share.dlq")

ERRORS_DEADLETTERQUEUE_GROUP_ENABLE = "errors.deadletterqueue.group.enable"  # a topic config
AUTO_CREATE_TOPICS_ENABLE = "errors.deadletterqueue.auto.create.topics.enable"
TOPIC_NAME_PREFIX = "errors.deadletterqueue.topic.name.prefix"
PRODUCE, PRODUCE_VERSION = 0, 11
CREATE_TOPICS, CREATE_TOPICS_VERSION = 19, 7
DLQ_MAX_FETCH_BYTES = 1024 * 1024
DEFAULT_MAX_MESSAGE_BYTES = 1048588
REQUEST_BACKOFF_MS = 1_000
REQUEST_BACKOFF_MAX_MS = 30_000
MAX_REQUEST_ATTEMPTS = 5
_RETRIABLE_CREATE = (ErrorCode.topic_already_exists, ErrorCode.throttling_quota_exceeded)

OnDone = Callable[[], None]


class DLQGroupSettings(Protocol):
    """What the DLQ reads of a group's GROUP configs (``GroupConfigManager``)."""

    def deadletterqueue_topic(self, group_id: str) -> tuple[str, bool]: ...


class DLQChannels(Protocol):
    """How requests reach other brokers (``BrokerChannels``)."""

    def send(
        self,
        broker_id: int,
        api_key: int,
        version: int,
        body: Any,
        on_response: Callable[[Any | None], None],
    ) -> None: ...

    async def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class DLQConfig:
    """The broker's DLQ configs (Kafka's ``GroupCoordinatorConfig``)."""

    auto_create_topics_enable: bool = False  # errors.deadletterqueue.auto.create.topics.enable
    topic_name_prefix: str = "dlq."  # errors.deadletterqueue.topic.name.prefix


@dataclass(slots=True)
class DLQGroupMetrics:
    """Kafka's ShareGroupMetrics DLQ meters of one group, as totals."""

    records: int = 0  # DeadLetterQueueRecordCount
    produce_requests: int = 0  # DeadLetterQueueTotalProduceRequestsPerSec
    failed_produce_requests: int = 0  # DeadLetterQueueFailedProduceRequestsPerSec


@dataclass(slots=True)
class _Write:
    """One enqueued run on its way: Kafka's ``ProduceRequestHandler``."""

    param: DLQRecordParameter
    on_done: OnDone
    batches: list[tuple[int, int, bytes]] = field(default_factory=list)
    create_attempts: int = 0
    produce_attempts: int = 0


class ShareGroupDLQManager:
    """The broker's share-group dead-letter queue; see the module docstring."""

    def __init__(
        self,
        broker_id: int,
        config: DLQConfig,
        metadata: ClusterMetadata,
        features: FeatureControl,
        group_settings: DLQGroupSettings,
        replica_manager: ReplicaManager,
        timer: SystemTimer,
        channels: DLQChannels | None,
    ) -> None:
        self._broker_id = broker_id
        self._config = config
        self._metadata = metadata
        self._features = features
        self._group_settings = group_settings
        self._replica_manager = replica_manager
        self._timer = timer
        self._channels = channels
        self.metrics: dict[str, DLQGroupMetrics] = {}
        self.in_flight = 0  # writes not ended yet

    async def start(self) -> None:
        """A broker component: nothing to start (the channels open on first use)."""

    async def stop(self) -> None:
        """Writes still under way end with the broker; their runs stay ARCHIVING in the
        durable state, for the next leader."""
        if self._channels is not None:
            await self._channels.stop()

    # -- the gate --------------------------------------------------------------------

    def enabled(self, group_id: str) -> bool:
        """Kafka's ``isDLQEnabledForGroup``: share.version >= 2 and a DLQ topic named."""
        if self._features.level(SHARE_VERSION) < 2:
            return False
        return self._group_settings.deadletterqueue_topic(group_id)[0] != ""

    def validate(self, group_id: str) -> str | None:
        """Kafka's ``validateDlqTopic``: why the group's DLQ cannot be written, or None."""
        topic, _copy = self._group_settings.deadletterqueue_topic(group_id)
        if not topic:
            return f"Configured DLQ topic name in share group: {group_id} is empty."
        if topic.startswith("__"):
            return (
                f"Configured DLQ topic name in share group: {group_id} cannot start with __, "
                f"topic: {topic}."
            )
        info = self._metadata.topics.get(topic)
        if info is not None and info.configs.get(ERRORS_DEADLETTERQUEUE_GROUP_ENABLE) != "true":
            return (
                f"DLQ is not enabled on configured DLQ topic for share group: {group_id}, "
                f"topic: {topic}"
            )
        prefix = self._broker_value(TOPIC_NAME_PREFIX, self._config.topic_name_prefix)
        if prefix and not topic.startswith(prefix):
            return (
                "Configured DLQ topic name does not comply with the DLQ topic prefix in share "
                f"group: {group_id}, topic: {topic}, prefix: {prefix}"
            )
        auto_create = str(self._config.auto_create_topics_enable).lower()
        if info is None and self._broker_value(AUTO_CREATE_TOPICS_ENABLE, auto_create) != "true":
            return (
                "DLQ topic does not exist and auto create is disabled on cluster for share "
                f"group: {group_id}, topic: {topic}."
            )
        return None

    def _broker_value(self, name: str, static: str) -> str:
        """A dynamic broker config (this broker's, else the cluster default), else the
        broker's static one: Kafka's DLQ configs are cluster-wide dynamic."""
        for layer in dynamic_layers(self._metadata, self._broker_id):
            if name in layer:
                return layer[name]
        return static

    # -- enqueue ---------------------------------------------------------------------

    def enqueue(self, param: DLQRecordParameter, on_done: OnDone) -> None:
        """Write ``param``'s offsets to the group's DLQ topic; ``on_done`` when it ends."""
        self.in_flight += 1
        self._next(_Write(param, on_done))

    def _next(self, write: _Write) -> None:
        """The write's next step, its configs validated again (they are dynamic, as
        Kafka re-validates a retry): create the topic, build its batches, or produce."""
        error = self.validate(write.param.group_id)
        if error is None and self._channels is None:
            error = "this broker has no inter-broker channel to write the DLQ with"
        if error is not None:
            self._end(write, error)
            return
        topic, _copy = self._group_settings.deadletterqueue_topic(write.param.group_id)
        if topic not in self._metadata.topics:
            self._create_topic(write, topic)
            return
        if not write.batches:
            write.batches = self._build(write.param, topic)
        self._produce(write, topic)

    def _build(self, param: DLQRecordParameter, topic: str) -> list[tuple[int, int, bytes]]:
        _topic, copy = self._group_settings.deadletterqueue_topic(param.group_id)
        max_bytes = self._max_message_bytes(topic)
        source = self._read_source(param, max_bytes) if copy else {}
        return build_dlq_batches(param, source, self._replica_manager.wall_clock_ms(), max_bytes)

    def _max_message_bytes(self, topic: str) -> int:
        info = self._metadata.topics.get(topic)
        text = info.configs.get("max.message.bytes") if info is not None else None
        return int(text) if text is not None else DEFAULT_MAX_MESSAGE_BYTES

    def _end(self, write: _Write, error: str | None = None) -> None:
        self.in_flight -= 1
        if error is not None:
            log.error("Unable to write %s to the DLQ: %s", _describe(write.param), error)
        write.on_done()

    def _retry(self, write: _Write, attempts: int, step: Callable[[], None]) -> bool:
        """Run ``step`` after the backoff of ``attempts``; False past the last attempt."""
        if attempts >= MAX_REQUEST_ATTEMPTS:
            return False
        delay = min(REQUEST_BACKOFF_MS * 2 ** (attempts - 1), REQUEST_BACKOFF_MAX_MS)
        self._timer.add(_RetryTask(delay, step))
        return True

    def _group_metrics(self, group_id: str) -> DLQGroupMetrics:
        metrics = self.metrics.get(group_id)
        if metrics is None:
            metrics = self.metrics[group_id] = DLQGroupMetrics()
        return metrics

    # -- CreateTopics ----------------------------------------------------------------

    def _create_topic(self, write: _Write, topic: str) -> None:
        b = request_builder(CREATE_TOPICS, CREATE_TOPICS_VERSION)
        configs = {
            ERRORS_DEADLETTERQUEUE_GROUP_ENABLE: "true",
            "message.timestamp.type": "CreateTime",
        }
        body = b.CreateTopicsRequest(
            topics=(
                b.CreatableTopic(
                    name=topic,
                    num_partitions=-1,
                    replication_factor=-1,
                    assignments=(),
                    configs=tuple(
                        b.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()
                    ),
                ),
            ),
            timeout=30000,
            validate_only=False,
        )

        def on_response(response: Any | None) -> None:
            self._created(write, topic, response)

        assert self._channels is not None
        self._channels.send(
            self._broker_id, CREATE_TOPICS, CREATE_TOPICS_VERSION, body, on_response
        )

    def _created(self, write: _Write, topic: str, response: Any | None) -> None:
        write.create_attempts += 1
        error = ErrorCode.network_exception
        message: str | None = None
        if response is not None:
            result = response.topics[0] if response.topics else None
            error = (
                ErrorCode(result.error_code)
                if result is not None
                else ErrorCode.unknown_server_error
            )
            message = result.error_message if result is not None else None
        if error is ErrorCode.none or (
            error is ErrorCode.topic_already_exists and topic in self._metadata.topics
        ):
            self._next(write)
            return
        retriable = error in _RETRIABLE_CREATE or response is None
        if retriable and self._retry(write, write.create_attempts, lambda: self._next(write)):
            return
        self._end(write, f"Unable to create DLQ topic {topic}: {message or error.name}")

    # -- Produce ---------------------------------------------------------------------

    def _produce(self, write: _Write, topic: str) -> None:
        info = self._metadata.topics[topic]
        partition = destination_partition(write.param.partition, len(info.partitions))
        state = self._metadata.partition_state(topic, partition)
        leader = state.leader if state is not None else -1
        if leader < 0:
            self._produced(write, topic, partition, None)
            return
        _first, _last, batch = write.batches[0]
        b = request_builder(PRODUCE, PRODUCE_VERSION)
        body = b.ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout=30000,
            topic_data=(
                b.TopicProduceData(
                    name=topic,
                    partition_data=(b.PartitionProduceData(index=partition, records=batch),),
                ),
            ),
        )
        self._group_metrics(write.param.group_id).produce_requests += 1

        def on_response(response: Any | None) -> None:
            self._produced(write, topic, partition, response)

        assert self._channels is not None
        self._channels.send(leader, PRODUCE, PRODUCE_VERSION, body, on_response)

    def _produced(self, write: _Write, topic: str, partition: int, response: Any | None) -> None:
        error, message = _produce_error(response, partition)
        metrics = self._group_metrics(write.param.group_id)
        if error is ErrorCode.none:
            first, last, _batch = write.batches.pop(0)
            metrics.records += last - first + 1
            write.produce_attempts = 0
            if write.batches:
                self._produce(write, topic)
            else:
                self._end(write)
            return
        write.produce_attempts += 1
        retriable = response is None or error is ErrorCode.not_leader_or_follower
        if retriable and self._retry(write, write.produce_attempts, lambda: self._next(write)):
            return
        metrics.failed_produce_requests += 1
        self._end(
            write, f"Unable to produce to DLQ topic {topic}-{partition}: {message or error.name}"
        )

    # -- copying the source records ---------------------------------------------------

    def _read_source(self, param: DLQRecordParameter, max_bytes: int) -> dict[int, Record]:
        """The source records of ``param`` this leader can read (Kafka's
        ``ShareGroupDLQRecordFetcher``); an offset it cannot read is left out."""
        partition = self._replica_manager.online_partition((param.topic, param.partition))
        found: dict[int, Record] = {}
        offset = param.first_offset
        while partition is not None and offset <= param.last_offset:
            read = partition.read(offset, DLQ_MAX_FETCH_BYTES, up_to_log_end=False)
            if read.error is not ErrorCode.none or not read.records:
                break
            next_offset = _collect(read.records, param, max_bytes, found)
            if next_offset <= offset:
                break
            offset = next_offset
        return found


class _RetryTask(TimerTask):
    """A backed-off retry on the timer."""

    __slots__ = ("_step",)

    def __init__(self, delay_ms: int, step: Callable[[], None]) -> None:
        super().__init__(delay_ms)
        self._step = step

    def run(self) -> None:
        self._step()


def _collect(
    records: bytes, param: DLQRecordParameter, max_bytes: int, found: dict[int, Record]
) -> int:
    """Add the records of ``records`` in ``param``'s range to ``found``; the offset after
    the last batch read (a batch that cannot be decoded is skipped)."""
    view = memoryview(records)
    next_offset = -1
    for pos, header in iter_batches(view, allow_partial_tail=True):
        next_offset = header.last_offset + 1
        if header.is_control or header.last_offset < param.first_offset:
            continue
        try:
            for record in iter_records(view[pos : pos + header.size], max_bytes):
                if param.first_offset <= record.offset <= param.last_offset:
                    found[record.offset] = record
        except CorruptRecordError as exc:
            log.warning("Unable to read %s for the DLQ: %s", _describe(param), exc)
        if next_offset > param.last_offset:
            break
    return next_offset


def _produce_error(response: Any | None, partition: int) -> tuple[ErrorCode, str | None]:
    if response is None:
        return ErrorCode.network_exception, "the leader could not be reached"
    for topic in response.responses:
        for result in topic.partition_responses:
            if result.index == partition:
                return ErrorCode(result.error_code), result.error_message
    return ErrorCode.unknown_server_error, "empty produce response"


def _describe(param: DLQRecordParameter) -> str:
    return (
        f"offsets {param.first_offset}-{param.last_offset} of {param.topic}-{param.partition} "
        f"(share group {param.group_id})"
    )
