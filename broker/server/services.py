"""What a handler may use besides its request: the parts of a broker handlers ask.

The composition root (``broker/app.py``) builds every part whole and hands this to the
dispatcher, which puts it in each ``RequestContext``. Each field is a part some handler
uses (``grep 'services\\.' broker/handlers``): the broker's id, config and clock, the
cluster metadata, the replica manager with the fetch sessions (KIP-227) and the share
partitions it serves (KIP-932), the coordinators (``Coordinators``), the client quota
managers, the security parts (``BrokerSecurity``: the authorizer, the cluster's ACLs and
SCRAM credentials), the versions the broker serves, the cache of its encoded
ApiVersions and Metadata answers, and client telemetry's manager (when on). Not the
listener, not the other brokers, not the
control endpoint, not the purgatories (a handler parks through the part that owns one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.cluster.cluster_metadata import ClusterMetadata, TopicInfo
from broker.cluster.features import FeatureControl
from broker.config.broker_config import BrokerConfig
from broker.group.consumer import ConsumerGroupCoordinator
from broker.group.group_coordinator import GroupCoordinator
from broker.group.group_metadata_manager import GroupMetadataManager
from broker.group.share import ShareGroupCoordinator
from broker.group.streams.streams_group_coordinator import StreamsGroupCoordinator
from broker.observability.client_telemetry.client_metrics_store import ClientMetricsStore
from broker.observability.client_telemetry.client_telemetry_builder import ClientTelemetry
from broker.quota.quota_managers import QuotaManagers
from broker.replica.fetch_session import FetchManager
from broker.replica.replica_manager import ReplicaManager
from broker.security.broker_security import BrokerSecurity
from broker.server.response_cache import ResponseCache
from broker.share.share_partition_manager import SharePartitionManager
from broker.share_coordinator.share_coordinator import ShareCoordinator
from broker.txn.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from broker.txn.transaction_coordinator import TransactionCoordinator
from protocol.api_registry import ApiSpec
from purgatory import Clock


@dataclass(frozen=True, slots=True)
class Coordinators:
    """The broker's coordinators, as ``KafkaApis`` holds them (Kafka names kept).

    ``group`` runs classic groups' membership and rebalances over
    ``group_metadata_manager`` (groups, offsets and coordinator placement in
    ``__consumer_offsets``); ``consumer_group`` is KIP-848's consumer groups,
    ``share_group`` KIP-932's share-group membership, ``streams_group`` KIP-1071's
    streams groups, ``txn`` the transaction
    coordinator, ``share`` KIP-932's share coordinator (durable share-partition state,
    APIs 83-87).
    """

    group: GroupCoordinator
    group_metadata_manager: GroupMetadataManager
    consumer_group: ConsumerGroupCoordinator
    share_group: ShareGroupCoordinator
    streams_group: StreamsGroupCoordinator
    txn: TransactionCoordinator
    share: ShareCoordinator


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """The parts of one broker its handlers use (``ctx.services``)."""

    broker_id: int
    config: BrokerConfig
    clock: Clock
    metadata: ClusterMetadata
    #: The cluster's finalized features (ApiVersions, UpdateFeatures, what they gate).
    features: FeatureControl
    replica_manager: ReplicaManager
    #: Kafka's FetchManager over its FetchSessionCache: the Fetch handler's sessions.
    fetch_manager: FetchManager
    #: The share partitions this broker leads (KIP-932): ShareFetch, ShareAcknowledge.
    share_partition_manager: SharePartitionManager
    #: How a Produce v12+ / TxnOffsetCommit v5+ adds its partitions to the transaction.
    add_partitions_to_txn_manager: AddPartitionsToTxnManager
    coordinators: Coordinators
    #: The client quota managers and the cluster's quotas (``broker/quota/``).
    quota_managers: QuotaManagers
    security: BrokerSecurity
    api_specs: tuple[ApiSpec, ...]
    response_cache: ResponseCache
    #: The cluster's client-metrics subscriptions (KIP-714's CLIENT_METRICS resources).
    client_metrics: ClientMetricsStore = field(default_factory=ClientMetricsStore)
    #: Client telemetry (KIP-714, APIs 71 and 72); None while the receiver is off.
    client_telemetry: ClientTelemetry | None = None

    def auto_create_topic(self, name: str) -> TopicInfo:
        """Create a topic with the broker's defaults (``auto.create.topics.enable``)."""
        alive = len(self.metadata.alive_brokers())
        return self.metadata.create_topic(
            name,
            self.config.num_partitions,
            min(self.config.default_replication_factor, max(alive, 1)),
            {},
        )
