"""The share-group side of the group coordinator (KIP-932): ShareGroupHeartbeat, describe.

Theory of operation. A member joins with epoch 0 and its subscribed topics, heartbeats
with the epoch it was given, and leaves with -1. Every change of membership,
subscriptions or the subscribed topics' partitions bumps the group epoch; a heartbeat
that finds the target assignment behind the group epoch recomputes it with the simple
assignor (``simple_assignor.py``: several members may share a partition), and the member
takes its target at once, with the assignment epoch as its member epoch (share groups
never revoke). The answer carries the broker's heartbeat interval and, when the
member's assignment changed or the request was a full one, the assignment by topic id.
A member that does not heartbeat within ``group.share.session.timeout.ms`` is removed
(``member_timeouts.py``: a keyed timer on the broker's scheduler timer).

Kafka's errors: INVALID_REQUEST for an empty group, member or rack id, a join without
subscribed topics, or an epoch below -1; UNKNOWN_MEMBER_ID for a member the group does
not have; FENCED_MEMBER_EPOCH for an epoch other than the member's current or previous
one (an answer that bumped it may have been lost);
GROUP_MAX_SIZE_REACHED past ``group.share.max.size``; GROUP_ID_NOT_FOUND when the id is
a consumer or classic group's.

Differences from Kafka: share groups are kept in memory by the coordinator that served
them (Kafka writes ShareGroup* records to ``__consumer_offsets``); after a coordinator
move their members get UNKNOWN_MEMBER_ID and join again. The simple assignor is not
sticky (see its docstring). Rack ids are kept but not used.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

import broker.group.share.simple_assignor as simple_assignor
from broker.cluster.cluster_metadata import ClusterMetadata
from broker.group.consumer.errors import ApiError
from broker.group.member_epochs import unknown_member
from broker.group.member_timeouts import MemberTimeouts, expired_member
from broker.group.share.share_group import Assignment, ShareGroup, ShareGroupMember
from broker.group.share.share_group_config import ShareGroupConfig
from purgatory import SystemTimer

log = logging.getLogger("broker.group.share")

LEAVE_GROUP_MEMBER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatParams:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatResult:
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: not sent

    def topic_partitions(self) -> list[tuple[uuid.UUID, list[int]]]:
        if self.assignment is None:
            return []
        return [
            (topic_id, sorted(parts))
            for topic_id, parts in sorted(self.assignment.items(), key=lambda kv: str(kv[0]))
        ]


class ShareGroupCoordinator:
    """Owns the share groups this broker coordinates; synchronous, clock from its timer."""

    def __init__(
        self,
        config: ShareGroupConfig,
        scheduler_timer: SystemTimer,
        metadata: ClusterMetadata,
        other_group_exists: Callable[[str], bool] = lambda _group_id: False,
        on_member_expired: Callable[[str, str], None] = lambda _group_id, _member_id: None,
        partition_for: Callable[[str], int] = lambda _group_id: 0,
    ) -> None:
        self.config = config
        # the __consumer_offsets partition a group's coordinator leads (an unload drops
        # the groups of the partition this broker stopped leading)
        self._partition_for = partition_for
        self._timeouts = MemberTimeouts(
            scheduler_timer,
            lambda _group_id: self.config.group_share_session_timeout_ms,
            self._on_member_timeout,
        )
        self._metadata = metadata
        self._other_group_exists = other_group_exists
        # A member fenced by its session timeout: the share partitions release what it
        # holds and its share session closes (SharePartitionManager.close_session).
        self._on_member_expired = on_member_expired
        self._groups: dict[str, ShareGroup] = {}

    # -- lookups ----------------------------------------------------------------------

    def group(self, group_id: str) -> ShareGroup | None:
        return self._groups.get(group_id)

    def groups(self) -> list[ShareGroup]:
        return list(self._groups.values())

    def get_or_create_group(self, group_id: str) -> ShareGroup | None:
        """The share group ``group_id``, made empty if there is none (Kafka 4.2's
        AlterShareGroupOffsets initialises a group before its first use); None when the
        id is another type's group."""
        group = self._groups.get(group_id)
        if group is None and not self._other_group_exists(group_id):
            group = self._groups[group_id] = ShareGroup(group_id)
        return group

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self._groups.get(group_id)
        return group is not None and member_id in group.members

    # -- ShareGroupHeartbeat ----------------------------------------------------------

    def heartbeat(self, params: ShareGroupHeartbeatParams) -> ShareGroupHeartbeatResult:
        try:
            if params.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(params)
            return self._heartbeat(params)
        except ApiError as e:
            return ShareGroupHeartbeatResult(error=e.error, error_message=e.message)

    def _validate(self, params: ShareGroupHeartbeatParams) -> None:
        if not params.group_id:
            raise ApiError(ErrorCode.invalid_request, "GroupId can't be empty.")
        if not params.member_id:
            raise ApiError(ErrorCode.invalid_request, "MemberId can't be empty.")
        if params.rack_id is not None and not params.rack_id:
            raise ApiError(ErrorCode.invalid_request, "RackId can't be empty.")
        if params.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise ApiError(ErrorCode.invalid_request, "MemberEpoch is invalid.")
        if params.member_epoch == 0 and not params.subscribed_topic_names:
            raise ApiError(
                ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
            )
        if params.group_id not in self._groups and self._other_group_exists(params.group_id):
            raise ApiError(
                ErrorCode.group_id_not_found, f"Group {params.group_id} is not a share group."
            )

    def _heartbeat(self, params: ShareGroupHeartbeatParams) -> ShareGroupHeartbeatResult:
        self._validate(params)
        group = self._groups.get(params.group_id)
        member = group.members.get(params.member_id) if group is not None else None
        if params.member_epoch == 0:
            if (
                member is None
                and group is not None
                and len(group.members) >= self.config.group_share_max_size
            ):
                raise ApiError(
                    ErrorCode.group_max_size_reached,
                    f"The share group has reached its maximum capacity of "
                    f"{self.config.group_share_max_size} members.",
                )
        elif member is None:
            raise unknown_member(params.group_id, params.member_id)
        elif params.member_epoch not in (member.member_epoch, member.previous_member_epoch):
            # the previous epoch is accepted: the answer that bumped it may have been lost
            raise ApiError(
                ErrorCode.fenced_member_epoch,
                f"The share group member has a different epoch ({params.member_epoch}) than "
                f"the one known by the group coordinator ({member.member_epoch}).",
            )
        if group is None:
            group = self._groups[params.group_id] = ShareGroup(params.group_id)
        bump = False
        if member is None:
            member = group.members[params.member_id] = ShareGroupMember(params.member_id)
            bump = True
            log.info(
                "[GroupId %s] Member %s joined the share group.", group.group_id, member.member_id
            )
        member.client_id, member.client_host = params.client_id, params.client_host
        if params.rack_id is not None:
            member.rack_id = params.rack_id
        names = params.subscribed_topic_names
        if names is not None and tuple(sorted(set(names))) != member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(sorted(set(names)))
            bump = True
        # one bump per heartbeat, whatever changed (Kafka's single group epoch record)
        if self._refresh_subscription_metadata(group) or bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._compute_target_assignment(group)
        full = params.member_epoch == 0 or names is not None
        changed = self._reconcile(group, member)
        self._timeouts.schedule_session_timeout(group.group_id, member.member_id)
        return ShareGroupHeartbeatResult(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.config.group_share_heartbeat_interval_ms,
            assignment=dict(member.assignment) if changed or full else None,
        )

    def _leave(self, params: ShareGroupHeartbeatParams) -> ShareGroupHeartbeatResult:
        self._validate(params)
        group = self._groups.get(params.group_id)
        if group is None or params.member_id not in group.members:
            raise unknown_member(params.group_id, params.member_id)
        self._remove_member(group, params.member_id, "left")
        return ShareGroupHeartbeatResult(
            member_id=params.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH
        )

    # -- the group's epochs -----------------------------------------------------------

    def _refresh_subscription_metadata(self, group: ShareGroup) -> bool:
        topics = self._metadata.topics
        current = tuple(
            (name, topics[name].topic_id, len(topics[name].partitions))
            for name in sorted(group.subscribed_topic_names())
            if name in topics
        )
        if current == group.subscription_metadata:
            return False
        group.subscription_metadata = current
        group.subscribed_topics_seen.update(name for name, _id, _count in current)
        return True

    def _compute_target_assignment(self, group: ShareGroup) -> None:
        ids = {name: topic_id for name, topic_id, _ in group.subscription_metadata}
        counts = {topic_id: count for _, topic_id, count in group.subscription_metadata}
        subscriptions = {
            m.member_id: frozenset(ids[t] for t in m.subscribed_topic_names if t in ids)
            for m in group.members.values()
        }
        group.target_assignment = simple_assignor.assign(subscriptions, counts)
        group.assignment_epoch = group.group_epoch

    def _reconcile(self, group: ShareGroup, member: ShareGroupMember) -> bool:
        """The member takes its target assignment; True when it changed."""
        target = group.target_assignment.get(member.member_id, {})
        changed = target != member.assignment
        if changed or member.member_epoch != group.assignment_epoch:
            member.assignment = dict(target)
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        return changed

    # -- sessions ---------------------------------------------------------------------

    def _on_member_timeout(
        self, group_id: str, member_id: str, member_epoch: int | None, reason: str
    ) -> None:
        """The member's session expired: it goes, and what it holds is released."""
        if expired_member(self._groups, group_id, member_id, member_epoch, reason) is None:
            return
        self._remove_member(self._groups[group_id], member_id, "expired (session timeout)")
        self._on_member_expired(group_id, member_id)

    def _remove_member(self, group: ShareGroup, member_id: str, why: str) -> None:
        del group.members[member_id]
        group.target_assignment.pop(member_id, None)
        group.group_epoch += 1
        self._timeouts.cancel(group.group_id, member_id)
        log.info("[GroupId %s] Member %s %s.", group.group_id, member_id, why)

    def on_partition_unloaded(self, partition: int) -> None:
        """This broker stopped leading ``partition`` of ``__consumer_offsets``: its share
        groups go, and their members' session timers with them (Kafka's unload cancels
        the shard's timers). Their members are not fenced: they heartbeat to the new
        coordinator, and a timer left here would expire a live member and release what it
        holds on this broker's share partitions (campaign seed 57)."""
        for group_id in [g for g in self._groups if self._partition_for(g) == partition]:
            group = self._groups.pop(group_id)
            for member_id in group.members:
                self._timeouts.cancel(group_id, member_id)
            log.info("[GroupId %s] Unloaded share group at epoch %d.", group_id, group.group_epoch)

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups for a share group: only an empty one (NON_EMPTY_GROUP)."""
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        del self._groups[group_id]
        return ErrorCode.none
