"""Tiered storage on the manual clock: the store's model, the RLM's copy and expiration
tasks, local retention that waits for the copy, and DelayedRemoteFetch.

One broker's replica manager with its RemoteLogManager is built as ``build_broker``
builds them, over an in-memory tier whose every operation takes exactly 50 ms
(p50 = p99). Time moves only in ``tick``, which advances the clock and every timer as
the reapers would.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata, MetadataError
from broker.cluster.controller import Controller
from broker.config.broker_config import BrokerConfig
from broker.handlers.topic_configs import validate_topic_configs
from broker.ids import IdSource
from broker.log import LogManager
from broker.remote.delayed_remote_list_offsets import ListOffsetsPartitionStatus
from broker.remote.remote_log_manager import RemoteLogManager
from broker.remote.remote_log_metadata_topic import REMOTE_LOG_METADATA_TOPIC
from broker.remote.remote_log_segment_metadata import RemoteLogSegmentState
from broker.remote.remote_storage_manager import RemoteStorageException
from broker.remote.storage_model import (
    LatencyModel,
    RemoteOperation,
    RemoteStorageModel,
)
from broker.remote.tiered_storage import TieredStorage
from broker.replica.delayed_fetch import FetchParams, FetchPartitionStatus, FetchResults
from broker.replica.partition import Partition, TopicPartition
from broker.replica.replica_fetcher import ReplicaFetcherManager
from broker.replica.replica_manager import ReplicaManager
from broker.server.purgatories import PurgatoryName, PurgatoryOutcome, PurgatorySet
from protocol.record_batch import iter_batches
from protocol.record_builder import build_record_batch
from purgatory import ManualClock, SystemTimer

TOPIC = "t"
TP: TopicPartition = (TOPIC, 0)
START_MS = 1_000
TASK_MS = 100  # remote.log.manager.task.interval.ms and log.retention.check.interval.ms
STORE_MS = 50  # every remote operation
WAIT_MS = 500  # remote.fetch.max.wait.ms (Kafka's default)
TIERED = {"remote.storage.enable": "true", "segment.bytes": "400", "local.retention.bytes": "1"}


@dataclass
class Parked:
    parked: list[PurgatoryName] = field(default_factory=list)
    outcomes: list[PurgatoryOutcome] = field(default_factory=list)
    connection_id: str = "c"
    correlation_id: int = 1

    def parked_in(self, purgatory: PurgatoryName) -> None:
        self.parked.append(purgatory)

    def purgatory_done(self, outcome: PurgatoryOutcome) -> None:
        self.outcomes.append(outcome)


@dataclass
class Node:
    clock: ManualClock
    metadata: ClusterMetadata
    purgatories: PurgatorySet
    manager: ReplicaManager
    rlm: RemoteLogManager
    tiered: TieredStorage

    @property
    def partition(self) -> Partition:
        partition = self.manager.online_partition(TP)
        assert partition is not None
        return partition

    def tick(self, ms: int) -> None:
        self.clock.advance(ms)
        for timer in (*self.purgatories.timers.values(), self.purgatories.scheduler_timer):
            timer.advance_clock()

    def produce(self, batches: int) -> None:
        for i in range(batches):
            record = build_record_batch(
                [(None, b"v%03d" % i + b"x" * 80, [])], timestamp_ms=START_MS + i
            )
            self.manager.append_records(1000, 1, {TP: record}, lambda _: None, None)

    def fetch(self, offset: int, parked: Parked | None = None) -> list[FetchResults]:
        calls: list[FetchResults] = []
        self.manager.fetch_messages(
            FetchParams(-1, 500, 1, 1 << 20),
            [FetchPartitionStatus(TP, offset, 1 << 20)],
            calls.append,
            parked,
        )
        return calls

    def segments(self, state: RemoteLogSegmentState) -> list[tuple[int, int]]:
        return [
            (m.start_offset, m.end_offset)
            for m in self.tiered.metadata.list_remote_log_segments(TP)
            if m.state is state
        ]


def offsets(records: bytes) -> list[int]:
    found: list[int] = []
    for _, header in iter_batches(records, allow_partial_tail=True):
        found.extend(range(header.base_offset, header.last_offset + 1))
    return found


@contextlib.asynccontextmanager
async def tiered_node(
    replicas: list[int] | None = None, **overrides: object
) -> AsyncIterator[Node]:
    clock = ManualClock(START_MS)
    config = BrokerConfig.model_validate(
        {
            "broker.id": 0,
            "remote.log.storage.system.enable": "true",
            "remote.log.manager.task.interval.ms": TASK_MS,
            "log.retention.check.interval.ms": TASK_MS,
            "rsm.config.latency.p50.ms": STORE_MS,
            "rsm.config.latency.p99.ms": STORE_MS,
            **overrides,
        }
    )
    metadata = ClusterMetadata(cluster_id="test-cluster")
    for broker_id in (0, 1):
        metadata.register_broker(broker_id, "127.0.0.1", 1)
    replicas = replicas or [0]
    metadata.create_topic(TOPIC, 1, len(replicas), TIERED, assignment=[replicas])
    # __remote_log_metadata on this broker alone (broker 1 never fetches)
    metadata.create_topic(REMOTE_LOG_METADATA_TOPIC, 1, 1, {}, assignment=[[0]])
    purgatories = PurgatorySet(clock, config)
    hosted: dict[TopicPartition, Partition] = {}
    fetchers = ReplicaFetcherManager(0, config, metadata, clock, hosted)
    fetchers.pause_replication()
    managers: dict[int, ReplicaManager] = {}
    tiered = TieredStorage.build(
        config, None, random.Random(7), metadata, lambda: managers, clock.now_ms
    )
    ids = IdSource.seeded(7)
    rlm = RemoteLogManager(
        0, config, metadata, clock, clock.now_ms, purgatories, hosted,
        tiered.new_metadata_manager(), tiered.storage, tiered.model, ids,
    )  # fmt: skip
    manager = ReplicaManager(
        0, metadata, config, clock, purgatories, LogManager(None), Controller(metadata),
        fetchers, wall_clock_ms=clock.now_ms, remote_log_manager=rlm,
    )  # fmt: skip
    managers[0] = manager
    await manager.start()
    try:
        yield Node(clock, metadata, purgatories, manager, rlm, tiered)
    finally:
        await manager.stop()


async def tiered_until_trimmed(node: Node, batches: int = 20) -> None:
    """Produce, then let the RLM copy every rolled segment and retention trim them."""
    node.produce(batches)
    for _ in range(30):
        node.tick(STORE_MS)
    assert node.partition.local_log_start_offset > 0


# -- the store's model -------------------------------------------------------------------


def test_latency_is_drawn_from_the_seed_and_bytes_take_the_throughput() -> None:
    model = LatencyModel(p50_ms=10, p99_ms=100)
    draws = [model.sample_ms(random.Random(3), 0) for _ in range(3)]
    assert draws == [model.sample_ms(random.Random(3), 0)] * 3  # same seed, same wait
    many = sorted(model.sample_ms(random.Random(i), 0) for i in range(2000))
    assert 8 <= many[1000] <= 12 and 70 <= many[1980] <= 140  # p50 ~10, p99 ~100
    assert LatencyModel(bytes_per_second=1000).sample_ms(random.Random(1), 500) == 500


def test_a_down_store_holds_calls_until_it_heals_and_a_failing_kind_raises() -> None:
    clock = ManualClock(0)
    timer = SystemTimer(clock)
    model = RemoteStorageModel(
        random.Random(1), {op: LatencyModel(20, 20) for op in RemoteOperation}
    )
    outcomes: list[tuple[object, Exception | None]] = []
    model.set_down(True)
    model.submit(
        timer,
        RemoteOperation.FETCH_SEGMENT,
        0,
        lambda: "data",
        lambda r, e: outcomes.append((r, e)),
    )
    clock.advance(1000)
    timer.advance_clock()
    assert outcomes == [] and len(model.held) == 1  # no answer while down
    model.set_down(False)
    clock.advance(20)
    timer.advance_clock()
    assert outcomes == [("data", None)]
    model.set_failing({RemoteOperation.COPY})
    model.submit(timer, RemoteOperation.COPY, 0, lambda: None, lambda r, e: outcomes.append((r, e)))
    clock.advance(20)
    timer.advance_clock()
    assert isinstance(outcomes[-1][1], RemoteStorageException)


# -- the copy task and local retention ----------------------------------------------------


async def test_the_leader_copies_rolled_segments_and_local_retention_waits_for_the_copy() -> None:
    async with tiered_node() as node:
        node.produce(20)
        node.tick(TASK_MS)  # the task starts the first copy; the store takes 50 ms
        started = node.segments(RemoteLogSegmentState.COPY_SEGMENT_STARTED)
        assert started and started[0][0] == 0
        assert node.segments(RemoteLogSegmentState.COPY_SEGMENT_FINISHED) == []
        assert node.partition.local_log_start_offset == 0  # nothing copied: nothing goes
        node.tick(STORE_MS)
        finished = node.segments(RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
        assert finished[0] == started[0]
        for _ in range(30):
            node.tick(STORE_MS)
        copied = node.tiered.metadata.highest_offset_for_epoch(TP)
        partition = node.partition
        # Every rolled segment copied, in order and without gaps; the active one is not.
        ranges = node.segments(RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))
        assert copied < partition.log.active_segment_base_offset
        # Local retention (local.retention.bytes=1) deleted exactly what was copied.
        assert partition.local_log_start_offset == copied + 1
        assert partition.log_start_offset == 0  # the tier still has it all
        assert node.rlm.copy_bytes > 0


async def test_a_copy_that_ends_after_its_leader_epoch_was_fenced_is_deleted() -> None:
    async with tiered_node(replicas=[0, 1]) as node:
        node.produce(20)
        node.metadata.change_partition(TOPIC, 0, isr=[0])  # the follower never fetches
        node.tick(TASK_MS)  # the copy starts under epoch e; the store takes 50 ms
        [started] = node.segments(RemoteLogSegmentState.COPY_SEGMENT_STARTED)
        epoch = node.partition.leader_epoch
        node.metadata.change_partition(TOPIC, 0, leader=1, isr=[1])  # fenced meanwhile
        assert node.partition.leader_epoch > epoch
        node.tick(STORE_MS)  # the late copy ends: deleted, never readable
        assert node.segments(RemoteLogSegmentState.COPY_SEGMENT_FINISHED) == []
        assert node.segments(RemoteLogSegmentState.DELETE_SEGMENT_STARTED) == [started]
        node.tick(STORE_MS)
        assert list(node.tiered.metadata.list_remote_log_segments(TP)) == []
        assert node.rlm.copy_bytes == 0 and node.tiered.metadata.highest_offset_for_epoch(TP) < 0


async def test_segment_events_are_records_of_remote_log_metadata_any_broker_reads() -> None:
    async with tiered_node() as node:
        await tiered_until_trimmed(node)
        events, end = node.tiered.topic.read(0, 0)
        copied = node.tiered.metadata.copied_segments(TP)
        # Kafka's framing (api key, version as varints): a full record when a copy
        # starts, an update when it finishes; nothing else happened yet.
        assert [e[:2] for e in events] == [b"\x00\x00", b"\x01\x00"] * len(copied)
        assert (
            end
            == len(events)
            == node.manager.partitions[(REMOTE_LOG_METADATA_TOPIC, 0)].high_watermark
        )
        # A cache that has read nothing yet (a new leader's, a restarted broker's)
        # learns every segment from the topic.
        fresh = node.tiered.new_metadata_manager()
        assert fresh.copied_segments(TP) == copied and copied


async def test_nothing_above_the_high_watermark_is_copied() -> None:
    async with tiered_node(replicas=[0, 1]) as node:  # the follower never fetches: HW 0
        node.produce(20)
        for _ in range(10):
            node.tick(TASK_MS)
        assert node.partition.high_watermark == 0
        assert list(node.tiered.metadata.list_remote_log_segments(TP)) == []


async def test_remote_segments_past_total_retention_are_deleted_and_the_log_start_moves() -> None:
    async with tiered_node() as node:
        await tiered_until_trimmed(node)
        first = node.segments(RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
        node.metadata.replace_configs(
            TOPIC, {**TIERED, "retention.ms": "1", "local.retention.ms": "1"}
        )
        node.tick(TASK_MS)
        node.tick(STORE_MS)
        assert node.segments(RemoteLogSegmentState.COPY_SEGMENT_FINISHED) == []
        assert first and node.partition.log_start_offset == node.partition.local_log_start_offset


# -- DelayedRemoteFetch -------------------------------------------------------------------


async def test_a_fetch_below_the_local_log_start_parks_in_remote_fetch_until_the_read() -> None:
    async with tiered_node() as node:
        await tiered_until_trimmed(node)
        parked = Parked()
        calls = node.fetch(0, parked)
        assert calls == [] and parked.parked == [PurgatoryName.REMOTE_FETCH]
        assert node.purgatories.remote_fetch.num_delayed() == 1
        node.tick(STORE_MS)  # the segment's indexes (a cold cache: one FETCH_INDEX call)
        assert calls == [] and node.rlm.index_cache.misses == 1
        node.tick(STORE_MS - 1)
        assert calls == []
        node.tick(1)  # Case c: the remote read is done
        [[(_, result)]] = calls
        assert result.error is ErrorCode.none and offsets(result.records)[0] == 0
        assert result.log_start_offset == 0 and result.delayed_remote_storage_fetch is None
        assert parked.outcomes == [PurgatoryOutcome.COMPLETED]


async def test_a_cached_index_saves_its_fetch_and_a_cache_too_small_keeps_none() -> None:
    # (cache bytes, whether the second read of a segment finds its indexes cached)
    for cache_bytes, cached in ((1 << 20, True), (1, False)):
        overrides = {"remote.log.index.file.cache.total.size.bytes": cache_bytes}
        async with tiered_node(**overrides) as node:
            await tiered_until_trimmed(node)
            for hit in (False, cached):
                calls = node.fetch(0)
                if not hit:  # FETCH_INDEX first, then the segment (ticks of one call each)
                    node.tick(STORE_MS)
                node.tick(STORE_MS - 1)
                assert calls == []
                node.tick(1)
                assert len(calls) == 1 and offsets(calls[0][0][1].records)[0] == 0
            cache = node.rlm.index_cache
            assert (cache.hits, len(cache)) == ((1, 1) if cached else (0, 0))


async def test_remote_reads_queue_behind_the_reader_threads_and_a_full_queue_refuses() -> None:
    overrides = {"remote.log.reader.threads": 1, "remote.log.reader.max.pending.tasks": 1}
    async with tiered_node(**overrides) as node:
        await tiered_until_trimmed(node)
        node.fetch(0)  # warm the index cache: each read is one STORE_MS on its thread
        node.tick(STORE_MS)
        node.tick(STORE_MS)
        first, second = node.fetch(0), node.fetch(0)
        pool = node.rlm.reader_pool
        assert (pool.running, pool.queue_size) == (1, 1)  # the second waits for the thread
        [[(_, refused)]] = node.fetch(0)  # the queue is full: Kafka's RejectedExecution
        assert refused.error is ErrorCode.unknown_server_error
        node.tick(STORE_MS)
        assert len(first) == 1 and second == [] and pool.queue_size == 0
        node.tick(STORE_MS)
        assert len(second) == 1 and pool.running == 0


async def test_with_the_store_down_a_remote_fetch_expires_empty_at_remote_fetch_max_wait() -> None:
    async with tiered_node() as node:
        await tiered_until_trimmed(node)
        node.tiered.model.set_down(True)
        parked = Parked()
        calls = node.fetch(0, parked)
        node.tick(WAIT_MS - 1)
        assert calls == []
        node.tick(1)
        [[(_, result)]] = calls
        # Kafka's answer: the partition as the local read found it, no records, no error
        assert result.error is ErrorCode.none and result.records == b""
        assert parked.outcomes == [PurgatoryOutcome.EXPIRED]
        assert node.purgatories.remote_fetch.expired_count == 1
        node.tiered.model.set_down(False)
        node.tick(STORE_MS)  # the abandoned read never answers anyone
        assert len(calls) == 1


async def test_a_leadership_change_completes_a_parked_remote_fetch() -> None:
    async with tiered_node() as node:
        await tiered_until_trimmed(node)
        parked = Parked()
        calls = node.fetch(0, parked)
        node.metadata.change_partition(TOPIC, 0, leader=1)
        assert len(calls) == 1  # Case a
        assert parked.outcomes == [PurgatoryOutcome.COMPLETED]


# -- configs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configs", "enabled", "message"),
    [
        ({"remote.storage.enable": "true"}, False, "Tiered Storage functionality is disabled"),
        (
            {"remote.storage.enable": "true", "cleanup.policy": "compact"},
            True,
            "only supports topics with cleanup.policy=delete",
        ),
        (
            {"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "2000"},
            True,
            "Invalid value 2000 for configuration local.retention.ms: Value must not be more "
            "than retention.ms property value: 1000",
        ),
        (
            {
                "remote.storage.enable": "true",
                "retention.bytes": "10",
                "local.retention.bytes": "-1",
            },
            True,
            "Value must not be -1 as retention.bytes value is set as 10.",
        ),
    ],
)
def test_kafka_refuses_remote_storage_configs_it_cannot_honour(
    configs: dict[str, str], enabled: bool, message: str
) -> None:
    with pytest.raises(MetadataError, match=message.replace(".", r"\.")) as caught:
        validate_topic_configs(configs.items(), remote_storage_system_enabled=enabled)
    assert caught.value.error is ErrorCode.invalid_config


def test_remote_storage_on_a_delete_topic_is_accepted() -> None:
    configs = {"remote.storage.enable": "true", "local.retention.ms": "1000"}
    assert validate_topic_configs(configs.items(), remote_storage_system_enabled=True) == configs


# -- DelayedRemoteListOffsets ---------------------------------------------------------------


async def test_a_timestamp_in_the_remote_tier_waits_in_remote_list_offsets() -> None:
    async with tiered_node() as node:
        await tiered_until_trimmed(node)
        partition = node.partition
        status = node.rlm.offset_for_timestamp(partition, START_MS + 2, partition.high_watermark)
        assert status is not None and not status.done
        answers: list[list[ListOffsetsPartitionStatus]] = []
        parked = Parked()
        node.rlm.park_list_offsets([status], 0, answers.append, parked)
        assert answers == [] and parked.parked == [PurgatoryName.REMOTE_LIST_OFFSETS]
        node.tick(STORE_MS)  # Case c: the search is done
        [[answer]] = answers
        assert (answer.error, answer.offset, answer.timestamp) == (ErrorCode.none, 2, START_MS + 2)
        assert parked.outcomes == [PurgatoryOutcome.COMPLETED]
        # A timestamp past the tier's records is the local log's to answer, at once.
        assert node.rlm.offset_for_timestamp(partition, START_MS + 10_000, 100) is None


async def test_a_leadership_change_completes_a_parked_remote_timestamp_search() -> None:
    async with tiered_node() as node:
        await tiered_until_trimmed(node)
        node.tiered.model.set_down(True)  # the search would wait for its timeout
        partition = node.partition
        status = node.rlm.offset_for_timestamp(partition, START_MS, partition.high_watermark)
        assert status is not None
        answers: list[list[ListOffsetsPartitionStatus]] = []
        parked = Parked()
        node.rlm.park_list_offsets([status], 0, answers.append, parked)
        assert answers == []
        node.metadata.change_partition(TOPIC, 0, leader=1)
        assert len(answers) == 1  # Case a, without waiting for the timeout
        assert parked.outcomes == [PurgatoryOutcome.COMPLETED]


async def test_a_remote_timestamp_search_times_out_with_request_timed_out() -> None:
    async with tiered_node() as node:
        await tiered_until_trimmed(node)
        node.tiered.model.set_down(True)
        partition = node.partition
        status = node.rlm.offset_for_timestamp(partition, START_MS, partition.high_watermark)
        assert status is not None
        answers: list[list[ListOffsetsPartitionStatus]] = []
        parked = Parked()
        node.rlm.park_list_offsets([status], 0, answers.append, parked)
        node.tick(30_000 - 1)  # remote.list.offsets.request.timeout.ms (Kafka's 30 s)
        assert answers == []
        node.tick(1)
        [[answer]] = answers
        assert answer.error is ErrorCode.request_timed_out
        assert parked.outcomes == [PurgatoryOutcome.EXPIRED]
