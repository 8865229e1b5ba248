"""Streams groups (KIP-1071) beside the classic and consumer groups: Kafka 4.2's
``GroupMetadataManager.streamsGroupHeartbeat`` and what goes with it.

A heartbeat (``heartbeat``), in Kafka's steps, all checks before any change:

1. the request's checks (``heartbeat.py``); epoch -1 leaves (the member is fenced: its
   tasks go to the others), -2 (static members) is refused as Kafka 4.2 refuses static
   membership;
2. get or create the group (a joining member; an id held by a classic group with
   members or a consumer group is GROUP_ID_NOT_FOUND "Group g is not a streams group.")
   and the member (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH as a consumer group's: the
   previous epoch is accepted when the member owns a subset of its tasks);
3. the member's metadata (client, process, endpoint, tags, topology epoch): a change
   bumps the group epoch;
4. the topology: the first member sets it (written); a member with an older epoch is
   told STALE_TOPOLOGY; a different topology at the same epoch is INVALID_REQUEST
   ("Topology updates are not supported yet.");
5. the topology against the cluster (``internal_topic_manager.py``): a new metadata hash
   of the topology's topics or a newly validated topology bumps the group epoch; the
   internal topics to create go back to the handler, which creates them (Kafka: the
   broker's auto topic creation) and answers MISSING_INTERNAL_TOPICS meanwhile;
6. ``num.standby.replicas`` (the group's config, else the broker's) changed since the
   last assignment: bump;
7. a new target when the group epoch is ahead (``target_assignment.py``), then one
   reconciliation step (``current_assignment_builder.py``; the rebalance timeout runs
   while the member owes revocations);
8. the session timeout is rescheduled; the answer carries the member epoch, the
   heartbeat interval, the statuses (STALE_TOPOLOGY, MISSING_SOURCE_TOPICS,
   INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS, SHUTDOWN_APPLICATION once a
   member asked for it), the tasks when the member joins or they changed, and the
   endpoint -> partitions map when the member's endpoint epoch is behind the group's.

The answer waits for the group's records (``streams_group_records.py``) to be in
``__consumer_offsets`` (acks=all), as a consumer group's heartbeat does. A load of the
partition replays them (``on_group_loaded``: the topology is configured again against
the cluster and every member's session timeout starts); an unload drops the groups.

Offsets: a streams group's committed offsets are kept, like a consumer group's, in the
Empty classic group of the same id; a member's OffsetCommit / OffsetFetch carries its
member id and epoch and is checked here (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH).

Where this differs from Kafka:

* changes are applied first and written after, as the record diff (see the consumer
  group coordinator; a failed write is answered with the mapped error, not rolled back);
* the metadata hash is our own hash of the topology's topics (name, id, partitions),
  recomputed on every heartbeat (Kafka: Murmur3 with racks, refreshed at most every
  10 s);
* internal topics are created at once by the handler; they exist by the next heartbeat;
* Kafka's per-topic creation-error cache and CREATE authorization of internal topics are
  left out (topics the broker cannot create are still reported missing).
"""

from __future__ import annotations

import hashlib
import logging
import struct
from collections.abc import Callable, Mapping
from dataclasses import replace

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import TopicInfo as ClusterTopic
from broker.group.append_errors import coordinator_write_error
from broker.group.consumer.coordinator_ports import TopicsImage
from broker.group.consumer.errors import ApiError
from broker.group.group_configs import GroupConfigManager
from broker.group.member_epochs import throw_if_member_epoch_is_invalid
from broker.group.member_timeouts import MemberTimeouts, drop_group, expired_member
from broker.group.streams.configured_topology import (
    ConfiguredTopology,
    Status,
    StreamsInvalidTopologyError,
)
from broker.group.streams.current_assignment_builder import reconcile
from broker.group.streams.heartbeat import (
    StreamsGroupHeartbeatParams,
    StreamsGroupHeartbeatResult,
    throw_if_invalid,
    throw_if_unsupported,
)
from broker.group.streams.internal_topic_manager import configure_topics
from broker.group.streams.sticky_task_assignor import NUM_STANDBY_REPLICAS, StickyTaskAssignor
from broker.group.streams.streams_group import StreamsGroup
from broker.group.streams.streams_group_config import StreamsGroupConfig
from broker.group.streams.streams_group_member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    MemberState,
    StreamsGroupMember,
)
from broker.group.streams.streams_group_records import (
    StreamsGroupView,
    encode_streams_group_record,
    records_for_changes,
)
from broker.group.streams.streams_ports import ClassicGroupsLog, ConsumerGroupIds
from broker.group.streams.streams_topology import StreamsTopology
from broker.group.streams.target_assignment import (
    endpoints_to_partitions,
    update_target_assignment,
)
from broker.group.streams.tasks_tuple import TasksTuple
from broker.server.purgatories import ParkedRequest
from purgatory import SystemTimer

log = logging.getLogger("broker.group.streams")

E = ErrorCode


class StreamsGroupCoordinator:
    """The streams groups of this broker; see the module docstring."""

    def __init__(
        self,
        config: StreamsGroupConfig,
        timer: SystemTimer,
        topics: TopicsImage,
        classic_groups: ClassicGroupsLog,
        consumer_groups: ConsumerGroupIds,
        group_configs: GroupConfigManager,
    ) -> None:
        self.config = config
        self.group_configs = group_configs
        self.timeouts = MemberTimeouts(
            timer, group_configs.streams_session_timeout_ms, self._on_member_timeout
        )
        self.timer = self.timeouts.timer
        self.assignor = StickyTaskAssignor()
        self._topics = topics
        self._classic = classic_groups
        self._consumer_groups = consumer_groups
        self._groups: dict[str, StreamsGroup] = {}

    # ================================================================ lookups
    def is_streams_group(self, group_id: str) -> bool:
        return group_id in self._groups

    def group(self, group_id: str) -> StreamsGroup | None:
        return self._groups.get(group_id)

    @property
    def groups(self) -> list[StreamsGroup]:
        return list(self._groups.values())

    def streams_group(self, group_id: str) -> StreamsGroup:
        """Kafka's ``getStreamsGroupOrThrow``."""
        group = self._groups.get(group_id)
        if group is None:
            if self._is_other_group(group_id):
                raise ApiError(E.group_id_not_found, f"Group {group_id} is not a streams group.")
            raise ApiError(E.group_id_not_found, f"Streams group {group_id} not found.")
        return group

    def _is_other_group(self, group_id: str) -> bool:
        classic = self._classic.get_group(group_id)
        return self._consumer_groups.is_consumer_group(group_id) or (
            classic is not None and classic.size > 0
        )

    def partition_counts(self) -> dict[str, int]:
        return {name: len(t.partitions) for name, t in self._topics.topics.items()}

    # ================================================================ writes
    def _write(
        self,
        group_id: str,
        before: StreamsGroupView,
        on_done: Callable[[ErrorCode], None] | None = None,
        parked_request: ParkedRequest | None = None,
    ) -> None:
        records = records_for_changes(
            group_id, before, StreamsGroupView.of(self._groups.get(group_id))
        )
        if not records:
            if on_done is not None:
                on_done(E.none)
            return

        def written(error: ErrorCode) -> None:
            if error is not E.none:
                log.warning(
                    "[GroupId %s] Writing %d records failed: %s", group_id, len(records), error.name
                )
            if on_done is not None:
                on_done(coordinator_write_error(error))

        self._classic.append_coordinator_records(
            group_id, [encode_streams_group_record(r) for r in records], written, parked_request
        )

    # ========================================================== load / unload
    def on_group_loaded(self, group: StreamsGroup) -> None:
        """Kafka's ``onLoaded``: the topology is configured against today's topics and
        every member's session timeout starts now."""
        drop_group(self._groups, group.group_id, self.timeouts)
        topology = group.topology
        if (
            topology is not None
            and metadata_hash(topology, self._topics.topics) == group.metadata_hash
        ):
            # The topics are as the group last saw them: ready at once. Otherwise the next
            # heartbeat configures it (and bumps the group epoch), as Kafka's.
            group.set_configured_topology(
                configure_topics(topology, group.metadata_hash, self.partition_counts())
            )
        self._groups[group.group_id] = group
        log.info(
            "[GroupId %s] Loaded streams group with %d members at epoch %d.",
            group.group_id,
            group.num_members,
            group.group_epoch,
        )
        self.timeouts.start_group(group, _owes_revocations)

    def on_partition_unloaded(self, partition: int) -> None:
        for group_id in [g for g in self._groups if self._classic.partition_for(g) == partition]:
            self._drop(group_id, "Unloaded")

    def _drop(self, group_id: str, why: str) -> None:
        group = drop_group(self._groups, group_id, self.timeouts)
        if group is not None:
            log.info("[GroupId %s] %s streams group at epoch %d.", group_id, why, group.group_epoch)

    # ============================================================== heartbeat
    def heartbeat(
        self,
        params: StreamsGroupHeartbeatParams,
        respond: Callable[[StreamsGroupHeartbeatResult], None],
        parked_request: ParkedRequest | None = None,
    ) -> None:
        """StreamsGroupHeartbeat, answered through ``respond`` once the group's changes
        are written (at once when nothing changed or the request is refused)."""
        before = StreamsGroupView.of(self._groups.get(params.group_id))
        result = self._heartbeat(params)

        def written(error: ErrorCode) -> None:
            respond(result if error is E.none else StreamsGroupHeartbeatResult(error=error))

        self._write(params.group_id, before, written, parked_request)

    def _heartbeat(self, p: StreamsGroupHeartbeatParams) -> StreamsGroupHeartbeatResult:
        try:
            throw_if_unsupported(p)
            throw_if_invalid(p)
            if p.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(p)
            return self._streams_group_heartbeat(p)
        except ApiError as error:
            return StreamsGroupHeartbeatResult(error=error.error, error_message=error.message)
        except StreamsInvalidTopologyError as error:
            return StreamsGroupHeartbeatResult(
                error=E.streams_invalid_topology, error_message=str(error)
            )

    def _get_or_create_group(self, group_id: str, joining: bool) -> StreamsGroup:
        group = self._groups.get(group_id)
        if group is not None or not joining:
            return self.streams_group(group_id)
        if self._is_other_group(group_id):
            raise ApiError(E.group_id_not_found, f"Group {group_id} is not a streams group.")
        return StreamsGroup(group_id)

    def _get_or_create_member(
        self, group: StreamsGroup, p: StreamsGroupHeartbeatParams, joining: bool
    ) -> StreamsGroupMember:
        member = group.members.get(p.member_id)
        if member is None:
            if not joining:
                member = group.get_member(p.member_id)  # UNKNOWN_MEMBER_ID
            member = StreamsGroupMember(p.member_id)
            log.info(
                "[GroupId %s][MemberId %s] Member joins the streams group.",
                group.group_id,
                p.member_id,
            )
        _throw_if_member_epoch_is_invalid(member, p)
        return member

    def _streams_group_heartbeat(
        self, p: StreamsGroupHeartbeatParams
    ) -> StreamsGroupHeartbeatResult:
        """Kafka's steps 1-8 (the module docstring); every refusal before any change."""
        joining = p.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._get_or_create_group(p.group_id, joining)
        self._throw_if_group_is_full(group, p, joining)
        member = self._get_or_create_member(group, p, joining)
        updated = _updated_member(member, p)
        bump = updated != member or p.member_id not in group.members
        topology = self._maybe_update_topology(group, p)  # INVALID_REQUEST before any change
        reconfigured = self._reconfigured(group, topology)  # STREAMS_INVALID_TOPOLOGY
        # From here on nothing is refused: the group changes.
        self._groups.setdefault(group.group_id, group)
        group.topology = topology
        if reconfigured is not None:
            bump |= reconfigured.metadata_hash != group.metadata_hash
            group.metadata_hash = reconfigured.metadata_hash
            group.set_configured_topology(reconfigured)
        statuses = _stale_topology(updated, topology)
        configs = self._maybe_bump_group_epoch(group, p, topology, bump)
        if group.group_epoch > group.assignment_epoch:
            target = update_target_assignment(
                group, group.group_epoch, updated, self.assignor, configs
            )
        else:
            target = group.target_assignment_of(updated.member_id)
        updated = self._maybe_reconcile(group, updated, target, p.owned_tasks())
        group.update_member(updated)
        self.timeouts.schedule_session_timeout(group.group_id, p.member_id)
        if p.shutdown_application:
            group.shutdown_request_member_id = p.member_id
        return self._answer(group, p, member, updated, statuses)

    def _throw_if_group_is_full(
        self, group: StreamsGroup, p: StreamsGroupHeartbeatParams, joining: bool
    ) -> None:
        """Kafka's ``throwIfStreamsGroupIsFull`` (``group.streams.max.size``)."""
        limit = self.config.group_streams_max_size
        if joining and p.member_id not in group.members and group.num_members >= limit:
            raise ApiError(
                E.group_max_size_reached,
                f"The streams group has reached its maximum capacity of {limit} members.",
            )

    def _maybe_bump_group_epoch(
        self,
        group: StreamsGroup,
        p: StreamsGroupHeartbeatParams,
        topology: StreamsTopology,
        bump: bool,
    ) -> dict[str, str]:
        """Bump the group epoch when the member or the topics' hash changed (``bump``),
        the topology got validated (or lost it), or the assignment configs changed; the
        assignment configs now."""
        configured = group.configured_topology
        validated = (
            topology.topology_epoch if configured is not None and configured.is_ready else -1
        )
        bump |= validated != group.validated_topology_epoch
        standby = self.group_configs.streams_num_standby_replicas(p.group_id)
        configs = {NUM_STANDBY_REPLICAS: str(standby)}
        if not bump and configs != group.last_assignment_configs:
            log.info(
                "[GroupId %s][MemberId %s] Assignment configurations changed to %s. Triggering "
                "rebalance.",
                p.group_id,
                p.member_id,
                configs,
            )
            bump = True
        if bump:
            group.validated_topology_epoch = validated
            group.last_assignment_configs = configs
            group.set_group_epoch(group.group_epoch + 1)
            log.info(
                "[GroupId %s][MemberId %s] Bumped streams group epoch to %d with metadata hash "
                "%d and validated topic epoch %d.",
                p.group_id,
                p.member_id,
                group.group_epoch,
                group.metadata_hash,
                validated,
            )
        return configs

    def _answer(
        self,
        group: StreamsGroup,
        p: StreamsGroupHeartbeatParams,
        member: StreamsGroupMember,
        updated: StreamsGroupMember,
        statuses: list[tuple[Status, str]],
    ) -> StreamsGroupHeartbeatResult:
        assignment = None
        if (
            p.member_epoch == JOIN_GROUP_MEMBER_EPOCH
            or updated.assigned_tasks != member.assigned_tasks
        ):
            assignment = updated.assigned_tasks
            if p.member_epoch != JOIN_GROUP_MEMBER_EPOCH or not assignment.is_empty():
                group.endpoint_information_epoch += 1
        by_endpoint = None
        if group.endpoint_information_epoch != p.endpoint_information_epoch:
            by_endpoint = endpoints_to_partitions(group, self.partition_counts())
        configured = group.configured_topology
        to_create = {}
        if configured is not None and configured.error is not None:
            to_create = dict(configured.internal_topics_to_create)
            statuses.append((configured.error.status, configured.error.message))
        if group.shutdown_request_member_id is not None:
            statuses.append(
                (
                    Status.SHUTDOWN_APPLICATION,
                    f"Streams group member {group.shutdown_request_member_id} encountered a "
                    "fatal error and requested a shutdown for the entire application.",
                )
            )
        return StreamsGroupHeartbeatResult(
            member_id=updated.member_id,
            member_epoch=updated.member_epoch,
            heartbeat_interval_ms=self.group_configs.streams_heartbeat_interval_ms(group.group_id),
            status=tuple((int(code), detail) for code, detail in statuses),
            assignment=assignment,
            endpoint_information_epoch=group.endpoint_information_epoch,
            partitions_by_user_endpoint=by_endpoint,
            internal_topics_to_create=to_create,
        )

    def _maybe_update_topology(
        self, group: StreamsGroup, p: StreamsGroupHeartbeatParams
    ) -> StreamsTopology:
        """Kafka's ``maybeUpdateTopology`` (the group's topology after this request)."""
        current, sent = group.topology, p.topology
        if sent is None:
            if current is None:
                raise ApiError(
                    E.unknown_server_error,
                    "The topology is null and the group topology is also null.",
                )
            return current
        if current is None:
            log.info(
                "[GroupId %s][MemberId %s] Member initialized the topology with epoch %d",
                group.group_id,
                p.member_id,
                sent.topology_epoch,
            )
            return sent
        if current.topology_epoch > sent.topology_epoch:
            log.info(
                "[GroupId %s][MemberId %s] Member joined with stale topology epoch %d",
                group.group_id,
                p.member_id,
                sent.topology_epoch,
            )
            return current
        if current != sent:
            raise ApiError(E.invalid_request, "Topology updates are not supported yet.")
        return current

    def _reconfigured(
        self, group: StreamsGroup, topology: StreamsTopology
    ) -> ConfiguredTopology | None:
        """The topology configured against the cluster again, when the hash of its
        topics moved or it has not been configured at this epoch; None otherwise."""
        new_hash = metadata_hash(topology, self._topics.topics)
        configured = group.configured_topology
        if (
            new_hash == group.metadata_hash
            and configured is not None
            and configured.topology_epoch == topology.topology_epoch
        ):
            return None
        log.info(
            "[GroupId %s] Configuring the topology at epoch %d",
            group.group_id,
            topology.topology_epoch,
        )
        return configure_topics(topology, new_hash, self.partition_counts())

    def _maybe_reconcile(
        self,
        group: StreamsGroup,
        member: StreamsGroupMember,
        target: TasksTuple,
        owned: TasksTuple | None,
    ) -> StreamsGroupMember:
        if member.is_reconciled_to(group.assignment_epoch):
            return member
        updated = reconcile(group, member, group.assignment_epoch, target, owned)
        if updated != member:
            log.info(
                "[GroupId %s][MemberId %s] Member's new assignment state: epoch=%d, "
                "previousEpoch=%d, state=%s, assignedTasks=%s and tasksPendingRevocation=%s.",
                group.group_id,
                member.member_id,
                updated.member_epoch,
                updated.previous_member_epoch,
                updated.state.name,
                updated.assigned_tasks,
                updated.tasks_pending_revocation,
            )
            self.timeouts.update_rebalance_timeout(
                group.group_id, updated, _owes_revocations(updated)
            )
        return updated

    # ================================================================= leave
    def _leave(self, p: StreamsGroupHeartbeatParams) -> StreamsGroupHeartbeatResult:
        group = self.streams_group(p.group_id)
        if p.shutdown_application:
            group.shutdown_request_member_id = p.member_id
        member = group.get_member(p.member_id)
        log.info(
            "[GroupId %s][MemberId %s] Member %s left the streams group.",
            p.group_id,
            p.member_id,
            p.member_id,
        )
        self._fence_member(group, member)
        return StreamsGroupHeartbeatResult(member_id=p.member_id, member_epoch=p.member_epoch)

    def _fence_member(self, group: StreamsGroup, member: StreamsGroupMember) -> None:
        """Kafka's ``streamsGroupFenceMember``: remove it, bump the group epoch."""
        group.remove_member(member.member_id)
        group.set_group_epoch(group.group_epoch + 1)
        self.timeouts.cancel(group.group_id, member.member_id)

    # ============================================================== timeouts
    def _on_member_timeout(
        self, group_id: str, member_id: str, member_epoch: int | None, reason: str
    ) -> None:
        if self._classic.check_coordinator(group_id) is E.not_coordinator:
            self._drop(group_id, "Dropped (no longer coordinated)")
            return
        member = expired_member(self._groups, group_id, member_id, member_epoch, reason)
        if member is None:
            return
        group = self._groups[group_id]
        before = StreamsGroupView.of(group)
        self._fence_member(group, member)
        self._write(group_id, before)

    # ================================================================ delete
    def delete_group(self, group_id: str) -> ErrorCode | None:
        """DeleteGroups: an Empty streams group is forgotten (None: its offsets are the
        caller's to delete); one with members is NON_EMPTY_GROUP."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        if group.num_members > 0:
            return E.non_empty_group
        before = StreamsGroupView.of(group)
        del self._groups[group_id]
        self._write(group_id, before)
        log.info("[GroupId %s] Deleted.", group_id)
        return None

    def maybe_delete_empty_group(self, group_id: str) -> bool:
        """Kafka's ``maybeDeleteEmptyStreamsGroup``, before a classic JoinGroup: an Empty
        streams group is deleted so that the classic group of its id takes over. False
        when there is none or it has members."""
        group = self._groups.get(group_id)
        if group is None or group.num_members > 0:
            return False
        self.delete_group(group_id)
        log.info("[GroupId %s] Converted the empty streams group to a classic group.", group_id)
        return True

    # ========================================================== offsets checks
    def validate_offset_commit(
        self, group_id: str, member_id: str, member_epoch: int, is_transactional: bool = False
    ) -> ErrorCode | None:
        """Kafka's ``StreamsGroup.validateOffsetCommit`` (None: accepted): epoch -1 while
        the group is empty, or a transactional commit that names nobody."""
        group = self._groups[group_id]
        if member_epoch < 0 and group.num_members == 0:
            return None
        if is_transactional and member_epoch == -1 and member_id == "":
            return None
        member = group.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        if member_epoch != member.member_epoch:
            return E.stale_member_epoch
        return None

    def validate_offset_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode | None:
        group = self._groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return E.unknown_member_id
        if member_epoch != member.member_epoch:
            return E.stale_member_epoch
        return None


def _throw_if_member_epoch_is_invalid(
    member: StreamsGroupMember, p: StreamsGroupHeartbeatParams
) -> None:
    """Kafka's ``throwIfStreamsGroupMemberEpochIsInvalid`` (``member_epochs.py``)."""

    def owns_subset() -> bool:
        owned, assigned = p.owned_tasks(), member.assigned_tasks
        return owned is None or owned.merge(assigned) == assigned

    throw_if_member_epoch_is_invalid(
        "streams", p.member_epoch, member.member_epoch, member.previous_member_epoch, owns_subset
    )


def _owes_revocations(member: StreamsGroupMember) -> bool:
    """The member's rebalance timeout runs (Kafka: UNREVOKED_TASKS)."""
    return member.state is MemberState.UNREVOKED_TASKS


def _stale_topology(
    member: StreamsGroupMember, topology: StreamsTopology
) -> list[tuple[Status, str]]:
    """Kafka's ``maybeSetTopologyStaleStatus``."""
    if member.topology_epoch >= topology.topology_epoch:
        return []
    return [
        (
            Status.STALE_TOPOLOGY,
            f"The member's topology epoch {member.topology_epoch} is behind the group's "
            f"topology epoch {topology.topology_epoch}.",
        )
    ]


def _updated_member(
    member: StreamsGroupMember, p: StreamsGroupHeartbeatParams
) -> StreamsGroupMember:
    """Kafka's ``StreamsGroupMember.Builder`` with the request's ``maybeUpdate*``."""
    return replace(
        member,
        instance_id=None,
        rack_id=p.rack_id if p.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            p.rebalance_timeout_ms if p.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
        ),
        topology_epoch=p.topology.topology_epoch
        if p.topology is not None
        else member.topology_epoch,
        client_id=p.client_id,
        client_host=p.client_host,
        process_id=p.process_id if p.process_id is not None else member.process_id,
        client_tags=p.client_tags if p.client_tags is not None else member.client_tags,
        user_endpoint=p.user_endpoint if p.user_endpoint is not None else member.user_endpoint,
    )


def metadata_hash(topology: StreamsTopology, topics: Mapping[str, ClusterTopic]) -> int:
    """A hash of the topology's topics as the cluster has them (name, id, partition
    count); 0 when none exists. Signed 64 bits, as Kafka's MetadataHash."""
    digest = hashlib.blake2b(digest_size=8)
    found = False
    for name in topology.required_topics():
        topic = topics.get(name)
        if topic is not None:
            found = True
            digest.update(f"{name}\0{topic.topic_id}\0{len(topic.partitions)}\0".encode())
    if not found:
        return 0
    (value,) = struct.unpack(">q", digest.digest())
    return int(value)
