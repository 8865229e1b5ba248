"""DelayedDeleteRecords in the DeleteRecords purgatory, on the manual clock.

Broker 0 leads a partition on brokers 0, 1 and 2 (``broker_node`` of
test_replica_manager). Followers are simulated by their Fetch at the leader, which
carries their log start offset as a real follower's does; a DeleteRecords moves the
leader's log start at once and waits until every live replica reports it has followed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.replica.delayed_delete_records import DeleteRecordsStatuses
from broker.replica.delayed_fetch import FetchParams, FetchPartitionStatus
from broker.server.purgatories import PurgatoryName, PurgatoryOutcome
from tests.unit.test_replica_manager import TOPIC, TP, FakeParkedRequest, Node, batch, broker_node

TIMEOUT_MS = 30_000


@dataclass
class DeleteAnswer:
    calls: list[DeleteRecordsStatuses] = field(default_factory=list)

    def __call__(self, statuses: DeleteRecordsStatuses) -> None:
        self.calls.append(statuses)

    @property
    def answered(self) -> bool:
        return bool(self.calls)

    def only(self) -> tuple[ErrorCode, int]:
        assert len(self.calls) == 1, f"answered {len(self.calls)} times"
        status = self.calls[0][TP]
        return status.error, status.low_watermark


def follower_fetch(node: Node, replica_id: int, offset: int, log_start_offset: int) -> None:
    """A follower's Fetch at ``offset`` reporting its log start (answered at once)."""
    answered = []
    node.manager.fetch_messages(
        FetchParams(replica_id, 0, 1, 1 << 20),
        [FetchPartitionStatus(TP, offset, 1 << 20, -1, log_start_offset)],
        answered.append,
        None,
    )
    assert answered


def filled(node: Node, records: int = 10) -> None:
    """``records`` records, replicated to both followers (HW = ``records``)."""
    node.produce(records, acks=1)
    for follower in (1, 2):
        follower_fetch(node, follower, records, 0)
    assert node.partition.high_watermark == records


def delete(
    node: Node, offset: int, parked: FakeParkedRequest | None = None, timeout_ms: int = TIMEOUT_MS
) -> DeleteAnswer:
    answer = DeleteAnswer()
    node.manager.delete_records(timeout_ms, {TP: offset}, answer, parked)
    return answer


def tick(node: Node, ms: int) -> None:
    node.clock.advance(ms)
    node.purgatories.timers[PurgatoryName.DELETE_RECORDS].advance_clock()


async def test_it_parks_until_every_follower_reports_the_new_log_start() -> None:
    async with broker_node([0, 1, 2]) as node:
        filled(node)
        parked = FakeParkedRequest()
        answer = delete(node, 4, parked)
        assert not answer.answered
        assert node.partition.log_start_offset == 4  # the leader moved at once
        assert parked.parked == [PurgatoryName.DELETE_RECORDS]
        assert node.purgatories.delete_records.num_delayed() == 1

        follower_fetch(node, 1, 10, 4)
        assert not answer.answered  # broker 2 still reports 0
        follower_fetch(node, 2, 10, 4)
        assert answer.only() == (ErrorCode.none, 4)
        assert parked.outcomes == [PurgatoryOutcome.COMPLETED]
        assert node.purgatories.delete_records.num_delayed() == 0


async def test_it_answers_request_timed_out_with_the_low_watermark_it_had() -> None:
    async with broker_node([0, 1, 2]) as node:
        filled(node)
        parked = FakeParkedRequest()
        answer = delete(node, 6, parked, timeout_ms=1_000)
        follower_fetch(node, 1, 10, 6)
        tick(node, 999)
        assert not answer.answered
        tick(node, 1)
        assert answer.only() == (ErrorCode.request_timed_out, 0)
        assert parked.outcomes == [PurgatoryOutcome.EXPIRED]


async def test_a_follower_on_a_stopped_broker_does_not_hold_it() -> None:
    async with broker_node([0, 1, 2]) as node:
        filled(node)
        answer = delete(node, 5)
        follower_fetch(node, 1, 10, 5)
        assert not answer.answered
        node.metadata.mark_broker_stopped(2)
        # Kafka re-checks on the next state change of the partition; a fetch is one.
        follower_fetch(node, 1, 10, 5)
        assert not answer.answered  # the same log start: no change, no check
        node.manager.complete_delayed_requests(TP)
        assert answer.only() == (ErrorCode.none, 5)


async def test_leadership_moving_away_answers_not_leader() -> None:
    async with broker_node([0, 1, 2]) as node:
        filled(node)
        answer = delete(node, 3)
        node.metadata.change_partition(TOPIC, 0, leader=1, isr=[1, 2])
        assert answer.only() == (ErrorCode.not_leader_or_follower, -1)


async def test_it_answers_at_once_when_the_replicas_are_already_there() -> None:
    async with broker_node([0]) as node:
        node.produce(10, acks=1)
        parked = FakeParkedRequest()
        answer = delete(node, -1, parked)  # -1: up to the high watermark
        assert answer.only() == (ErrorCode.none, 10)
        assert parked.parked == []
    async with broker_node([0, 1, 2]) as node:
        filled(node)
        for follower in (1, 2):
            follower_fetch(node, follower, 10, 7)  # as if they had trimmed already
        answer = delete(node, 2)  # the followers are past it: the leader's start is lowest
        assert answer.only() == (ErrorCode.none, 2)


async def test_bad_offsets_and_policies_answer_at_once() -> None:
    async with broker_node([0, 1, 2]) as node:
        filled(node)
        assert delete(node, 11).only() == (ErrorCode.offset_out_of_range, -1)
        assert delete(node, -2).only() == (ErrorCode.offset_out_of_range, -1)
        answer = DeleteAnswer()
        node.manager.delete_records(TIMEOUT_MS, {("nope", 0): 1}, answer, None)
        assert answer.calls[0][("nope", 0)].error is ErrorCode.unknown_topic_or_partition
    async with broker_node([0], topic_configs={"cleanup.policy": "compact"}) as node:
        assert delete(node, 0).only() == (ErrorCode.policy_violation, -1)


async def test_a_follower_follows_the_leaders_log_start_within_its_own_log() -> None:
    async with broker_node([1, 0]) as node:  # broker 0 follows broker 1
        partition = node.partition
        assert not partition.is_leader
        partition.append_records_as_follower(batch(5), 5)
        assert partition.maybe_increment_log_start_offset(3)
        assert partition.log_start_offset == 3
        assert not partition.maybe_increment_log_start_offset(2)  # never backwards
        assert partition.maybe_increment_log_start_offset(9)  # bounded by what it has
        assert partition.log_start_offset == 5
        assert partition.high_watermark == 5
