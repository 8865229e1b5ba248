"""Converting a group between the two protocols while it has members (Kafka 4's online
migration): ``ConsumerGroup.fromClassicGroup`` and ``ClassicGroup.fromConsumerGroup``.

* **Upgrade** (:func:`consumer_group_from_classic`): a classic group of protocol type
  ``consumer`` becomes a consumer group at group epoch = target assignment epoch = its
  generation; each classic member becomes a classic member of the consumer group (its
  JoinGroup protocols and session timeout kept as ``ClassicMemberMetadata``), Stable at
  that epoch, owning what the last SyncGroup gave it (the leader's assignment decoded as
  ConsumerProtocolAssignment), which is also its target assignment. The joining
  KIP-848 member then bumps the group epoch and the classic members give partitions up
  by rejoining.
* **Downgrade** (:func:`classic_members_from_consumer_group`): the members but the one
  leaving become classic members again, each with its target assignment encoded in the
  version of its subscription, and the classic group rebalances
  (``group_coordinator``'s side, ``group_migration.py``).

Where this differs from Kafka: an assignment naming a topic the cluster does not know is
dropped partition by partition, as Kafka's ``topicPartitionMapFromList``; bytes that do
not parse make the conversion fail (None), which the caller answers as Kafka's
GROUP_ID_NOT_FOUND ("the embedded consumer protocol is malformed").
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from broker.cluster.cluster_metadata import TopicInfo
from broker.group.consumer.consumer_group import ConsumerGroup
from broker.group.consumer.consumer_group_member import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from broker.group.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    protocol_version,
)
from broker.group.group_metadata import GroupMetadata


@dataclass(frozen=True)
class ClassicMemberSpec:
    """A member of the classic group a downgrade builds (Kafka's ``ClassicGroupMember``
    made from a ``ConsumerGroupMember``), with its assignment already encoded."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes


def topic_partitions_by_id(
    partitions: Mapping[str, list[int]], topics: Mapping[str, TopicInfo]
) -> dict[uuid.UUID, frozenset[int]]:
    """Topic names to ids; unknown topics dropped (Kafka's ``topicPartitionMapFromList``)."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for name, ps in partitions.items():
        info = topics.get(name)
        if info is not None and ps:
            out[info.topic_id] = out.get(info.topic_id, frozenset()) | frozenset(ps)
    return out


def topic_partitions_by_name(
    assignment: Assignment, topics: Mapping[str, TopicInfo]
) -> dict[str, list[int]]:
    """Topic ids back to names; ids the cluster no longer knows are dropped."""
    names = {info.topic_id: name for name, info in topics.items()}
    return {
        names[topic_id]: sorted(ps)
        for topic_id, ps in assignment.items()
        if topic_id in names and ps
    }


def consumer_group_from_classic(
    classic: GroupMetadata, topics: Mapping[str, TopicInfo]
) -> ConsumerGroup | None:
    """Kafka's ``ConsumerGroup.fromClassicGroup``; None when a member's embedded consumer
    protocol does not parse."""
    group = ConsumerGroup(classic.group_id)
    epoch = classic.generation_id
    group.group_epoch = epoch
    protocol = classic.protocol_name
    targets: dict[str, Assignment] = {}
    for m in classic.all_member_metadata:
        metadata = m.metadata(protocol) if protocol else m.supported_protocols[0][1]
        subscription = decode_subscription(metadata)
        assignment = decode_assignment(m.assignment)
        if subscription is None or assignment is None:
            return None
        partitions = topic_partitions_by_id(assignment, topics)
        targets[m.member_id] = partitions
        group.update_member(
            ConsumerGroupMember(
                member_id=m.member_id,
                member_epoch=epoch,
                previous_member_epoch=epoch,
                state=MemberState.STABLE,
                instance_id=m.group_instance_id,
                rack_id=subscription.rack_id,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(set(subscription.topics))),
                assigned_partitions=partitions,
                classic_member_metadata=ClassicMemberMetadata(
                    m.session_timeout_ms, tuple(m.supported_protocols)
                ),
            )
        )
    group.set_target_assignment(epoch, targets)
    return group


def classic_members_from_consumer_group(
    group: ConsumerGroup, leaving_member_id: str, topics: Mapping[str, TopicInfo]
) -> list[ClassicMemberSpec]:
    """The classic members of Kafka's ``ClassicGroup.fromConsumerGroup``: every member
    but ``leaving_member_id`` (all classic members), with its target assignment."""
    specs: list[ClassicMemberSpec] = []
    for member in group.members.values():
        classic = member.classic_member_metadata
        if member.member_id == leaving_member_id or classic is None:
            continue
        version = protocol_version(classic.supported_protocols[0][1])
        assignment = topic_partitions_by_name(group.target_assignment_of(member.member_id), topics)
        specs.append(
            ClassicMemberSpec(
                member_id=member.member_id,
                group_instance_id=member.instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                session_timeout_ms=classic.session_timeout_ms,
                supported_protocols=classic.supported_protocols,
                assignment=encode_assignment(assignment, version),
            )
        )
    return specs
