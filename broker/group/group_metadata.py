"""A classic group's membership, generation, protocol choice and committed offsets.

Mirrors Kafka's ``GroupMetadata``: pure bookkeeping, no purgatory and no IO, so every
rule here can be tested directly. The coordinator decides *when* things happen; this
class keeps the counts that make those decisions cheap (members awaiting join, votes per
protocol) consistent on every add/remove/update.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscription_topics
from broker.group.group_state import GroupState, assert_valid_transition
from broker.group.member_metadata import MemberMetadata, Protocols
from broker.group.offsets import OffsetAndMetadata, expired_partitions
from broker.group.response_callback import ResponseCallback
from broker.group.results import (
    JoinGroupMember,
    JoinGroupResult,
    SyncGroupResult,
    TopicPartition,
)
from broker.group.txn_offsets import PendingTxnOffsets
from broker.ids import IdSource
from purgatory import Clock


class GroupMetadata:
    """One group. Not thread-safe: the broker runs it on one event-loop thread."""

    def __init__(
        self,
        group_id: str,
        initial_state: GroupState,
        clock: Clock,
        uuid_factory: Callable[[], str] | None = None,
    ) -> None:
        self.group_id = group_id
        self._state = initial_state
        self._clock = clock
        # The composition root hands in its id source's; alone (tests), the system's.
        self._uuid_factory = uuid_factory or IdSource.system().member_id
        # When the group last changed state: the base of offset retention once Empty.
        self.current_state_timestamp: int | None = clock.now_ms()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self._members: dict[str, MemberMetadata] = {}
        self._static_members: dict[str, str] = {}  # group.instance.id -> member.id
        self._pending_members: set[str] = set()  # got MEMBER_ID_REQUIRED, not back yet
        self._pending_sync_members: set[str] = set()  # joined, SyncGroup not seen yet
        self._num_members_awaiting_join = 0
        self._supported_protocols: dict[str, int] = {}  # protocol -> members offering it
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        # TxnOffsetCommit offsets until their transaction's marker (txn_offsets.py).
        self.pending_txn_offsets = PendingTxnOffsets()
        self._subscribed_topics: set[str] | None = None
        # Set when a member joins during the first rebalance, so InitialDelayedJoin waits
        # one more delay for the rest of a starting fleet.
        self.new_member_added = False

    # ----------------------------------------------------------------- state
    @property
    def state(self) -> GroupState:
        return self._state

    def is_in(self, *states: GroupState) -> bool:
        return self._state in states

    def transition_to(self, target: GroupState) -> None:
        """Move to ``target``; raises IllegalStateTransition if the table forbids it."""
        assert_valid_transition(self.group_id, self._state, target)
        self._state = target
        self.current_state_timestamp = self._clock.now_ms()

    @property
    def can_rebalance(self) -> bool:
        return self._state in (
            GroupState.STABLE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
        )

    # --------------------------------------------------------------- members
    def has(self, member_id: str) -> bool:
        return member_id in self._members

    def get(self, member_id: str) -> MemberMetadata:
        return self._members[member_id]

    @property
    def size(self) -> int:
        return len(self._members)

    @property
    def all_members(self) -> list[str]:
        return list(self._members)

    @property
    def all_member_metadata(self) -> list[MemberMetadata]:
        return list(self._members.values())

    @property
    def all_static_members(self) -> set[str]:
        return set(self._static_members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    @property
    def leader_or_empty(self) -> str:
        return self.leader_id or ""

    @property
    def num_awaiting(self) -> int:
        return self._num_members_awaiting_join

    @property
    def num_pending(self) -> int:
        return len(self._pending_members)

    @property
    def pending_members(self) -> set[str]:
        """Member ids handed out with MEMBER_ID_REQUIRED that have not joined yet."""
        return set(self._pending_members)

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    @property
    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of any member: how long a rebalance may take."""
        return max((m.rebalance_timeout_ms for m in self._members.values()), default=0)

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """Kafka's ``<client.id or group.instance.id>-<uuid4>``."""
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{self._uuid_factory()}"

    def add(
        self, member: MemberMetadata, callback: ResponseCallback[JoinGroupResult] | None = None
    ) -> None:
        """Add a member, parking its JoinGroup ``callback`` if one is given."""
        if member.group_instance_id is not None:
            if member.group_instance_id in self._static_members:
                raise RuntimeError(
                    f"Static member with groupInstanceId={member.group_instance_id} cannot "
                    f"be added to group {self.group_id} since it is already a member"
                )
            self._static_members[member.group_instance_id] = member.member_id
        if not self._members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type or not self.supports_protocols(
            member.protocol_type, member.protocol_names()
        ):
            raise RuntimeError(f"Member {member.member_id} does not match group {self.group_id}")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self._members[member.member_id] = member
        self._inc_supported_protocols(member)
        member.awaiting_join_callback = callback
        if member.is_awaiting_join:
            self._num_members_awaiting_join += 1
        self._pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        """Drop a member (or pending member). Callbacks are the caller's business."""
        member = self._members.pop(member_id, None)
        if member is not None:
            self._dec_supported_protocols(member)
            if member.is_awaiting_join:
                self._num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self._static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self._members), None)
        self._pending_members.discard(member_id)
        self._pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: MemberMetadata,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: ResponseCallback[JoinGroupResult] | None,
    ) -> None:
        """A known member rejoins: new protocols/timeouts, and (un)park its JoinGroup.

        A JoinGroup already parked for this member is superseded by the new one. Kafka
        drops the old callback; we answer it with REBALANCE_IN_PROGRESS (retriable)
        so that no handler is left waiting forever on a response that cannot come.
        """
        superseded = member.awaiting_join_callback if callback is not None else None
        self._dec_supported_protocols(member)
        member.supported_protocols = list(protocols)
        self._inc_supported_protocols(member)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and not member.is_awaiting_join:
            self._num_members_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self._num_members_awaiting_join -= 1
        member.awaiting_join_callback = callback
        if superseded is not None and superseded is not callback:
            superseded(JoinGroupResult(member.member_id, ErrorCode.rebalance_in_progress))

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinGroupResult) -> bool:
        """Answer a parked JoinGroup, if there is one. True if a callback ran."""
        callback = member.awaiting_join_callback
        if callback is None:
            return False
        member.awaiting_join_callback = None
        self._num_members_awaiting_join -= 1
        callback(result)
        return True

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        """Answer a parked SyncGroup, if there is one. True if a callback ran."""
        callback = member.awaiting_sync_callback
        if callback is None:
            return False
        member.awaiting_sync_callback = None
        callback(result)
        return True

    def awaiting_callbacks(self) -> list[ResponseCallback[Any]]:
        """The parked JoinGroup and SyncGroup answers of every member."""
        out: list[ResponseCallback[Any]] = []
        for member in self._members.values():
            if member.awaiting_join_callback is not None:
                out.append(member.awaiting_join_callback)
            if member.awaiting_sync_callback is not None:
                out.append(member.awaiting_sync_callback)
        return out

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self._members.values() if not m.is_awaiting_join]

    @property
    def has_all_members_joined(self) -> bool:
        """Every known member is parked in JoinGroup and no MEMBER_ID_REQUIRED is out."""
        return len(self._members) == self._num_members_awaiting_join and not self._pending_members

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did.

        False when there is no leader at all or nobody rejoined: the generation cannot
        move on without a member to run the assignment.
        """
        if self.leader_id is None:
            return False
        leader = self._members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self._members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    # ---------------------------------------------------------- static members
    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self._static_members

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self._static_members.get(group_instance_id)

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Give a static member a new member id, fencing whatever waited on the old one."""
        member = self._members.pop(old_member_id, None)
        if member is None:
            raise RuntimeError(f"Cannot replace non-existing member id {old_member_id}")
        # The old incarnation may still have a JoinGroup/SyncGroup parked: fence it now.
        self.maybe_invoke_join_callback(
            member, JoinGroupResult(member_id=old_member_id, error=ErrorCode.fenced_instance_id)
        )
        self.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self._members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self._static_members[group_instance_id] = new_member_id
        if old_member_id in self._pending_sync_members:
            self._pending_sync_members.discard(old_member_id)
            self._pending_sync_members.add(new_member_id)
        return member

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        if group_instance_id is None:
            return False
        current = self._static_members.get(group_instance_id)
        return current is not None and current != member_id

    # --------------------------------------------------------- pending members
    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self._pending_members

    def add_pending_member(self, member_id: str) -> None:
        if member_id in self._members:
            raise RuntimeError(f"Pending member {member_id} is already a member")
        self._pending_members.add(member_id)

    def add_pending_sync_member(self, member_id: str) -> None:
        if member_id not in self._members:
            raise RuntimeError(f"Pending sync for {member_id}, which is not a member")
        self._pending_sync_members.add(member_id)

    def remove_pending_sync_member(self, member_id: str) -> None:
        if member_id not in self._members:
            raise RuntimeError(f"Pending sync removal for {member_id}, which is not a member")
        self._pending_sync_members.discard(member_id)

    @property
    def has_received_sync_from_all_members(self) -> bool:
        return not self._pending_sync_members

    @property
    def all_pending_sync_members(self) -> set[str]:
        return set(self._pending_sync_members)

    def clear_pending_sync_members(self) -> None:
        self._pending_sync_members.clear()

    # ------------------------------------------------------------- protocols
    def _inc_supported_protocols(self, member: MemberMetadata) -> None:
        for name in member.protocol_names():
            self._supported_protocols[name] = self._supported_protocols.get(name, 0) + 1

    def _dec_supported_protocols(self, member: MemberMetadata) -> None:
        for name in member.protocol_names():
            self._supported_protocols[name] -= 1
            if self._supported_protocols[name] == 0:
                del self._supported_protocols[name]

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        n = len(self._members)
        return {name for name, count in self._supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        """Could a member with these protocols join? An empty group takes anything
        non-empty; otherwise the type must match and one protocol be common to all."""
        if self._state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        if not self._members:
            return (
                bool(protocol_type)
                and bool(protocols)
                and (self.protocol_type is None or self.protocol_type == protocol_type)
            )
        n = len(self._members)
        return self.protocol_type == protocol_type and any(
            self._supported_protocols.get(p, 0) == n for p in protocols
        )

    def select_protocol(self) -> str:
        """Each member votes for its favourite common protocol; most votes wins.

        Ties go to the protocol first voted for in member order, a deterministic stand-in
        for Kafka's hash-map order.
        """
        if not self._members:
            raise RuntimeError("Cannot select protocol for empty group")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self._members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def init_next_generation(self) -> None:
        """Bump the generation and pick the protocol: CompletingRebalance, or Empty."""
        self.generation_id += 1
        if self._members:
            self.protocol_name = self.select_protocol()
            self._subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self._subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.clear_pending_sync_members()

    def current_member_metadata(self) -> list[JoinGroupMember]:
        """The member list the leader receives (metadata for the chosen protocol)."""
        if self._state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise RuntimeError(f"Cannot obtain member metadata for group in state {self._state}")
        assert self.protocol_name is not None
        return [
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self._members.values()
        ]

    # ------------------------------------------------------ subscribed topics
    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the consumer group reads, or None when unknown (not a consumer group,
        no protocol chosen, or unparsable metadata)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self._members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self._members.values():
            parsed = subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    @property
    def subscribed_topics(self) -> set[str] | None:
        return self._subscribed_topics

    def refresh_subscribed_topics(self) -> None:
        self._subscribed_topics = self.compute_subscribed_topics()

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """True if consuming ``topic``; also True when unknown, to be safe."""
        return self._subscribed_topics is None or topic in self._subscribed_topics

    # --------------------------------------------------------------- offsets
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_txn_offsets)

    def remove_offsets(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        removed = []
        for tp in partitions:
            key = TopicPartition(*tp)
            if self.offsets.pop(key, None) is not None:
                removed.append(key)
        return removed

    def remove_all_offsets(self) -> list[TopicPartition]:
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Kafka's ``removeExpiredOffsets``: which clock retention counts from depends on
        whether anyone is in the group."""
        if self.protocol_type is not None and self._state is GroupState.EMPTY:
            # Nobody left: retention counts from the moment the group became Empty.
            state_ts = self.current_state_timestamp
            expired = expired_partitions(
                self.offsets,
                now_ms,
                retention_ms,
                lambda om: state_ts if state_ts is not None else om.commit_timestamp,
            )
        elif self.protocol_type == CONSUMER_PROTOCOL_TYPE and self._subscribed_topics is not None:
            # Live consumers: only offsets of topics nobody subscribes to any more.
            expired = expired_partitions(
                self.offsets,
                now_ms,
                retention_ms,
                lambda om: om.commit_timestamp,
                self._subscribed_topics,
            )
        elif self.protocol_type is None:
            # A "simple" group (assign() + commit): counted from each commit.
            expired = expired_partitions(
                self.offsets, now_ms, retention_ms, lambda om: om.commit_timestamp
            )
        else:
            expired = []
        for tp in expired:
            del self.offsets[tp]
        return expired

    def __repr__(self) -> str:
        return (
            f"GroupMetadata(group_id={self.group_id!r}, generation={self.generation_id}, "
            f"protocol_type={self.protocol_type!r}, state={self._state.value}, "
            f"members={list(self._members)})"
        )
