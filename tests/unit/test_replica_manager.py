"""ReplicaManager with DelayedFetch and DelayedProduce on the manual clock.

Each test builds one broker's replica manager whole, as ``build_broker`` does (a
``PurgatorySet`` for the Produce and Fetch purgatories and the scheduler timer, a
``ReplicaFetcherManager`` over the same table of hosted partitions), on a
``ManualClock``. Nothing sleeps and nothing opens a socket: time moves only when a test
calls ``tick``, which advances the clock and then each timer, as the reapers would.
Followers are simulated by calling ``fetch_messages`` with their replica id, which is
what the leader sees when a real follower's Fetch arrives.

Broker 0 is the broker under test and leads the topic unless a test moves leadership.
Its fetchers are paused from the start: if a test makes broker 0 a follower, its
fetcher task waits instead of dialling the (fake) leader address, and ``stop()`` ends it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.cluster.controller import Controller
from broker.config.broker_config import BrokerConfig
from broker.log import LogManager
from broker.replica.delayed_fetch import FetchParams, FetchPartitionStatus, FetchResults
from broker.replica.delayed_produce import ProduceStatuses
from broker.replica.partition import Partition, TopicPartition
from broker.replica.replica_fetcher import ReplicaFetcherManager
from broker.replica.replica_manager import ReplicaManager
from broker.server.purgatories import PurgatoryName, PurgatoryOutcome, PurgatorySet
from protocol.record_batch import iter_batches
from protocol.record_builder import build_record_batch
from purgatory import ManualClock

BROKER = 0
TOPIC = "t"
TP: TopicPartition = (TOPIC, 0)
START_MS = 1_000
LAG_MS = 10_000  # replica.lag.time.max.ms; the isr-expiration task runs every LAG_MS / 2
MAX_WAIT_MS = 500
PRODUCE_TIMEOUT_MS = 30_000
CONSUMER = -1


# -- helpers ---------------------------------------------------------------------------


@dataclass
class FakeParkedRequest:
    """A ``broker.server.purgatories.ParkedRequest``: records where it parked and how it left."""

    connection_id: str = "127.0.0.1:50000-127.0.0.1:9092-0"
    correlation_id: int = 42
    parked: list[PurgatoryName] = field(default_factory=list)
    outcomes: list[PurgatoryOutcome] = field(default_factory=list)

    def parked_in(self, purgatory: PurgatoryName) -> None:
        self.parked.append(purgatory)

    def purgatory_done(self, outcome: PurgatoryOutcome) -> None:
        self.outcomes.append(outcome)


@dataclass
class FetchAnswer:
    """The ``respond`` callback of one Fetch: every answer it was given."""

    calls: list[FetchResults] = field(default_factory=list)

    def __call__(self, results: FetchResults) -> None:
        self.calls.append(results)

    @property
    def answered(self) -> bool:
        return bool(self.calls)

    def only(self) -> FetchResults:
        assert len(self.calls) == 1, f"answered {len(self.calls)} times"
        return self.calls[0]


@dataclass
class ProduceAnswer:
    calls: list[ProduceStatuses] = field(default_factory=list)

    def __call__(self, statuses: ProduceStatuses) -> None:
        self.calls.append(statuses)

    @property
    def answered(self) -> bool:
        return bool(self.calls)

    def error(self) -> ErrorCode:
        assert len(self.calls) == 1, f"answered {len(self.calls)} times"
        return self.calls[0][TP].result.error


@dataclass
class Node:
    """One broker's replica manager and what a test drives it with."""

    clock: ManualClock
    metadata: ClusterMetadata
    controller: Controller
    purgatories: PurgatorySet
    fetchers: ReplicaFetcherManager
    manager: ReplicaManager

    @property
    def partition(self) -> Partition:
        partition = self.manager.online_partition(TP)
        assert partition is not None
        return partition

    def tick(self, ms: int) -> None:
        """Let ``ms`` pass, then let every timer run what is due (the reapers' job)."""
        self.clock.advance(ms)
        self.purgatories.timers[PurgatoryName.PRODUCE].advance_clock()
        self.purgatories.timers[PurgatoryName.FETCH].advance_clock()
        self.purgatories.scheduler_timer.advance_clock()

    def isr(self) -> list[int]:
        state = self.metadata.partition_state(*TP)
        assert state is not None
        return state.isr

    def fetch(
        self,
        offset: int,
        *,
        replica_id: int = CONSUMER,
        max_wait_ms: int = MAX_WAIT_MS,
        min_bytes: int = 1,
        leader_epoch: int = -1,
        parked: FakeParkedRequest | None = None,
    ) -> FetchAnswer:
        answer = FetchAnswer()
        self.manager.fetch_messages(
            FetchParams(replica_id, max_wait_ms, min_bytes, 1 << 20),
            [FetchPartitionStatus(TP, offset, 1 << 20, leader_epoch)],
            answer,
            parked,
        )
        return answer

    def follower_fetch(self, replica_id: int, offset: int, *, leader_epoch: int = -1) -> None:
        """A follower's Fetch at ``offset`` answered at once (max_wait 0): it reports
        that the follower holds everything below ``offset``."""
        answer = self.fetch(offset, replica_id=replica_id, max_wait_ms=0, leader_epoch=leader_epoch)
        assert answer.answered

    def produce(
        self,
        records: int = 1,
        *,
        acks: int = -1,
        timeout_ms: int = PRODUCE_TIMEOUT_MS,
        parked: FakeParkedRequest | None = None,
    ) -> ProduceAnswer:
        answer = ProduceAnswer()
        self.manager.append_records(timeout_ms, acks, {TP: batch(records)}, answer, parked)
        return answer


def batch(records: int = 1) -> bytes:
    return build_record_batch([(None, b"value", [])] * records, timestamp_ms=START_MS)


def offsets(records: bytes) -> list[int]:
    """Every record offset in a fetch response's records."""
    found: list[int] = []
    for _, header in iter_batches(records, allow_partial_tail=True):
        found.extend(range(header.base_offset, header.last_offset + 1))
    return found


def result_of(answer: FetchAnswer) -> tuple[ErrorCode, list[int], int]:
    """(error, offsets, high watermark) of a one-partition fetch answer."""
    [(status, result)] = answer.only()
    assert status.tp == TP
    return result.error, offsets(result.records), result.high_watermark


@contextlib.asynccontextmanager
async def broker_node(
    replicas: list[int],
    *,
    isr: list[int] | None = None,
    topic_configs: dict[str, str] | None = None,
    elr_level: int = 1,
) -> AsyncIterator[Node]:
    """Broker 0 started over a one-partition topic placed on ``replicas``
    (``elr_level``: the ``eligible.leader.replicas.version`` feature)."""
    clock = ManualClock(START_MS)
    config = BrokerConfig.model_validate({"broker.id": BROKER, "replica.lag.time.max.ms": LAG_MS})
    metadata = ClusterMetadata(cluster_id="test-cluster")
    for broker_id in (0, 1, 2):
        # Never dialled: broker 0's fetchers are paused below.
        metadata.register_broker(broker_id, "127.0.0.1", 1)
    controller = Controller(metadata, eligible_leader_replicas_level=lambda: elr_level)
    metadata.create_topic(TOPIC, 1, len(replicas), topic_configs or {}, assignment=[replicas])
    if isr is not None:
        metadata.change_partition(TOPIC, 0, isr=isr)
    purgatories = PurgatorySet(clock, config)
    hosted: dict[TopicPartition, Partition] = {}
    fetchers = ReplicaFetcherManager(BROKER, config, metadata, clock, hosted)
    fetchers.pause_replication()
    manager = ReplicaManager(
        BROKER,
        metadata,
        config,
        clock,
        purgatories,
        LogManager(None),
        controller,
        fetchers,
        wall_clock_ms=clock.now_ms,
    )
    await manager.start()
    try:
        yield Node(clock, metadata, controller, purgatories, fetchers, manager)
    finally:
        await manager.stop()


# -- DelayedFetch ------------------------------------------------------------------------


async def test_a_fetch_parked_at_the_log_end_is_answered_by_the_next_append() -> None:
    async with broker_node([0]) as node:
        parked = FakeParkedRequest()
        answer = node.fetch(0, parked=parked)
        assert not answer.answered
        assert node.purgatories.fetch.num_delayed() == 1
        assert parked.parked == [PurgatoryName.FETCH]
        assert parked.outcomes == []

        node.tick(MAX_WAIT_MS // 2)
        assert not answer.answered
        node.produce(3, acks=1)

        assert result_of(answer) == (ErrorCode.none, [0, 1, 2], 3)
        assert parked.outcomes == [PurgatoryOutcome.COMPLETED]
        # Completed operations leave the timer at once, not at their deadline.
        assert node.purgatories.fetch.num_delayed() == 0
        node.tick(MAX_WAIT_MS)
        assert len(answer.calls) == 1
        assert parked.outcomes == [PurgatoryOutcome.COMPLETED]
        assert node.purgatories.fetch.expired_count == 0


async def test_append_to_leader_wakes_a_parked_fetch_too() -> None:
    async with broker_node([0]) as node:
        answer = node.fetch(0)
        result = node.manager.append_to_leader(TP, batch(2), required_acks=1)
        assert result.error is ErrorCode.none
        assert result_of(answer) == (ErrorCode.none, [0, 1], 2)


async def test_a_consumer_fetch_sees_new_data_only_once_followers_move_the_high_watermark() -> None:
    async with broker_node([0, 1, 2]) as node:
        parked = FakeParkedRequest()
        consumer = node.fetch(0, parked=parked)
        node.produce(2, acks=1)
        node.produce(1, acks=1)
        # Appended, but not replicated: the high watermark is still 0.
        assert node.partition.log_end_offset == 3
        assert node.partition.high_watermark == 0
        assert not consumer.answered

        # A follower fetching at the log end reads nothing, parks, and moves nothing
        # while the other in-sync follower has not fetched.
        follower_1 = node.fetch(3, replica_id=1)
        assert not follower_1.answered
        assert node.partition.high_watermark == 0
        assert not consumer.answered
        # The other follower has the first batch: the consumer may see that batch.
        node.follower_fetch(2, 2)
        assert node.partition.high_watermark == 2
        assert result_of(consumer) == (ErrorCode.none, [0, 1], 2)
        assert parked.outcomes == [PurgatoryOutcome.COMPLETED]

        # A consumer at the high watermark waits for the last record to be replicated.
        consumer = node.fetch(2)
        assert not consumer.answered
        node.follower_fetch(2, 3)
        assert result_of(consumer) == (ErrorCode.none, [2], 3)


async def test_a_follower_fetch_parked_at_the_log_end_is_answered_by_an_append() -> None:
    # Followers read up to the log end, so an append alone answers them (the high
    # watermark cannot move before they fetch).
    async with broker_node([0, 1, 2]) as node:
        parked = FakeParkedRequest()
        follower = node.fetch(0, replica_id=1, parked=parked)
        consumer = node.fetch(0)
        assert not follower.answered
        assert parked.parked == [PurgatoryName.FETCH]

        node.produce(2, acks=1)

        assert result_of(follower) == (ErrorCode.none, [0, 1], 0)
        assert parked.outcomes == [PurgatoryOutcome.COMPLETED]
        assert not consumer.answered


async def test_a_parked_fetch_expires_empty_after_max_wait() -> None:
    async with broker_node([0, 1, 2]) as node:
        parked = FakeParkedRequest()
        answer = node.fetch(0, parked=parked)
        node.produce(1, acks=1)  # not replicated: invisible to the consumer

        node.tick(MAX_WAIT_MS - 1)
        assert not answer.answered
        node.tick(1)

        assert result_of(answer) == (ErrorCode.none, [], 0)
        assert parked.parked == [PurgatoryName.FETCH]
        assert parked.outcomes[-1] is PurgatoryOutcome.EXPIRED
        assert node.purgatories.fetch.expired_count == 1
        assert node.purgatories.fetch.num_delayed() == 0


async def test_a_fetch_with_enough_data_is_answered_without_parking() -> None:
    async with broker_node([0]) as node:
        node.produce(2, acks=1)
        parked = FakeParkedRequest()
        answer = node.fetch(0, parked=parked)
        assert result_of(answer) == (ErrorCode.none, [0, 1], 2)
        assert parked.parked == []
        assert parked.outcomes == []
        assert node.purgatories.fetch.num_delayed() == 0


async def test_a_fetch_waits_until_min_bytes_have_accumulated() -> None:
    async with broker_node([0]) as node:
        one_batch = len(batch(1))
        answer = node.fetch(0, min_bytes=2 * one_batch)
        node.produce(1, acks=1)
        assert not answer.answered
        node.produce(1, acks=1)
        assert result_of(answer) == (ErrorCode.none, [0, 1], 2)


async def test_a_parked_fetch_is_answered_not_leader_when_leadership_moves() -> None:
    async with broker_node([0, 1, 2]) as node:
        parked = FakeParkedRequest()
        answer = node.fetch(0, parked=parked)
        node.metadata.change_partition(TOPIC, 0, leader=1, isr=[1, 2])

        assert not node.partition.is_leader
        error, records, _ = result_of(answer)
        assert (error, records) == (ErrorCode.not_leader_or_follower, [])
        assert parked.outcomes == [PurgatoryOutcome.COMPLETED]
        assert node.purgatories.fetch.num_delayed() == 0


# -- DelayedProduce ----------------------------------------------------------------------


async def test_an_acks_all_produce_completes_when_the_last_isr_follower_fetches_past_it() -> None:
    async with broker_node([0, 1, 2]) as node:
        parked = FakeParkedRequest()
        answer = node.produce(2, parked=parked)
        assert not answer.answered
        assert parked.parked == [PurgatoryName.PRODUCE]
        assert node.purgatories.produce.num_delayed() == 1
        assert node.manager.delayed_produces == 1

        node.follower_fetch(1, 2)
        assert not answer.answered
        node.follower_fetch(2, 1)  # has offset 0 only: not yet
        assert node.partition.high_watermark == 1
        assert not answer.answered

        node.follower_fetch(2, 2)
        assert answer.error() is ErrorCode.none
        status = answer.calls[0][TP]
        assert (status.result.base_offset, status.result.last_offset) == (0, 1)
        assert parked.outcomes == [PurgatoryOutcome.COMPLETED]
        assert node.purgatories.produce.num_delayed() == 0
        node.tick(PRODUCE_TIMEOUT_MS)
        assert len(answer.calls) == 1
        assert node.purgatories.produce.expired_count == 0


async def test_an_acks_all_produce_fails_not_leader_when_leadership_moves() -> None:
    async with broker_node([0, 1, 2]) as node:
        parked = FakeParkedRequest()
        answer = node.produce(1, parked=parked)
        assert not answer.answered

        # The controller moves leadership to broker 1 (e.g. a preferred-leader election).
        node.metadata.change_partition(TOPIC, 0, leader=1, isr=[1, 2])

        assert answer.error() is ErrorCode.not_leader_or_follower
        assert parked.outcomes == [PurgatoryOutcome.COMPLETED]
        assert node.purgatories.produce.num_delayed() == 0
        assert TP in node.fetchers.following()


async def test_an_acks_all_produce_expires_with_request_timed_out() -> None:
    async with broker_node([0, 1, 2]) as node:
        parked = FakeParkedRequest()
        answer = node.produce(1, timeout_ms=1_000, parked=parked)
        node.follower_fetch(1, 1)  # one follower has it, the other never fetches

        node.tick(999)
        assert not answer.answered
        node.tick(1)

        assert answer.error() is ErrorCode.request_timed_out
        assert parked.parked == [PurgatoryName.PRODUCE]
        assert parked.outcomes[-1] is PurgatoryOutcome.EXPIRED
        assert node.purgatories.produce.expired_count == 1
        assert node.purgatories.produce.num_delayed() == 0
        # The batch stays in the leader's log: Kafka does not undo a timed-out append.
        assert node.partition.log_end_offset == 1


async def test_acks_all_is_refused_not_enough_replicas_when_the_isr_is_below_min() -> None:
    async with broker_node([0, 1, 2], isr=[0], topic_configs={"min.insync.replicas": "2"}) as node:
        parked = FakeParkedRequest()
        answer = node.produce(1, parked=parked)

        assert answer.error() is ErrorCode.not_enough_replicas
        assert node.partition.log_end_offset == 0  # nothing appended
        assert parked.parked == []
        assert node.purgatories.produce.num_delayed() == 0

        # min.insync.replicas binds acks=all only.
        assert node.produce(1, acks=1).error() is ErrorCode.none
        assert node.partition.log_end_offset == 1


async def test_the_broker_wide_min_insync_replicas_applies_without_a_topic_override() -> None:
    async with broker_node([0, 1], isr=[0]) as node:
        # min.insync.replicas defaults to 1: a lone leader is enough, and the answer
        # comes at once since the ISR (the leader) already has the batch.
        answer = node.produce(1)
        assert answer.error() is ErrorCode.none
        assert node.purgatories.produce.num_delayed() == 0


async def test_a_changed_min_insync_replicas_binds_the_next_produce() -> None:
    async with broker_node([0, 1], isr=[0]) as node:
        assert node.produce(1).error() is ErrorCode.none  # the default: 1
        node.metadata.set_broker_configs("", {"min.insync.replicas": "2"})  # cluster default
        assert node.produce(1).error() is ErrorCode.not_enough_replicas
        node.metadata.update_configs(TOPIC, {"min.insync.replicas": "1"})  # topic override
        assert node.produce(1).error() is ErrorCode.none
        node.metadata.replace_configs(TOPIC, {})  # back to the cluster default
        assert node.produce(1).error() is ErrorCode.not_enough_replicas


async def test_an_acks_all_produce_waiting_when_the_isr_shrinks_below_min_fails_after_append() -> (
    None
):
    # Before KIP-966's strict min ISR (eligible.leader.replicas.version=0).
    async with broker_node(
        [0, 1, 2], topic_configs={"min.insync.replicas": "2"}, elr_level=0
    ) as node:
        answer = node.produce(1)
        assert not answer.answered
        # Neither follower fetches: the isr-expiration task drops both.
        node.tick(LAG_MS + LAG_MS // 2)
        assert node.isr() == [0]
        assert answer.error() is ErrorCode.not_enough_replicas_after_append
        assert node.partition.high_watermark == 1


async def test_under_min_isr_the_high_watermark_stays_and_the_followers_join_the_elr() -> None:
    # Kafka 4.1+ (ELR on): below min ISR nothing commits, so who left keeps every
    # committed record and is an eligible leader.
    async with broker_node([0, 1, 2], topic_configs={"min.insync.replicas": "2"}) as node:
        answer = node.produce(1)
        node.tick(LAG_MS + LAG_MS // 2)
        assert node.isr() == [0]
        assert node.partition.high_watermark == 0
        assert not answer.answered
        state = node.metadata.partition_state(TOPIC, 0)
        assert state is not None and sorted(state.elr) == [1, 2]
        # One follower catches up: the ISR is back at min ISR, the HW moves, the ELR empties.
        node.follower_fetch(1, node.partition.log_end_offset)
        assert node.isr() == [0, 1]
        assert node.partition.high_watermark == 1
        assert state.elr == [] and state.last_known_elr == []
        assert answer.error() is ErrorCode.none


# -- the ISR -----------------------------------------------------------------------------


async def test_the_isr_expiration_task_drops_a_follower_that_stopped_fetching() -> None:
    async with broker_node([0, 1, 2]) as node:
        node.produce(1, acks=1)
        # Follower 1 keeps up; follower 2 never fetches.
        for _ in range(4):
            node.tick(LAG_MS // 4)
            node.follower_fetch(1, node.partition.log_end_offset)
        # Exactly replica.lag.time.max.ms without catching up is still in sync.
        assert node.clock.now_ms() - START_MS == LAG_MS
        assert node.isr() == [0, 1, 2]
        assert node.manager.isr_shrinks == 0

        node.tick(LAG_MS // 2)

        assert node.isr() == [0, 1]
        assert node.partition.isr == [0, 1]
        assert node.manager.isr_shrinks == 1
        assert node.controller.isr_shrinks == 1
        # Without the laggard the high watermark is follower 1's log end.
        assert node.partition.high_watermark == 1


async def test_the_isr_shrink_answers_the_consumers_and_producers_waiting_on_the_laggard() -> None:
    async with broker_node([0, 1, 2]) as node:
        produce = node.produce(1)
        consumer = node.fetch(0, max_wait_ms=LAG_MS * 2)
        node.follower_fetch(1, 1)
        node.tick(LAG_MS // 2)
        node.follower_fetch(1, 1)
        assert not produce.answered
        assert not consumer.answered

        node.tick(LAG_MS)  # follower 2 has not fetched for 1.5 x replica.lag.time.max.ms

        assert node.isr() == [0, 1]
        assert produce.error() is ErrorCode.none
        assert result_of(consumer) == (ErrorCode.none, [0], 1)


async def test_a_follower_rejoins_the_isr_once_it_catches_up_with_the_high_watermark() -> None:
    async with broker_node([0, 1, 2], isr=[0, 1]) as node:
        node.produce(3, acks=1)
        node.follower_fetch(1, 3)
        assert node.partition.high_watermark == 3

        node.follower_fetch(2, 2)
        assert node.isr() == [0, 1]

        node.follower_fetch(2, 3)

        assert node.isr() == [0, 1, 2]
        assert node.partition.isr == [0, 1, 2]
        assert node.manager.isr_expands == 1
        assert node.controller.isr_expands == 1


async def test_a_follower_dropped_from_the_isr_comes_back_and_counts_for_acks_all_again() -> None:
    async with broker_node([0, 1, 2]) as node:
        node.produce(1, acks=1)
        node.follower_fetch(1, 1)
        node.tick(LAG_MS // 2)
        node.follower_fetch(1, 1)
        node.tick(LAG_MS)
        assert node.isr() == [0, 1]

        node.follower_fetch(2, 1)  # caught up
        assert node.isr() == [0, 1, 2]

        # Back in the ISR, its fetch is again what an acks=all produce waits for.
        answer = node.produce(1)
        node.follower_fetch(1, 2)
        assert not answer.answered
        node.follower_fetch(2, 2)
        assert answer.error() is ErrorCode.none


# -- what Kafka does and the replica code does not (yet) -----------------------------------


async def test_an_acks_all_produce_the_isr_already_has_is_not_recorded_as_parked() -> None:
    async with broker_node([0]) as node:
        parked = FakeParkedRequest()
        answer = node.produce(1, parked=parked)
        assert answer.error() is ErrorCode.none
        assert node.manager.delayed_produces == 0  # the manager knows it did not wait
        assert parked.parked == []


async def test_a_fenced_follower_fetch_does_not_move_the_high_watermark() -> None:
    async with broker_node([0, 1]) as node:
        # Leadership goes to broker 1 and comes back: broker 0 leads in epoch 2.
        node.metadata.change_partition(TOPIC, 0, leader=1, isr=[0, 1])
        node.metadata.change_partition(TOPIC, 0, leader=0, isr=[0, 1])
        assert node.partition.is_leader
        assert node.partition.leader_epoch == 2
        answer = node.produce(1)

        # A Fetch follower 1 sent in epoch 0 arrives now, claiming offset 1.
        stale = node.fetch(1, replica_id=1, max_wait_ms=0, leader_epoch=0)
        assert result_of(stale)[0] is ErrorCode.fenced_leader_epoch

        assert node.partition.high_watermark == 0
        assert not answer.answered
