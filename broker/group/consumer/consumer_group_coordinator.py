"""Kafka 4's consumer group protocol (KIP-848) beside the classic groups.

Kafka 4 runs both group types in one coordinator (``GroupMetadataManager`` keeps a map of
groups of either type). Here the classic groups stay where they are and this component
owns the consumer groups; the two meet at four seams, each a few lines:

* the classic ``GroupCoordinator`` asks ``is_consumer_group`` before a JoinGroup (an
  Empty consumer group becomes classic, ``maybe_delete_empty_group``; for one with
  members the JoinGroup, and then the SyncGroup, Heartbeat and LeaveGroup, are a classic
  member's of the consumer group, ``classic_group_*``) and before an OffsetCommit (a
  consumer group's commit is validated by ``validate_offset_commit``: member id and
  member epoch, STALE_MEMBER_EPOCH / UNKNOWN_MEMBER_ID as Kafka's, ILLEGAL_GENERATION for
  a classic member; a TxnOffsetCommit's the same way, ``is_transactional``);
* this coordinator asks the classic groups (``ClassicGroups``: the
  ``GroupMetadataManager``) whether an id is taken by a classic group with members
  (GROUP_ID_NOT_FOUND, "not a consumer group", unless it can be upgraded) and whether
  this broker still coordinates a group;
* the online migration's conversions change the classic coordinator's group through
  ``ClassicGroupMigration`` (the ``GroupCoordinator`` attaches itself);
* committed offsets live in the one offsets store, the manager's (a consumer group's
  offsets sit in an Empty classic group of the same id, which is how they are written to
  and loaded from ``__consumer_offsets``).

A heartbeat is served as Kafka's ``consumerGroupHeartbeat``: validate the request (all
errors before any change), get or create the group and the member, bump the group epoch
when the member's subscription or the subscribed topics changed, compute a new target
assignment when the group epoch is ahead of it, reconcile the member one step
(``CurrentAssignmentBuilder``: revoke first, assign what nobody holds), reschedule its
session timeout, and answer with its epoch, the heartbeat interval the broker dictates
and, on a full request or a change, its assignment. Epoch -1 leaves, -2 leaves a static
member that will come back (it keeps its partitions until its session expires).

Timeouts are Kafka's (session, rebalance: ``broker/group/member_timeouts.py``); fencing removes
the member and bumps the group epoch, so the others get its partitions.

Online migration (Kafka 4's, ``group.consumer.migration.policy``): a heartbeat joining a
classic group with members, all of protocol type ``consumer``, converts it (upgrade:
``group_conversion.py``; the classic coordinator empties its group through
``ClassicGroupMigration``); its members become classic members of the consumer group and
are served through JoinGroup/SyncGroup/Heartbeat/LeaveGroup (``classic_members.py``).
When the last KIP-848 member leaves or is fenced and the others are all classic, the group
converts back (downgrade) and the classic group rebalances. Both conversions are written
as records (the consumer group's, the classic group's), so a failover keeps them.

Durability, as Kafka 4's: every change of a group is written to ``__consumer_offsets``
as Kafka's records (``consumer_group_writes.py``); a heartbeat that changed its group is
answered once the write is done (``heartbeat``). When this broker becomes the leader of a
partition the manager's load replays the records and hands each group to
``on_group_loaded`` (every member's session timeout starts then, as Kafka's
``onLoaded``); when it stops leading one, ``on_partition_unloaded`` drops its groups and
their timers. Until the load is done ``check_coordinator`` answers
COORDINATOR_LOAD_IN_PROGRESS.

The heartbeat's checks are in ``heartbeat_validation.py``, its member lookup and static
membership (KIP-848's rules) in ``member_subscription.py``, regex subscriptions in
``regex_subscriptions.py``, the target assignment and reconciliation in
``consumer_group_assignment.py``, the timeouts in ``broker/group/member_timeouts.py``.

Where this differs from Kafka:

* A change is applied to the group first and written after (the records are the diff of
  the group before and after the change: ``records_for_changes``); Kafka writes records
  and applies them by replaying. A write that fails (NOT_ENOUGH_REPLICAS, a lost
  leadership, a timeout) is answered with Kafka's mapped error (COORDINATOR_NOT_AVAILABLE
  / NOT_COORDINATOR, ``coordinator_write_error``) but the change is not rolled back (Kafka
  reverts its timeline): the group in memory may be ahead of the log until a failover
  (the next coordinator loads what the log has). Fencings by a timeout and DeleteGroups
  write without waiting (DeleteGroups answers at once).
* A group of a partition this broker no longer coordinates is also dropped lazily, when
  one of its timeouts fires.
* The subscribed topics' metadata is recomputed on every heartbeat (Kafka: on a
  subscription change, or after a metadata image change of a subscribed topic).
* Regex subscriptions are resolved on the heartbeat, synchronously, and not written as
  ConsumerGroupRegularExpression records (``regex_subscriptions.py``).
* A static classic member replacing the last KIP-848 member does not downgrade the
  group (Kafka's ``validateOnlineDowngradeWithReplacedMemberId``); see below.
* A group's session timeout and heartbeat interval are its GROUP configs
  (``group_configs.py``); a new session timeout applies from the next heartbeat.
* OffsetCommit below v9 from a member is not refused with UNSUPPORTED_VERSION.
* Empty consumer groups stay until the broker stops coordinating them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from kio.schema.errors import ErrorCode

import broker.group.consumer.classic_members as classic_members
from broker.cluster.cluster_metadata import TopicInfo
from broker.group.consumer.consumer_group import ConsumerGroup, TopicMetadata
from broker.group.consumer.consumer_group_assignment import (
    assignor_for,
    reconcile,
    subscription_metadata,
    update_target_assignment,
)
from broker.group.consumer.consumer_group_config import ConsumerGroupConfig
from broker.group.consumer.consumer_group_member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from broker.group.consumer.consumer_group_records import (
    ConsumerGroupView,
)
from broker.group.consumer.consumer_group_writes import write_group_changes
from broker.group.consumer.coordinator_ports import (
    ClassicGroupMigration,
    ClassicGroups,
    TopicsImage,
)
from broker.group.consumer.current_assignment_builder import OwnedTopicPartitions
from broker.group.consumer.errors import ApiError
from broker.group.consumer.group_conversion import (
    classic_members_from_consumer_group,
    consumer_group_from_classic,
)
from broker.group.consumer.heartbeat_params import (
    ConsumerGroupHeartbeatParams,
    ConsumerGroupHeartbeatResult,
)
from broker.group.consumer.heartbeat_validation import (
    throw_if_group_is_full,
    throw_if_request_is_invalid,
)
from broker.group.consumer.member_subscription import (
    get_or_maybe_subscribe_dynamic_member,
    get_or_maybe_subscribe_static_member,
    static_member_leaves_temporarily,
    static_member_of,
    updated_member,
)
from broker.group.consumer.offset_validation import validate_offset_commit, validate_offset_fetch
from broker.group.consumer.partition_assignor import ConsumerGroupPartitionAssignor
from broker.group.consumer.range_assignor import RangeAssignor
from broker.group.consumer.regex_subscriptions import RegexResolver, regex_topics
from broker.group.consumer.uniform_assignor import UniformAssignor
from broker.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from broker.group.group_configs import GroupConfigManager, GroupConfigStore
from broker.group.group_metadata import GroupMetadata
from broker.group.group_state import GroupState
from broker.group.join_params import JoinGroupParams
from broker.group.member_timeouts import MemberTimeouts, drop_group, expired_member
from broker.group.response_callback import ResponseCallback
from broker.group.results import JoinGroupResult, LeaveGroupResult, SyncGroupResult
from broker.server.purgatories import ParkedRequest
from purgatory import SystemTimer

log = logging.getLogger("broker.group.consumer")

E = ErrorCode

ASSIGNORS: Mapping[str, Callable[[], ConsumerGroupPartitionAssignor]] = {
    "uniform": UniformAssignor,
    "range": RangeAssignor,
}


class ConsumerGroupCoordinator:
    """The consumer groups of this broker; see the module docstring."""

    def __init__(
        self,
        config: ConsumerGroupConfig,
        timer: SystemTimer,
        topics: TopicsImage,
        classic_groups: ClassicGroups,
        member_id_factory: Callable[[], str],
        group_configs: GroupConfigManager | None = None,
    ) -> None:
        self.config = config
        # Per-group overrides (GROUP config resources); none without a cluster's store.
        self.group_configs = group_configs or GroupConfigManager(GroupConfigStore(), config)
        self.timeouts = MemberTimeouts(
            timer, self.group_configs.consumer_session_timeout_ms, self._on_member_timeout
        )
        self.timer = self.timeouts.timer
        self._topics = topics
        self._classic = classic_groups
        self._member_id_factory = member_id_factory
        self.regexes = RegexResolver()
        self.assignors: dict[str, ConsumerGroupPartitionAssignor] = {
            name: ASSIGNORS[name]() for name in config.assignors
        }
        self.default_assignor = config.assignors[0]
        self._groups: dict[str, ConsumerGroup] = {}
        # The classic coordinator, for online migrations (it attaches itself).
        self.classic: ClassicGroupMigration | None = None

    def attach_classic_coordinator(self, classic: ClassicGroupMigration) -> None:
        self.classic = classic

    @property
    def topics(self) -> Mapping[str, TopicInfo]:
        return self._topics.topics

    def new_member_id(self) -> str:
        return self._member_id_factory()

    # ================================================================ lookups
    def is_consumer_group(self, group_id: str) -> bool:
        return group_id in self._groups

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    @property
    def groups(self) -> list[ConsumerGroup]:
        return list(self._groups.values())

    def consumer_group(self, group_id: str) -> ConsumerGroup:
        """The group; GROUP_ID_NOT_FOUND when there is none (Kafka's ``consumerGroup``)."""
        group = self._groups.get(group_id)
        if group is None:
            if self._classic.get_group(group_id) is not None:
                raise ApiError(E.group_id_not_found, f"Group {group_id} is not a consumer group")
            raise ApiError(E.group_id_not_found, f"Consumer group {group_id} not found.")
        return group

    def assignor_name(self, group: ConsumerGroup) -> str:
        return group.preferred_server_assignor(self.default_assignor)

    # ================================================================ writes
    def _write(
        self,
        group_id: str,
        before: ConsumerGroupView,
        on_done: Callable[[ErrorCode], None] | None = None,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        write_group_changes(
            self._classic, group_id, before, self._groups.get(group_id), on_done, parked_request
        )

    write = _write

    # ========================================================== load / unload
    def on_group_loaded(self, group: ConsumerGroup) -> None:
        """Kafka's ``onLoaded``: a group came back from ``__consumer_offsets``; every
        member's session timeout starts now (and the rebalance timeout of one asked to
        revoke)."""
        drop_group(self._groups, group.group_id, self.timeouts)
        self._groups[group.group_id] = group
        log.info(
            "[GroupId %s] Loaded consumer group with %d members at epoch %d.",
            group.group_id,
            group.num_members,
            group.group_epoch,
        )
        self.timeouts.start_group(group, _owes_revocations)

    def on_partition_unloaded(self, partition: int) -> None:
        """This broker no longer leads ``partition``: its groups go, timers cancelled."""
        for group_id in [g for g in self._groups if self._classic.partition_for(g) == partition]:
            group = drop_group(self._groups, group_id, self.timeouts)
            assert group is not None
            log.info(
                "[GroupId %s] Unloaded consumer group at epoch %d.", group_id, group.group_epoch
            )

    # ============================================================== heartbeat
    def heartbeat(
        self,
        params: ConsumerGroupHeartbeatParams,
        respond: Callable[[ConsumerGroupHeartbeatResult], None],
        parked_request: ParkedRequest | None = None,
    ) -> None:
        """ConsumerGroupHeartbeat, answered through ``respond`` once the group's changes
        are written (at once when nothing changed or the request is refused)."""
        before = ConsumerGroupView.of(self._groups.get(params.group_id))
        result = self._heartbeat(params)

        def written(error: ErrorCode) -> None:
            if error is E.none:
                respond(result)
            else:
                respond(ConsumerGroupHeartbeatResult(error=error))

        self._write(params.group_id, before, written, parked_request)

    def consumer_group_heartbeat(
        self, params: ConsumerGroupHeartbeatParams
    ) -> ConsumerGroupHeartbeatResult:
        """ConsumerGroupHeartbeat (join, heartbeat, leave); errors as Kafka's. The answer
        as soon as the group has changed; the write goes on (see :meth:`heartbeat`)."""
        before = ConsumerGroupView.of(self._groups.get(params.group_id))
        result = self._heartbeat(params)
        self._write(params.group_id, before)
        return result

    def _heartbeat(self, params: ConsumerGroupHeartbeatParams) -> ConsumerGroupHeartbeatResult:
        try:
            throw_if_request_is_invalid(params, self.assignors)
            if params.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._consumer_group_leave(params)
            return self._consumer_group_heartbeat(params)
        except ApiError as error:
            log.debug(
                "[GroupId %s] Heartbeat of member %s at epoch %d refused: %s (%s)",
                params.group_id,
                params.member_id,
                params.member_epoch,
                error.error.name,
                error.message,
            )
            return ConsumerGroupHeartbeatResult(error=error.error, error_message=error.message)

    def _get_or_maybe_create_group(
        self, group_id: str, create: bool
    ) -> tuple[ConsumerGroup, GroupMetadata | None]:
        """The group, and the classic group it is converted from (upgrade) when the
        conversion is to happen; nothing changes until :meth:`_commit_upgrade`."""
        group = self._groups.get(group_id)
        if group is not None:
            return group, None
        classic = self._classic.get_group(group_id)
        if classic is not None and not classic.is_in(GroupState.EMPTY, GroupState.DEAD):
            if create and self._validate_online_upgrade(classic):
                converted = consumer_group_from_classic(classic, self._topics.topics)
                if converted is not None:
                    return converted, classic
                log.warning(
                    "Cannot upgrade the classic group %s to consumer group because the "
                    "embedded consumer protocol is malformed.",
                    group_id,
                )
                raise ApiError(
                    E.group_id_not_found,
                    f"Cannot upgrade the classic group {group_id} to consumer group because "
                    "the embedded consumer protocol is malformed.",
                )
            raise ApiError(E.group_id_not_found, f"Group {group_id} is not a consumer group")
        if not create:
            raise ApiError(E.group_id_not_found, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id), None

    def _validate_online_upgrade(self, classic: GroupMetadata) -> bool:
        """Kafka's ``validateOnlineUpgrade``."""
        reason = None
        if not self.config.upgrade_enabled or self.classic is None:
            reason = "the online upgrade is disabled"
        elif classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            reason = "the group does not use the consumer embedded protocol"
        elif classic.size > self.config.group_consumer_max_size:
            reason = "the group size exceeds the consumer group maximum size"
        if reason is not None:
            log.info(
                "Cannot upgrade classic group %s to consumer group because %s.",
                classic.group_id,
                reason,
            )
        return reason is None

    def _commit_upgrade(self, group: ConsumerGroup, classic: GroupMetadata) -> None:
        """Kafka's ``convertToConsumerGroup``: the classic coordinator lets its members go
        (their parked requests answered REBALANCE_IN_PROGRESS); their session timeouts
        start here, at the session timeout of their JoinGroup."""
        assert self.classic is not None
        self.classic.hand_over_to_consumer_group(classic)
        self._groups[group.group_id] = group
        for member_id, member in group.members.items():
            meta = member.classic_member_metadata
            assert meta is not None
            self.timeouts.schedule_session_timeout(
                group.group_id, member_id, meta.session_timeout_ms
            )
        log.info(
            "[GroupId %s] Converted the classic group to a consumer group at epoch %d.",
            group.group_id,
            group.group_epoch,
        )

    def _consumer_group_heartbeat(
        self, p: ConsumerGroupHeartbeatParams
    ) -> ConsumerGroupHeartbeatResult:
        joining = p.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group, upgraded_from = self._get_or_maybe_create_group(p.group_id, joining)
        throw_if_group_is_full(group, p.member_id, self.config.group_consumer_max_size)
        member_id = p.member_id or self._member_id_factory()
        if p.instance_id is None:
            member = get_or_maybe_subscribe_dynamic_member(
                group, member_id, p.member_epoch, p.owned_topic_partitions, joining
            )
            replaced: ConsumerGroupMember | None = None
        else:
            member, replaced = get_or_maybe_subscribe_static_member(
                group, member_id, p.member_epoch, p.instance_id, p.owned_topic_partitions, joining
            )

        if p.subscribed_topic_regex:
            self.regexes.compile(p.subscribed_topic_regex)  # INVALID_REGULAR_EXPRESSION

        # From here on nothing is refused: the group changes.
        if upgraded_from is not None:
            self._commit_upgrade(group, upgraded_from)
        self._groups.setdefault(group.group_id, group)
        if replaced is not None:
            self.replace_static_member(group, replaced, member)

        updated = self.update_member_and_reconcile(
            group, member, updated_member(member, p), p.owned_topic_partitions
        )
        self.timeouts.schedule_session_timeout(group.group_id, member_id)

        full = joining or (
            p.rebalance_timeout_ms != -1
            and (p.subscribed_topic_names is not None or p.subscribed_topic_regex is not None)
            and p.owned_topic_partitions is not None
        )
        changed = updated.assigned_partitions != member.assigned_partitions
        return ConsumerGroupHeartbeatResult(
            member_id=member_id,
            member_epoch=updated.member_epoch,
            heartbeat_interval_ms=self.group_configs.consumer_heartbeat_interval_ms(group.group_id),
            assignment=updated.assigned_partitions if full or changed else None,
        )

    def replace_static_member(
        self, group: ConsumerGroup, replaced: ConsumerGroupMember, member: ConsumerGroupMember
    ) -> None:
        """A static member came back under a new member id: the old one goes."""
        group.remove_member(replaced.member_id)
        self.timeouts.cancel(group.group_id, replaced.member_id)
        group.update_member(member)

    def update_member_and_reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        owned: OwnedTopicPartitions | None,
    ) -> ConsumerGroupMember:
        """Steps 1-3 of Kafka's heartbeat (and of a classic member's JoinGroup): the
        member ``updated`` (group epoch bumped on a subscription change), a new target
        assignment when the group epoch is ahead, one reconciliation step; the member
        as it is now in the group."""
        bump = (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
            or not group.has_member(member.member_id)
        )
        metadata = self._subscription_metadata(
            group,
            group.compute_subscribed_topic_names(member, updated),
            group.compute_subscribed_regexes(member, updated),
        )
        if metadata != group.subscription_metadata:
            bump = True
            group.subscription_metadata = metadata
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, group_epoch)
            group.set_group_epoch(group_epoch)

        if group_epoch > group.assignment_epoch:
            assignor = self.assignors[assignor_for(group, updated, self.default_assignor)]
            update_target_assignment(group, group_epoch, updated, assignor, metadata)

        updated = self._maybe_reconcile(group, updated, owned)
        group.update_member(updated)
        return updated

    def _maybe_reconcile(
        self, group: ConsumerGroup, member: ConsumerGroupMember, owned: OwnedTopicPartitions | None
    ) -> ConsumerGroupMember:
        updated = reconcile(group, member, owned)
        if updated != member:
            self.timeouts.update_rebalance_timeout(
                group.group_id, updated, _owes_revocations(updated)
            )
        return updated

    # ================================================================= leave
    def _consumer_group_leave(
        self, p: ConsumerGroupHeartbeatParams
    ) -> ConsumerGroupHeartbeatResult:
        group = self.consumer_group(p.group_id)
        if p.instance_id is None:
            member = group.get_member(p.member_id)
            log.info("[GroupId %s] Member %s left the consumer group.", p.group_id, p.member_id)
            self._fence_member(group, member)
        else:
            member = static_member_of(group, p.member_id, p.instance_id)
            if p.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                static_member_leaves_temporarily(group, member)
                self.timeouts.cancel_rebalance_timeout(p.group_id, member.member_id)
            else:
                self._fence_member(group, member)
        return ConsumerGroupHeartbeatResult(member_id=p.member_id, member_epoch=p.member_epoch)

    def _subscription_metadata(
        self, group: ConsumerGroup, names: Mapping[str, int], regexes: set[str]
    ) -> dict[str, TopicMetadata]:
        """The metadata of the topics subscribed by name or by one of ``regexes`` (their
        resolutions refreshed when the topics changed)."""
        topics = self._topics.topics
        self.regexes.maybe_refresh(group, regexes, topics, self._topics.version)
        return subscription_metadata(topics, {*names, *regex_topics(group, regexes)})

    def _fence_member(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Kafka's ``consumerGroupFenceMember``: remove it, bump the group epoch; or, when
        only classic members remain, convert the group back to a classic group."""
        if self._validate_online_downgrade(group, member.member_id):
            self._convert_to_classic_group(group, member.member_id)
            return
        group.remove_member(member.member_id)
        self.refresh_subscription_metadata(group)
        group.set_group_epoch(group.group_epoch + 1)
        self.timeouts.cancel(group.group_id, member.member_id)

    def refresh_subscription_metadata(self, group: ConsumerGroup) -> None:
        group.subscription_metadata = self._subscription_metadata(
            group, group.subscribed_topic_names, set(group.subscribed_regexes)
        )

    # ============================================================ downgrade
    def _validate_online_downgrade(self, group: ConsumerGroup, fenced_member_id: str) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMember``."""
        others = [m for m in group.members.values() if m.member_id != fenced_member_id]
        if not all(m.use_classic_protocol for m in others):
            return False
        reason = None
        if not others:
            log.debug(
                "Skip downgrading the consumer group %s to classic group because it's empty.",
                group.group_id,
            )
            return False
        if not self.config.downgrade_enabled or self.classic is None:
            reason = "the online downgrade is disabled"
        elif len(others) > self.classic.classic_group_max_size:
            reason = "its group size is greater than classic group max size"
        if reason is not None:
            log.info(
                "Cannot downgrade consumer group %s to classic group because %s.",
                group.group_id,
                reason,
            )
        return reason is None

    def _convert_to_classic_group(self, group: ConsumerGroup, leaving_member_id: str) -> None:
        """Kafka's ``convertToClassicGroup``: the consumer group goes (its tombstones are
        the caller's write), its classic members form the classic group again."""
        assert self.classic is not None
        members = classic_members_from_consumer_group(group, leaving_member_id, self._topics.topics)
        drop_group(self._groups, group.group_id, self.timeouts)
        self.classic.take_back_from_consumer_group(group.group_id, group.group_epoch, members)

    # ======================================================= classic members
    def classic_group_join(
        self, params: JoinGroupParams, callback: ResponseCallback[JoinGroupResult]
    ) -> None:
        """A classic member's JoinGroup for a consumer group (``classic_members.py``)."""
        classic_members.classic_group_join(self, self._groups[params.group_id], params, callback)

    def classic_group_sync(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncGroupResult:
        return classic_members.classic_group_sync(
            self,
            self._groups[group_id],
            member_id,
            instance_id,
            generation_id,
            protocol_type,
            protocol_name,
        )

    def classic_group_heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        return classic_members.classic_group_heartbeat(
            self, self._groups[group_id], member_id, instance_id, generation_id
        )

    def classic_group_leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]], reason: str | None
    ) -> LeaveGroupResult:
        return classic_members.classic_group_leave(self, self._groups[group_id], members, reason)

    # ============================================================== timeouts
    def _on_member_timeout(
        self, group_id: str, member_id: str, member_epoch: int | None, reason: str
    ) -> None:
        """A session (``member_epoch`` None) or rebalance timeout fired: fence the member
        (the latter only if it is still at ``member_epoch``) and write the change."""
        if self._dropped_if_not_coordinator(group_id):
            return
        member = expired_member(self._groups, group_id, member_id, member_epoch, reason)
        if member is None:
            return
        group = self._groups[group_id]
        before = ConsumerGroupView.of(group)
        self._fence_member(group, member)
        self._write(group_id, before)

    def _dropped_if_not_coordinator(self, group_id: str) -> bool:
        """Forget a group this broker no longer coordinates (and its timeouts)."""
        if self._classic.check_coordinator(group_id) is not E.not_coordinator:
            return False
        if drop_group(self._groups, group_id, self.timeouts) is not None:
            log.info("[GroupId %s] Dropped: this broker no longer coordinates it.", group_id)
        return True

    # ================================================================ delete
    def delete_group(self, group_id: str) -> ErrorCode | None:
        """DeleteGroups of a consumer group (Kafka's ``validateDeleteGroup``): an Empty one
        is forgotten (None; its offsets are the caller's to delete), one with members
        answers NON_EMPTY_GROUP."""
        group = self._groups.get(group_id)
        if group is not None and group.num_members > 0:
            return E.non_empty_group
        if group is not None:
            self._remove_group(group, "Deleted.")
        return None

    def maybe_delete_empty_group(self, group_id: str) -> bool:
        """Kafka's ``maybeDeleteEmptyConsumerGroup``, before a classic JoinGroup: an Empty
        consumer group is deleted so the classic group of its id (holding its offsets)
        takes over. False when there is none or it has members."""
        group = self._groups.get(group_id)
        if group is None or group.num_members > 0:
            return False
        self._remove_group(group, "Empty consumer group converted to a classic group.")
        return True

    def _remove_group(self, group: ConsumerGroup, reason: str) -> None:
        """Forget the group and write its tombstones."""
        before = ConsumerGroupView.of(group)
        del self._groups[group.group_id]
        self._write(group.group_id, before)
        log.info("[GroupId %s] %s", group.group_id, reason)

    # ========================================================== offsets checks
    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        group_instance_id: str | None = None,
        is_transactional: bool = False,
    ) -> ErrorCode | None:
        """Kafka's ``ConsumerGroup.validateOffsetCommit`` (None: accepted)."""
        return validate_offset_commit(
            self._groups[group_id], member_id, member_epoch, group_instance_id, is_transactional
        )

    def validate_offset_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode | None:
        """Kafka's ``ConsumerGroup.validateOffsetFetch`` (None: accepted)."""
        return validate_offset_fetch(self._groups.get(group_id), member_id, member_epoch)


def _owes_revocations(member: ConsumerGroupMember) -> bool:
    """The member's rebalance timeout runs (Kafka: UNREVOKED_PARTITIONS)."""
    return member.state is MemberState.UNREVOKED_PARTITIONS
