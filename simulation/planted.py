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

import bisect
import weakref
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.consumer.consumer_group import ConsumerGroup
from broker.group.consumer.current_assignment_builder import CurrentAssignmentBuilder
from broker.group.group_coordinator import GroupCoordinator
from broker.group.group_metadata import GroupMetadata
from broker.group.share.share_group_coordinator import ShareGroupCoordinator
from broker.group.streams.sticky_task_assignor import _Assignment as StickyAssignment
from broker.group.streams.streams_group import StreamsGroup
from broker.log.memory_log import MemoryLog
from broker.replica.delayed_produce import DelayedProduce
from broker.replica.partition import Partition
from broker.replica.producer_state import ProducerStateEntry
from broker.replica.replica_fetcher import ReplicaFetcher
from broker.security.authorizer.standard_authorizer import StandardAuthorizer
from broker.security.plain import PlainSaslServer
from broker.security.sasl import SaslAuthenticationException
from broker.share.share_partition import RecordState, SharePartition
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


def _epoch_bump_keeps_old_batches(stack: ExitStack) -> None:
    def maybe_update_producer_epoch(self: ProducerStateEntry, epoch: int) -> bool:
        if epoch == self.producer_epoch:
            return False
        # The bug: the old epoch's batches are kept (no ``self.batches.clear()``), so a
        # batch of the new epoch whose sequences match one of them -- a transactions-v2
        # producer starts every transaction at sequence 0 -- is taken for its retry:
        # answered with the old batch's offset, and not written.
        self.producer_epoch = epoch
        return True

    _replace(stack, ProducerStateEntry, "maybe_update_producer_epoch", maybe_update_producer_epoch)


def _lso_admits_first_open_record(stack: ExitStack) -> None:
    def last_stable_offset(self: Partition) -> int:
        hw = self.high_watermark
        self.producers.on_high_watermark_updated(hw)
        first = self.producers.first_unstable_offset()
        if first is not None:
            # The bug: the LSO is taken as the offset *after* the first unstable one (an
            # off-by-one of "last" against "first"): each open transaction's first record
            # reaches read_committed consumers before its outcome is known.
            first = max(first + 1, self.log_start_offset)
            if first < hw:
                return first
        return hw

    _replace(stack, Partition, "last_stable_offset", property(last_stable_offset))


def _fetch_inside_batch_skips_it(stack: ExitStack) -> None:
    original = MemoryLog.__dict__["read"]

    def read(self: MemoryLog, fetch_offset: int, max_bytes: int, **kwargs: Any) -> bytes:
        # The bug: the first batch is looked up by base offset, not last offset, so a fetch
        # from inside a batch (a consumer that seeked to a committed offset) is answered
        # from the next batch: the rest of the batch is skipped.
        bases: list[int] = self._base
        i = bisect.bisect_left(bases, fetch_offset)
        if 0 < i <= len(bases) and bases[i - 1] < fetch_offset <= self._last[i - 1]:
            if i == len(bases):
                return b""
            fetch_offset = bases[i]
        result: bytes = original(self, fetch_offset, max_bytes, **kwargs)
        return result

    _replace(stack, MemoryLog, "read", read)


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


def _generation_kept_when_members_leave(stack: ExitStack) -> None:
    original = GroupMetadata.__dict__["init_next_generation"]
    members_of: weakref.WeakKeyDictionary[GroupMetadata, set[str]] = weakref.WeakKeyDictionary()

    def init_next_generation(self: GroupMetadata) -> None:
        before = members_of.get(self, set())
        now = set(self.all_members)
        original(self)
        members_of[self] = now
        if now and now < before:
            # The bug: the generation is bumped only when a member joined; a rebalance
            # that only lost members (a LeaveGroup, a session that expired) keeps it, so
            # the members left take the leaver's partitions under the generation it owned
            # them in (and its late commits still validate).
            self.generation_id -= 1

    _replace(stack, GroupMetadata, "init_next_generation", init_next_generation)


# -- KIP-848 and share groups (issue 33: the protocol clients' checkers catch these) ------


def _assigned_before_revoked(stack: ExitStack) -> None:
    original = CurrentAssignmentBuilder.__dict__["__init__"]

    def __init__(self: CurrentAssignmentBuilder, *args: Any) -> None:
        original(self, *args)
        # The bug: the builder does not ask who still holds a partition, so a member is
        # given one its previous owner has not revoked yet (no UNRELEASED_PARTITIONS).
        self.current_partition_epoch = lambda topic_id, partition: -1

    def _add_partition_epochs(self: ConsumerGroup, member: Any) -> None:
        for tp in member.owned_partitions():  # and the holder's epoch is overwritten
            self.partition_epochs[tp] = member.member_epoch

    _replace(stack, CurrentAssignmentBuilder, "__init__", __init__)
    _replace(stack, ConsumerGroup, "_add_partition_epochs", _add_partition_epochs)


def _share_lock_released_twice(stack: ExitStack) -> None:
    def _on_lock_expired(self: SharePartition, lock: Any) -> None:
        self.locks_expired += 1
        start = self.start_offset
        changed: list[int] = []
        for offset in range(max(lock.first_offset, self.start_offset), lock.last_offset + 1):
            record = self._in_flight.get(offset)
            # The bug: the expiring lock releases every ACQUIRED offset of its run, not
            # only those it still holds: one released earlier and acquired again by
            # another member (under a newer lock) is released a second time.
            if record is None or record.state is not RecordState.ACQUIRED:
                continue
            record.lock = None
            self.acquired_count -= 1
            record.member_id = None
            self._release(record, offset)
            changed.append(offset)
        if changed:
            self._maybe_update_start_offset()
            self._write(changed, start)
            self._send_dead_letters()
            self._on_available()

    _replace(stack, SharePartition, "_on_lock_expired", _on_lock_expired)


def _share_delivery_limit_off_by_one(stack: ExitStack) -> None:
    original = SharePartition.__dict__["_release"]

    def _release(self: SharePartition, record: Any, offset: int) -> bool:
        if record.delivery_count == self.config.delivery_count_limit:
            # The bug: "reached the limit" is taken as "past it" (``>`` for ``>=``): a
            # record released, or whose lock expired, on its last allowed delivery is made
            # AVAILABLE again and delivered once more, instead of ARCHIVED.
            record.state = RecordState.AVAILABLE
            self._available += 1
            return True
        released: bool = original(self, record, offset)
        return released

    _replace(stack, SharePartition, "_release", _release)


def _share_accept_keeps_lock(stack: ExitStack) -> None:
    original = SharePartition.__dict__["_unlock"]

    def _unlock(self: SharePartition, record: Any) -> None:
        # The bug: an ACCEPTed record is not taken out of its acquisition lock when its
        # acknowledgement commits (Kafka's cancelAndClearAcquisitionLockTimeoutTask,
        # forgotten on the ACCEPT path). The lock still counts it, so it is not
        # cancelled; when it expires it releases it as if still ACQUIRED -- ACKNOWLEDGED
        # records the start offset has not passed yet go back to AVAILABLE, are delivered
        # again and ACCEPTed again.
        if record.state is RecordState.ACKNOWLEDGED and record.rollback is None:
            return
        original(self, record)

    _replace(stack, SharePartition, "_unlock", _unlock)


def _streams_task_given_before_revoked(stack: ExitStack) -> None:
    def current_active_task_process_id(
        self: StreamsGroup, subtopology_id: str, partition: int
    ) -> str | None:
        # The bug: reconciliation is told no process holds any active task, so a task
        # moved by the assignor is given to its new owner while the old one still runs it.
        return None

    _replace(stack, StreamsGroup, "current_active_task_process_id", current_active_task_process_id)


def _streams_standby_beside_active(stack: ExitStack) -> None:
    original = StickyAssignment.__dict__["_least_loaded"]

    def _least_loaded(self: StickyAssignment, exclude_task: Any = None) -> Any:
        # The bug: the standby copies left over go to the least loaded process without
        # excluding the one that runs the task active (or holds a copy already): a
        # member is given a task as active and standby at once.
        return original(self, None)

    _replace(stack, StickyAssignment, "_least_loaded", _least_loaded)


def _streams_removed_member_keeps_its_tasks(stack: ExitStack) -> None:
    original = StreamsGroup.__dict__["remove_member"]

    def remove_member(self: StreamsGroup, member_id: str) -> Any:
        active = dict(self.active_task_process)
        standby = {task: set(held) for task, held in self.standby_task_processes.items()}
        warmup = {task: set(held) for task, held in self.warmup_task_processes.items()}
        removed = original(self, member_id)
        # The bug: the member is removed but its tasks are not taken out of the group's
        # task -> process index (Kafka's removeMember without maybeRemoveTaskProcessId): its
        # active tasks look held for ever, and whoever the next target gives them to waits
        # for their release (UNRELEASED_TASKS) that never comes.
        self.active_task_process.clear()
        self.active_task_process.update(active)
        for table, before in (
            (self.standby_task_processes, standby),
            (self.warmup_task_processes, warmup),
        ):
            table.clear()
            table.update(before)
        return removed

    _replace(stack, StreamsGroup, "remove_member", remove_member)


def _share_group_kept_on_unload(stack: ExitStack) -> None:
    def on_partition_unloaded(self: ShareGroupCoordinator, partition: int) -> None:
        # The bug (found by the all-faults campaign, seed 57 at f72ac68, and fixed): a
        # broker that stops leading a __consumer_offsets partition keeps its share groups
        # and their members' session timers; one that expires fences a member alive at the
        # new coordinator and releases the records it holds on this broker's share
        # partitions, which go to the next fetch while it still holds them.
        return None

    _replace(stack, ShareGroupCoordinator, "on_partition_unloaded", on_partition_unloaded)


# -- security (issue 33: the SASL client's checks catch this) ---------------------------------


def _acl_removal_not_seen(stack: ExitStack) -> None:
    def _acls_of(self: StandardAuthorizer, resource_type: Any) -> Any:
        if self._indexed_version != self._store.version:
            # The bug: the authorizer's cache applies the ACLs the store gained and never
            # drops the ones it lost (a listener of AccessControlEntryRecord that ignores
            # RemoveAccessControlEntryRecord): a deleted ALLOW still allows, on every
            # broker that saw it, until the broker restarts.
            by_type: dict[Any, list[Any]] = {k: list(v) for k, v in self._by_type.items()}
            for acl in self._store.acls():
                known = by_type.setdefault(acl.resource_type, [])
                if acl not in known:
                    known.append(acl)
            self._by_type = by_type
            self._indexed_version = self._store.version
        return self._by_type.get(resource_type, ())

    _replace(stack, StandardAuthorizer, "_acls_of", _acls_of)


def _no_acl_means_allowed(stack: ExitStack) -> None:
    original = StandardAuthorizer.__dict__["_find_acl_rule"]

    def _find_acl_rule(self: StandardAuthorizer, *args: Any) -> tuple[bool, str]:
        allowed, rule = original(self, *args)
        # The bug: a resource without ACLs is allowed, as if allow.everyone.if.no.acl.found
        # defaulted to true: a topic nobody was given is open to every principal.
        if rule.startswith("DefaultRule"):
            return True, "DefaultRule[result=ALLOWED]"
        return bool(allowed), str(rule)

    _replace(stack, StandardAuthorizer, "_find_acl_rule", _find_acl_rule)


def _plain_password_not_checked(stack: ExitStack) -> None:
    def evaluate_response(self: PlainSaslServer, response: bytes) -> bytes:
        tokens = response.decode("utf-8", errors="replace").split("\x00")
        if len(tokens) != 3 or tokens[1] not in self._users:
            raise SaslAuthenticationException("Authentication failed: Invalid username or password")
        # The bug: the user is looked up, its password never compared.
        self._authorization_id = tokens[1]
        self._complete = True
        return b""

    _replace(stack, PlainSaslServer, "evaluate_response", evaluate_response)


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
            "epoch-bump-keeps-old-batches",
            "a producer's new epoch keeps the previous epoch's last batches: the first "
            "batches of a transactions-v2 producer's next transaction (sequence 0 again) "
            "are answered as retries, with old offsets, and never written",
            "ProducerStateEntry.maybe_update_producer_epoch",
            _epoch_bump_keeps_old_batches,
        ),
        PlantedBug(
            "lso-admits-first-open-record",
            "the last stable offset is one past the first unstable offset: read_committed "
            "consumers get each open transaction's first record before it commits or aborts",
            "Partition.last_stable_offset",
            _lso_admits_first_open_record,
        ),
        PlantedBug(
            "fetch-inside-batch-skips-it",
            "a fetch from an offset inside a batch is answered from the next batch (the "
            "lookup by base offset, not last offset): a consumer that seeks into a batch "
            "skips its rest",
            "MemoryLog.read",
            _fetch_inside_batch_skips_it,
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
            "generation-kept-when-members-leave",
            "a classic group's rebalance that only lost members keeps its generation id: "
            "the members left are given the leaver's partitions in the generation it owned "
            "them in",
            "GroupMetadata.init_next_generation",
            _generation_kept_when_members_leave,
        ),
        PlantedBug(
            "kip848-assigned-before-revoked",
            "the consumer group coordinator gives a member a partition its previous owner "
            "has not revoked yet (and ConsumerGroup._add_partition_epochs overwrites the "
            "holder's epoch): two KIP-848 members own one partition at once",
            "CurrentAssignmentBuilder.__init__",
            _assigned_before_revoked,
        ),
        PlantedBug(
            "share-lock-released-twice",
            "an expiring acquisition lock releases every acquired offset of its run, also "
            "those released earlier and acquired again by another member under a newer "
            "lock: two share consumers hold one record at once",
            "SharePartition._on_lock_expired",
            _share_lock_released_twice,
        ),
        PlantedBug(
            "share-group-kept-on-unload",
            "a broker that stops coordinating a share group keeps it and its members' "
            "session timers: an expiry there fences a member alive at the new coordinator "
            "and releases the records it holds, given to another fetch while it holds them",
            "ShareGroupCoordinator.on_partition_unloaded",
            _share_group_kept_on_unload,
        ),
        PlantedBug(
            "share-delivery-limit-off-by-one",
            "a share record released (or whose lock expired) on its last allowed delivery is "
            "made AVAILABLE again instead of ARCHIVED (>, not >=, against "
            "group.share.delivery.count.limit): it is delivered once past the limit",
            "SharePartition._release",
            _share_delivery_limit_off_by_one,
        ),
        PlantedBug(
            "share-accept-keeps-lock",
            "an ACCEPT leaves its records under their acquisition lock: when the lock expires "
            "it releases ACKNOWLEDGED records too, which are delivered and ACCEPTed again",
            "SharePartition._unlock",
            _share_accept_keeps_lock,
        ),
        PlantedBug(
            "streams-task-given-before-revoked",
            "a streams group's reconciliation does not wait for an active task's owner to "
            "revoke it before giving it to its new owner: two members process one task",
            "StreamsGroup.current_active_task_process_id",
            _streams_task_given_before_revoked,
        ),
        PlantedBug(
            "streams-standby-beside-active",
            "the streams sticky assignor places a standby copy on the least loaded process "
            "without excluding the one running the task active: a member holds a task as "
            "active and standby at once, and the task has no standby elsewhere",
            "StickyAssignment._least_loaded",
            _streams_standby_beside_active,
        ),
        PlantedBug(
            "streams-removed-member-keeps-its-tasks",
            "a streams member that leaves or is fenced is removed without taking its tasks "
            "out of the group's task -> process index: its active tasks look held for ever, "
            "and the members given them wait for a release that never comes",
            "StreamsGroup.remove_member",
            _streams_removed_member_keeps_its_tasks,
        ),
        PlantedBug(
            "acl-removal-not-seen",
            "the StandardAuthorizer's cache applies ACLs added to the store but never drops "
            "deleted ones: a revoked WRITE still lets the SASL client write",
            "StandardAuthorizer._acls_of",
            _acl_removal_not_seen,
        ),
        PlantedBug(
            "no-acl-means-allowed",
            "the StandardAuthorizer allows a resource no ACL names (as if "
            "allow.everyone.if.no.acl.found were true): the SASL client's forbidden topic "
            "serves it",
            "StandardAuthorizer._find_acl_rule",
            _no_acl_means_allowed,
        ),
        PlantedBug(
            "plain-password-not-checked",
            "the SASL/PLAIN server checks that the user exists but never compares its "
            "password: a wrong password gets a session",
            "PlainSaslServer.evaluate_response",
            _plain_password_not_checked,
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
