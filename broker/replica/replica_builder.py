"""Builds a broker's replicas for the composition root: what serves and copies the logs.

One table of hosted partitions (Kafka's ``allPartitions``) under three parts: the replica
fetcher manager (the follower side, with the ``quotas.follower`` throttle and the
inter-broker listener it fetches over), the replica manager (the leader side, parking in
the Produce, Fetch and DeleteRecords purgatories) and the log cleaner (compaction of
every hosted ``cleanup.policy=compact`` log); and the fetch manager (Kafka's
``FetchManager`` over its ``FetchSessionCache``: the Fetch handler's incremental fetch
sessions, KIP-227).
"""

from __future__ import annotations

import functools

from broker.log.log_cleaner import CleanerConfig, LogCleaner
from broker.quota.replication_quota_manager import ReplicationQuotas
from broker.remote.remote_log_manager import RemoteLogManager
from broker.remote.tier_state import ReplicaFetcherTierStateMachine
from broker.replica.fetch_session import FetchManager, FetchSessionCache
from broker.replica.leader_endpoint import LeaderEndpoint
from broker.replica.partition import Partition, TopicPartition
from broker.replica.replica_fetcher import ReplicaFetcherManager
from broker.replica.replica_manager import ReplicaManager
from broker.server.broker_options import BrokerOptions
from broker.server.cluster_stores import ClusterStores
from broker.server.purgatories import PurgatorySet


def build_replica_manager(
    options: BrokerOptions, stores: ClusterStores, purgatories: PurgatorySet
) -> ReplicaManager:
    """The replica manager over its fetcher manager, both over one table of hosted
    partitions, sharing one set of replication quotas (Kafka's quotas.leader and
    quotas.follower)."""
    config = options.config
    hosted: dict[TopicPartition, Partition] = {}
    replication_quotas = ReplicationQuotas(
        options.broker_id,
        stores.metadata,
        options.clock,
        config.replication_quota_window_num,
        config.replication_quota_window_size_seconds,
    )
    inter_broker = stores.inter_broker
    tiered = stores.tiered_storage
    # The broker's own cache of __remote_log_metadata (Kafka's RLMM on each broker).
    remote_metadata = tiered.new_metadata_manager() if tiered is not None else None
    fetcher_manager = ReplicaFetcherManager(
        options.broker_id,
        config,
        stores.metadata,
        options.clock,
        hosted,
        leader_endpoint=functools.partial(LeaderEndpoint, security=inter_broker),
        inter_broker_listener=inter_broker.listener_name if inter_broker else "PLAINTEXT",
        replication_quotas=replication_quotas,
        # A simulation's follower: its work on each fetch answer takes modelled time.
        response_work=(
            options.handler_pool.follower_work if options.handler_pool is not None else None
        ),
        tier_state_machine=(
            ReplicaFetcherTierStateMachine(remote_metadata, tiered.storage)
            if tiered is not None and remote_metadata is not None
            else None
        ),
    )
    remote_log_manager = None
    if tiered is not None and remote_metadata is not None:  # KIP-405: the broker's side
        remote_log_manager = RemoteLogManager(
            options.broker_id,
            config,
            stores.metadata,
            options.clock,
            options.request_clock.wall_clock_ms,
            purgatories,
            hosted,
            remote_metadata,
            tiered.storage,
            tiered.model,
            stores.ids,
        )
    return ReplicaManager(
        options.broker_id,
        stores.metadata,
        config,
        options.clock,
        purgatories,
        options.logs,
        stores.controller,
        fetcher_manager,
        options.request_clock.wall_clock_ms,
        replication_quotas=replication_quotas,
        remote_log_manager=remote_log_manager,
    )


def build_log_cleaner(
    options: BrokerOptions, purgatories: PurgatorySet, replica_manager: ReplicaManager
) -> LogCleaner:
    """Kafka's LogCleaner: compacts every hosted replica's cleanup.policy=compact log."""
    return LogCleaner(
        CleanerConfig.from_broker_config(options.config),
        options.clock,
        replica_manager.wall_clock_ms,
        purgatories.scheduler_timer,
        replica_manager.partitions,
        options.broker_id,
    )


def build_fetch_manager(options: BrokerOptions, stores: ClusterStores) -> FetchManager:
    """The Fetch handler's sessions; their ids from the cluster's random source."""
    return FetchManager(
        options.clock,
        FetchSessionCache(
            options.config.max_incremental_fetch_session_cache_slots, rng=stores.ids.rng
        ),
        stores.metadata,
    )
