"""Builds a broker's share-group parts (KIP-932) for the composition root.

``build_share`` makes them all: the share coordinator (the durable share-partition state
in ``__share_group_state``), the persister the share partitions reach it through
(Read/WriteShareGroupState requests to the coordinator's broker over TCP, or — a broker
that never listens — calls on its own), and what ``build_share_groups`` makes: the
``SharePartitionManager`` (its share partitions' locks
on the share lock timer, DelayedShareFetch in the ShareFetch purgatory, the share session
cache of ``group.share.max.share.sessions``, the persister of their durable state) and
the ``ShareGroupCoordinator`` (session timeouts on the scheduler timer; a member fenced
by its session timeout has its share session closed and its records released), and the
share groups' dead-letter queue (``dlq/``, Kafka 4.4's KIP-1191: Produce and CreateTopics
over ``BrokerChannels``; none on a broker that never listens). A group id that is already
a consumer group or a classic group with members is refused to share-group members.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.config.broker_config import BrokerConfig
from broker.group.consumer import ConsumerGroupCoordinator
from broker.group.group_builder import GroupCoordinators
from broker.group.group_metadata_manager import GroupMetadataManager
from broker.group.share import ShareGroupConfig, ShareGroupCoordinator
from broker.replica.replica_manager import ReplicaManager
from broker.server.broker_options import BrokerOptions
from broker.server.cluster_stores import ClusterStores
from broker.server.purgatories import PurgatorySet
from broker.share.broker_channels import BrokerChannels
from broker.share.dlq.dlq_manager import DLQConfig, ShareGroupDLQManager
from broker.share.network_persister import NetworkStatePersister
from broker.share.persister import (
    InProcessStatePersister,
    PersisterStateManager,
    StatePersister,
)
from broker.share.share_partition import SharePartitionConfig
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_session import ShareSessionCache
from broker.share_coordinator.share_coordinator import ShareCoordinator, build_share_coordinator
from purgatory import Clock


@dataclass(frozen=True, slots=True)
class ShareParts:
    """A broker's KIP-932 parts: durable state, its persister, membership, partitions."""

    coordinator: ShareCoordinator
    persister: PersisterStateManager
    group_coordinator: ShareGroupCoordinator
    partition_manager: SharePartitionManager
    dead_letters: ShareGroupDLQManager


def build_share(
    options: BrokerOptions,
    stores: ClusterStores,
    purgatories: PurgatorySet,
    replica_manager: ReplicaManager,
    groups: GroupCoordinators,
) -> ShareParts:
    """The share coordinator, its persister, then the share groups over them."""
    broker_id = options.broker_id
    share_coordinator = build_share_coordinator(
        broker_id,
        options.config,
        stores.metadata,
        replica_manager,
        options.clock,
        options.load_scheduler(),
    )
    persister: PersisterStateManager
    channels: BrokerChannels | None = None
    if options.in_process_share_state:
        persister = InProcessStatePersister(
            share_coordinator,
            lambda b: share_coordinator if b == broker_id else None,
            purgatories.scheduler_timer,
        )
    else:
        persister = NetworkStatePersister(
            broker_id,
            share_coordinator,
            stores.metadata,
            purgatories.scheduler_timer,
            stores.inter_broker,
        )
        channels = BrokerChannels(f"share-dlq-{broker_id}", stores.metadata, stores.inter_broker)
    config = options.config
    dead_letters = ShareGroupDLQManager(
        broker_id,
        DLQConfig(
            config.errors_deadletterqueue_auto_create_topics_enable,
            config.errors_deadletterqueue_topic_name_prefix,
        ),
        stores.metadata,
        stores.features,
        groups.consumer_group.group_configs,
        replica_manager,
        purgatories.scheduler_timer,
        channels,
    )
    share_group_coordinator, share_partition_manager = build_share_groups(
        options.config,
        options.clock,
        stores.metadata,
        replica_manager,
        purgatories,
        groups.group_metadata_manager,
        groups.consumer_group,
        persister,
        dead_letters,
    )
    groups.group.attach_share_groups(share_group_coordinator)
    return ShareParts(
        share_coordinator, persister, share_group_coordinator, share_partition_manager, dead_letters
    )


def build_share_groups(
    config: BrokerConfig,
    clock: Clock,
    metadata: ClusterMetadata,
    replica_manager: ReplicaManager,
    purgatories: PurgatorySet,
    group_metadata_manager: GroupMetadataManager,
    consumer_group_coordinator: ConsumerGroupCoordinator,
    persister: StatePersister | None = None,
    dead_letters: ShareGroupDLQManager | None = None,
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
        # share.auto.offset.reset, share.isolation.level, ...: GROUP configs, in the
        # cluster's group config store
        group_configs=consumer_group_coordinator.group_configs,
        dead_letters=dead_letters,
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
        partition_for=group_metadata_manager.partition_for,
    )
    return coordinator, manager


def _close(manager: SharePartitionManager, group_id: str, member_id: str) -> None:
    manager.close_session((group_id, member_id))
