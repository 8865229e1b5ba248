"""Kafka 4's consumer group protocol (KIP-848): the coordinator's model, Kafka's names.

``ConsumerGroupCoordinator`` (``consumer_group_coordinator.py``) serves
ConsumerGroupHeartbeat and ConsumerGroupDescribe for the consumer groups it owns,
beside the classic groups of ``broker/group/``; ``ConsumerGroup`` and
``ConsumerGroupMember`` are the model; ``CurrentAssignmentBuilder`` reconciles a member,
``TargetAssignmentBuilder`` with ``UniformAssignor`` / ``RangeAssignor`` computes the
target; ``CoordinatorTimer`` runs session and rebalance timeouts on the broker's timer;
``consumer_group_records.py`` holds a group's records in ``__consumer_offsets`` (Kafka 4's
formats, key versions 3-8), the records of a change, and their replay on a load.
"""

from broker.group.consumer.consumer_group import (
    ConsumerGroup,
    ConsumerGroupState,
    TopicMetadata,
)
from broker.group.consumer.consumer_group_config import ConsumerGroupConfig
from broker.group.consumer.consumer_group_coordinator import ConsumerGroupCoordinator
from broker.group.consumer.consumer_group_member import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
)
from broker.group.consumer.coordinator_ports import ClassicGroups, TopicsImage
from broker.group.consumer.current_assignment_builder import CurrentAssignmentBuilder
from broker.group.consumer.errors import ApiError
from broker.group.consumer.heartbeat_params import (
    ConsumerGroupHeartbeatParams,
    ConsumerGroupHeartbeatResult,
)
from broker.group.consumer.range_assignor import RangeAssignor
from broker.group.consumer.target_assignment_builder import TargetAssignmentBuilder
from broker.group.consumer.uniform_assignor import UniformAssignor
from broker.group.coordinator_timer import CoordinatorTimer

__all__ = [
    "ApiError",
    "Assignment",
    "ClassicGroups",
    "ConsumerGroup",
    "ConsumerGroupConfig",
    "ConsumerGroupCoordinator",
    "ConsumerGroupHeartbeatParams",
    "ConsumerGroupHeartbeatResult",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "CoordinatorTimer",
    "CurrentAssignmentBuilder",
    "MemberState",
    "RangeAssignor",
    "TargetAssignmentBuilder",
    "TopicMetadata",
    "TopicsImage",
    "UniformAssignor",
]
