"""The assignment side of a heartbeat (Kafka's ``updateTargetAssignment`` and
``maybeReconcile``): the subscribed topics' metadata the assignor sees, the group's
preferred assignor, a new target assignment, and one reconciliation step of a member.

Pure functions over a ``ConsumerGroup``; scheduling the rebalance timeout of a member
asked to revoke stays with the coordinator.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from broker.cluster.cluster_metadata import TopicInfo
from broker.group.consumer.consumer_group import ConsumerGroup, TopicMetadata
from broker.group.consumer.consumer_group_member import ConsumerGroupMember
from broker.group.consumer.current_assignment_builder import (
    CurrentAssignmentBuilder,
    OwnedTopicPartitions,
)
from broker.group.consumer.partition_assignor import ConsumerGroupPartitionAssignor
from broker.group.consumer.target_assignment_builder import TargetAssignmentBuilder

log = logging.getLogger("broker.group.consumer")


def subscription_metadata(
    topics: Mapping[str, TopicInfo], names: Iterable[str]
) -> dict[str, TopicMetadata]:
    """The subscribed topics that exist, with their ids and partition counts."""
    metadata: dict[str, TopicMetadata] = {}
    for name in sorted(names):
        info = topics.get(name)
        if info is not None and info.partitions:
            metadata[name] = TopicMetadata(info.topic_id, name, len(info.partitions))
    return metadata


def assignor_for(group: ConsumerGroup, updated: ConsumerGroupMember, default: str) -> str:
    """The group's preferred assignor, counting the updated member's choice."""
    members = dict(group.members)
    members[updated.member_id] = updated
    probe = ConsumerGroup(group.group_id)
    probe.members = members
    return probe.preferred_server_assignor(default)


def update_target_assignment(
    group: ConsumerGroup,
    group_epoch: int,
    updated: ConsumerGroupMember,
    assignor: ConsumerGroupPartitionAssignor,
    metadata: Mapping[str, TopicMetadata],
) -> None:
    """A new target assignment at ``group_epoch`` (with ``updated`` in the group)."""
    target = (
        TargetAssignmentBuilder(group, assignor, metadata, group.resolved_regexes)
        .add_or_update_member(updated)
        .build()
    )
    group.set_target_assignment(group_epoch, target)


def reconcile(
    group: ConsumerGroup, member: ConsumerGroupMember, owned: OwnedTopicPartitions | None
) -> ConsumerGroupMember:
    """One step of ``member`` towards its target assignment (itself when reconciled)."""
    epoch = group.assignment_epoch
    if member.is_reconciled_to(epoch):
        return member
    updated = CurrentAssignmentBuilder(
        member,
        epoch,
        group.target_assignment_of(member.member_id),
        group.current_partition_epoch,
        owned,
    ).build()
    if updated != member:
        log.debug(
            "[GroupId %s] Member %s new assignment state: epoch=%d, previousEpoch=%d, "
            "state=%s, assignedPartitions=%s and revokedPartitions=%s.",
            group.group_id,
            updated.member_id,
            updated.member_epoch,
            updated.previous_member_epoch,
            updated.state,
            dict(updated.assigned_partitions),
            dict(updated.partitions_pending_revocation),
        )
    return updated
