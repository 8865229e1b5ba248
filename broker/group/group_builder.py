"""Builds a broker's group coordinators for the composition root.

Kafka's pair for classic groups — the ``GroupMetadataManager`` (groups, offsets and
coordinator placement, over ``__consumer_offsets`` through the replica manager, loading
its partitions on the coordinator load scheduler) and the ``GroupCoordinator``
(membership and rebalances, in the Heartbeat and Rebalance purgatories) — and Kafka 4's
consumer groups (KIP-848) and streams groups (KIP-1071) beside them, over the same
manager. Share-group membership
(KIP-932) is built with the share partitions it closes sessions of
(``broker/share/share_components.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from broker.group.group_config import GroupConfig, OffsetConfig
from broker.group.group_configs import GroupConfigManager
from broker.group.group_coordinator import GroupCoordinator
from broker.group.group_log import offsets_topic_log
from broker.group.group_metadata_manager import GroupMetadataManager
from broker.group.share.share_group_config import ShareGroupConfig
from broker.group.streams.streams_group_config import StreamsGroupConfig
from broker.group.streams.streams_group_coordinator import StreamsGroupCoordinator
from broker.replica.replica_manager import ReplicaManager
from broker.server.broker_options import BrokerOptions
from broker.server.cluster_stores import ClusterStores
from broker.server.purgatories import PurgatorySet


@dataclass(frozen=True, slots=True)
class GroupCoordinators:
    """Classic groups (``group`` over ``group_metadata_manager``) and KIP-848's."""

    group: GroupCoordinator
    group_metadata_manager: GroupMetadataManager
    consumer_group: ConsumerGroupCoordinator
    streams_group: StreamsGroupCoordinator


def build_group_coordinators(
    options: BrokerOptions,
    stores: ClusterStores,
    purgatories: PurgatorySet,
    replica_manager: ReplicaManager,
) -> GroupCoordinators:
    """The group metadata manager, the consumer group coordinator and the classic group
    coordinator, in that order (each is built over the one before)."""
    config = options.config
    offset_config = OffsetConfig.from_broker_config(config)
    group_metadata_manager = GroupMetadataManager(
        options.broker_id,
        offset_config,
        options.clock,
        stores.metadata,
        offsets_topic_log(
            replica_manager,
            options.clock,
            offset_config.offsets_commit_timeout_ms,
            offset_config.offsets_commit_required_acks,
            offset_config.offsets_load_buffer_size,
        ),
        purgatories.scheduler_timer,
        # Kafka's group-metadata-manager scheduler thread: loads in slices on the loop.
        load_scheduler=options.load_scheduler(),
        uuid_factory=stores.ids.member_id,
    )
    # Per-group configs (GROUP resources): the cluster's store, this broker's bounds.
    group_configs = GroupConfigManager(
        stores.group_configs,
        ConsumerGroupConfig.from_broker_config(config),
        ShareGroupConfig.from_broker_config(config),
        StreamsGroupConfig.from_broker_config(config),
    )
    # Kafka 4's consumer groups (KIP-848) beside the classic ones: timeouts on the
    # scheduler timer, the assignor's topics from the metadata, the classic groups asked
    # only whether an id is taken; v0 member ids generated here (the random source).
    consumer_group_coordinator = ConsumerGroupCoordinator(
        ConsumerGroupConfig.from_broker_config(config),
        purgatories.scheduler_timer,
        stores.metadata,
        group_metadata_manager,
        member_id_factory=stores.ids.member_id,
        group_configs=group_configs,
    )
    # Streams groups (KIP-1071): the same timer, topics, write path and GROUP configs.
    streams_group_coordinator = StreamsGroupCoordinator(
        StreamsGroupConfig.from_broker_config(config),
        purgatories.scheduler_timer,
        stores.metadata,
        group_metadata_manager,
        consumer_group_coordinator,
        group_configs,
    )
    group_coordinator = GroupCoordinator(
        GroupConfig.from_broker_config(config),
        purgatories.heartbeat,
        purgatories.rebalance,
        group_metadata_manager,
        consumer_group_coordinator,
        streams_group_coordinator,
    )
    return GroupCoordinators(
        group_coordinator,
        group_metadata_manager,
        consumer_group_coordinator,
        streams_group_coordinator,
    )
