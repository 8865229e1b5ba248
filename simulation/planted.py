"""Planted bugs: realistic broker bugs the simulation must catch, each a switch of its own.

``minikafka simulate --list-planted`` names them; ``--plant NAME --seeds A..B`` runs seeds
with that bug in until one breaks an invariant. How many seeds each bug takes to be caught
is the simulator's score (``bench/simulation/planted_score.py``): a bug it never catches is
a hole in the workload, the nemesis or the checkers.

Each bug replaces one broker method for the length of a run (`planted`), in the simulation's
process only: the broker's code has no switch for it, so no configuration of a real broker
can turn one on. Each replacement is the smallest change that makes the mistake -- a wrong
bound, a skipped check, a forgotten field -- of the kind Kafka's own history has (KAFKA-
issues on the high watermark, the LSO and the fetch isolation, producer state after a
leader change, markers, truncation, group generations).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.group_coordinator import GroupCoordinator
from broker.group.streams.streams_group import StreamsGroup
from broker.replica.delayed_produce import DelayedProduce
from broker.replica.partition import Partition
from broker.replica.replica_fetcher import ReplicaFetcher
from broker.txn.transaction_marker_channel_manager import TransactionMarkerChannelManager

__all__ = ["PLANTED", "PlantedBug", "planted"]


@dataclass(frozen=True, slots=True)
class PlantedBug:
    name: str
    #: What is wrong, in Kafka's terms, and the promise it breaks.
    summary: str
    #: The method the bug replaces (for the reader of a caught seed).
    where: str
    install: Callable[[ExitStack], None]


def _replace(stack: ExitStack, owner: type, name: str, replacement: Any) -> None:
    original = owner.__dict__[name]
    setattr(owner, name, replacement)
    stack.callback(setattr, owner, name, original)


# -- replication: the high watermark and acks=all ------------------------------------------


def _hw_at_leader_log_end(stack: ExitStack) -> None:
    def maybe_increment_high_watermark(self: Partition) -> bool:
        if not self.is_leader or self.log_end_offset <= self.high_watermark:
            return False
        self.high_watermark = self.log_end_offset
        self.producers.on_high_watermark_updated(self.high_watermark)
        return True

    _replace(stack, Partition, "maybe_increment_high_watermark", maybe_increment_high_watermark)


def _produce_acked_on_leader_append(stack: ExitStack) -> None:
    original = DelayedProduce.__dict__["try_complete"]

    def try_complete(self: DelayedProduce) -> bool:
        # The bug: the required offset is compared with the leader's log end, not the HW.
        for tp, status in self._statuses.items():
            partition = self._replica_manager.online_partition(tp)
            if partition is None or not partition.is_leader or not status.acks_pending:
                continue
            if partition.log_end_offset >= status.required_offset:
                status.acks_pending = False
        result: bool = original(self)
        return result

    _replace(stack, DelayedProduce, "try_complete", try_complete)


def _new_leader_resets_high_watermark(stack: ExitStack) -> None:
    original = Partition.__dict__["make_leader"]

    def make_leader(
        self: Partition, epoch: int, replicas: list[int], isr: list[int], now_ms: int
    ) -> None:
        original(self, epoch, replicas, isr, now_ms)
        # The bug: the new leader forgets the HW it had as a follower and starts from its
        # log start, until its followers' fetches raise it again.
        self.high_watermark = self.log_start_offset

    _replace(stack, Partition, "make_leader", make_leader)


def _follower_skips_truncation(stack: ExitStack) -> None:
    def _truncate_partition(self: ReplicaFetcher, state: Any, offset: int) -> None:
        state.truncating = False  # the bug: the divergent tail stays

    _replace(stack, ReplicaFetcher, "_truncate_partition", _truncate_partition)


def _producer_state_lost_on_leader_change(stack: ExitStack) -> None:
    original = Partition.__dict__["make_leader"]

    def make_leader(
        self: Partition, epoch: int, replicas: list[int], isr: list[int], now_ms: int
    ) -> None:
        original(self, epoch, replicas, isr, now_ms)
        # The bug: the new leader does not keep the producer state it replicated, so a
        # producer's retry of a batch it already has is not known as a duplicate.
        self.producers.clear()

    _replace(stack, Partition, "make_leader", make_leader)


# -- reads: the fetch isolation -------------------------------------------------------------


def _consumer_reads_past_high_watermark(stack: ExitStack) -> None:
    def _fetch_bound(self: Partition, up_to_log_end: bool, read_committed: bool) -> int:
        # The bug: a consumer's fetch is bounded like a follower's, by the log end.
        return self.last_stable_offset if read_committed else self.log_end_offset

    _replace(stack, Partition, "_fetch_bound", _fetch_bound)


def _read_committed_up_to_high_watermark(stack: ExitStack) -> None:
    def _fetch_bound(self: Partition, up_to_log_end: bool, read_committed: bool) -> int:
        # The bug: read_committed is bounded by the HW, not the LSO: open transactions leak.
        return self.log_end_offset if up_to_log_end else self.high_watermark

    _replace(stack, Partition, "_fetch_bound", _fetch_bound)


def _aborted_transactions_not_listed(stack: ExitStack) -> None:
    original = Partition.__dict__["read"]

    def read(self: Partition, fetch_offset: int, max_bytes: int, **kwargs: Any) -> Any:
        result = original(self, fetch_offset, max_bytes, **kwargs)
        if result.aborted_transactions:
            # The bug: the aborted-transaction index is searched up to the fetch offset
            # only, so a read_committed fetch is told of no aborted transaction.
            result.aborted_transactions = self.txn_index.collect_aborted_txns(
                fetch_offset, fetch_offset
            )
        return result

    _replace(stack, Partition, "read", read)


# -- transactions and groups ----------------------------------------------------------------


def _marker_skipped_on_one_partition(stack: ExitStack) -> None:
    original = TransactionMarkerChannelManager.__dict__["_add_markers_to_broker_queue"]

    def _add_markers_to_broker_queue(
        self: TransactionMarkerChannelManager, template: Any, partitions: Any
    ) -> None:
        ordered = sorted(partitions)
        if len(ordered) > 1:
            # The bug: an off-by-one over the transaction's partitions; the last one is
            # counted as marked but never gets its COMMIT or ABORT marker.
            pending = self.transactions_with_pending_markers.get(template.transactional_id)
            if pending is not None:
                pending.txn_metadata.remove_partition(ordered[-1])
            ordered = ordered[:-1]
        original(self, template, ordered)

    _replace(
        stack, TransactionMarkerChannelManager, "_add_markers_to_broker_queue",
        _add_markers_to_broker_queue,
    )  # fmt: skip


def _stale_generation_commit_accepted(stack: ExitStack) -> None:
    original = GroupCoordinator.__dict__["_validate_offset_commit"]

    def _validate_offset_commit(self: GroupCoordinator, *args: Any) -> Any:
        error = original(self, *args)
        # The bug: a commit from a member of an older generation, or one the group expired,
        # is taken (a zombie's commit lands after the new owner's).
        stale = (ErrorCode.illegal_generation, ErrorCode.unknown_member_id)
        return None if error in stale else error

    _replace(stack, GroupCoordinator, "_validate_offset_commit", _validate_offset_commit)


def _streams_task_given_before_revoked(stack: ExitStack) -> None:
    def current_active_task_process_id(
        self: StreamsGroup, subtopology_id: str, partition: int
    ) -> str | None:
        # The bug: reconciliation is told no process holds any active task, so a task
        # moved by the assignor is given to its new owner while the old one still runs it.
        return None

    _replace(stack, StreamsGroup, "current_active_task_process_id", current_active_task_process_id)


PLANTED: dict[str, PlantedBug] = {
    bug.name: bug
    for bug in (
        PlantedBug(
            "hw-past-lagging-follower",
            "the leader moves the high watermark to its own log end, past a lagging in-sync "
            "follower: acks=all is answered for records a failover then loses",
            "Partition.maybe_increment_high_watermark",
            _hw_at_leader_log_end,
        ),
        PlantedBug(
            "produce-acked-on-leader-append",
            "DelayedProduce completes when the leader has appended, not when the high "
            "watermark passes the records: acks=all means acks=1",
            "DelayedProduce.try_complete",
            _produce_acked_on_leader_append,
        ),
        PlantedBug(
            "new-leader-resets-high-watermark",
            "a new leader starts its high watermark from its log start instead of the one it "
            "had as a follower: consumers see the high watermark move back",
            "Partition.make_leader",
            _new_leader_resets_high_watermark,
        ),
        PlantedBug(
            "follower-skips-truncation",
            "a follower of a new leader keeps its divergent tail instead of truncating to "
            "where the leader's epoch ends: replicas disagree on an offset's record",
            "ReplicaFetcher._truncate_partition",
            _follower_skips_truncation,
        ),
        PlantedBug(
            "producer-state-lost-on-leader-change",
            "a new leader drops the producer state it replicated: a producer's retry of a "
            "batch the new leader already has is written again",
            "Partition.make_leader",
            _producer_state_lost_on_leader_change,
        ),
        PlantedBug(
            "consumer-reads-past-high-watermark",
            "a consumer's fetch is bounded by the log end, as a follower's is: consumers read "
            "records a failover then truncates",
            "Partition._fetch_bound",
            _consumer_reads_past_high_watermark,
        ),
        PlantedBug(
            "read-committed-up-to-high-watermark",
            "a read_committed fetch is bounded by the high watermark instead of the last "
            "stable offset: records of open transactions reach read_committed consumers",
            "Partition._fetch_bound",
            _read_committed_up_to_high_watermark,
        ),
        PlantedBug(
            "aborted-transactions-not-listed",
            "a read_committed fetch lists no aborted transaction (the index is searched to "
            "the fetch offset only): aborted records reach read_committed consumers",
            "Partition.read",
            _aborted_transactions_not_listed,
        ),
        PlantedBug(
            "marker-skipped-on-one-partition",
            "the transaction coordinator writes no COMMIT/ABORT marker on a transaction's "
            "last partition yet completes it: that partition's LSO never moves again",
            "TransactionMarkerChannelManager._add_markers_to_broker_queue",
            _marker_skipped_on_one_partition,
        ),
        PlantedBug(
            "stale-member-commit-accepted",
            "OffsetCommit from a member of an older generation, or one the group expired, is "
            "accepted: a zombie that lost its partitions moves their committed offsets back",
            "GroupCoordinator._validate_offset_commit",
            _stale_generation_commit_accepted,
        ),
        PlantedBug(
            "streams-task-given-before-revoked",
            "a streams group's reconciliation does not wait for an active task's owner to "
            "revoke it before giving it to its new owner: two members process one task",
            "StreamsGroup.current_active_task_process_id",
            _streams_task_given_before_revoked,
        ),
    )
}


@contextmanager
def planted(name: str | None) -> Iterator[None]:
    """The bug ``name`` in for the length of the block (nothing when ``name`` is None)."""
    if name is None:
        yield
        return
    bug = PLANTED.get(name)
    if bug is None:
        raise ValueError(f"no planted bug {name!r}; --list-planted names them")
    with ExitStack() as stack:
        bug.install(stack)
        yield
