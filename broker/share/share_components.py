"""Builds a broker's share-group parts (KIP-932) for the composition root.

``build_share_groups`` makes the ``SharePartitionManager`` (its share partitions' locks
on the share lock timer, DelayedShareFetch in the ShareFetch purgatory, the share session
cache of ``group.share.max.share.sessions``, the persister of their durable state) and
the ``ShareGroupCoordinator`` (session timeouts on the scheduler timer; a member fenced
by its session timeout has its share session closed and its records released). A group
id that is already a consumer group or a classic group with members is refused to
share-group members.
"""

from __future__ import annotations

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.config.broker_config import BrokerConfig
from broker.group.consumer import ConsumerGroupCoordinator
from broker.group.group_metadata_manager import GroupMetadataManager
from broker.group.share import ShareGroupConfig, ShareGroupCoordinator
from broker.replica.replica_manager import ReplicaManager
from broker.server.purgatories import PurgatorySet
from broker.share.persister import StatePersister
from broker.share.share_partition import SharePartitionConfig
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_session import ShareSessionCache
from purgatory import Clock


def build_share_groups(
    config: BrokerConfig,
    clock: Clock,
    metadata: ClusterMetadata,
    replica_manager: ReplicaManager,
    purgatories: PurgatorySet,
    group_metadata_manager: GroupMetadataManager,
    consumer_group_coordinator: ConsumerGroupCoordinator,
    persister: StatePersister | None = None,
) -> tuple[ShareGroupCoordinator, SharePartitionManager]:
    share_config = ShareGroupConfig.from_broker_config(config)
    manager = SharePartitionManager(
        SharePartitionConfig(
            record_lock_duration_ms=share_config.group_share_record_lock_duration_ms,
            delivery_count_limit=share_config.group_share_delivery_count_limit,
            max_record_locks=share_config.group_share_partition_max_record_locks,
        ),
        clock,
        metadata,
        replica_manager,
        purgatories.share_fetch,
        purgatories.share_lock_timer,
        ShareSessionCache(share_config.group_share_max_share_sessions),
        persister,
        # share.auto.offset.reset: a GROUP config, in the cluster's group config store
        auto_offset_reset=consumer_group_coordinator.group_configs.share_auto_offset_reset,
    )

    def other_group_exists(group_id: str) -> bool:
        if consumer_group_coordinator.group(group_id) is not None:
            return True
        classic = group_metadata_manager.get_group(group_id)
        return classic is not None and classic.size > 0

    coordinator = ShareGroupCoordinator(
        share_config,
        purgatories.scheduler_timer,
        metadata,
        other_group_exists=other_group_exists,
        on_member_expired=lambda group_id, member_id: _close(manager, group_id, member_id),
    )
    return coordinator, manager


def _close(manager: SharePartitionManager, group_id: str, member_id: str) -> None:
    manager.close_session((group_id, member_id))
