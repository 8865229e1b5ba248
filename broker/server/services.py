"""What a handler may use besides its request: a small, typed set of a broker's parts.

The composition root (``broker/app.py``) builds every part whole and hands this to the
dispatcher, which puts it in each ``RequestContext``. A handler sees its broker's id and
config, the shared cluster metadata, the replica manager, the group coordinator and its
group metadata manager (Kafka's pair: membership and rebalances; groups, offsets and
coordinator placement), the consumer group coordinator (KIP-848's groups), the share
group coordinator and the share partition manager (KIP-932), the transaction coordinator,
the client quota managers (and through them the cluster's quotas), the fetch manager (its
incremental fetch sessions, KIP-227), the authorizer and the cluster's ACLs, the versions
the broker serves, the cache of its encoded ApiVersions and Metadata answers, and nothing
else: not the listener, not the other brokers, not the control endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.cluster.cluster_metadata import ClusterMetadata, TopicInfo
from broker.config.broker_config import BrokerConfig
from broker.group.consumer import ConsumerGroupCoordinator
from broker.group.group_coordinator import GroupCoordinator
from broker.group.group_metadata_manager import GroupMetadataManager
from broker.group.share import ShareGroupCoordinator
from broker.replica.fetch_session import FetchManager
from broker.replica.replica_manager import ReplicaManager
from broker.security.authorizer.acl_store import AclStore
from broker.security.authorizer.standard_authorizer import StandardAuthorizer
from broker.security.scram_credentials import ScramCredentialStore
from broker.server.response_cache import ResponseCache
from broker.share.share_partition_manager import SharePartitionManager
from broker.share_coordinator.share_coordinator import ShareCoordinator
from broker.txn.transaction_coordinator import TransactionCoordinator
from protocol.api_registry import ApiSpec
from purgatory import Clock

if TYPE_CHECKING:
    from broker.quota.quota_managers import QuotaManagers


@dataclass(frozen=True, slots=True)
class BrokerServices:
    broker_id: int
    config: BrokerConfig
    clock: Clock
    metadata: ClusterMetadata
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    group_metadata_manager: GroupMetadataManager
    consumer_group_coordinator: ConsumerGroupCoordinator
    txn_coordinator: TransactionCoordinator
    fetch_manager: FetchManager
    api_specs: tuple[ApiSpec, ...]
    response_cache: ResponseCache
    # share groups (KIP-932): membership, and the share partitions this broker leads
    share_group_coordinator: ShareGroupCoordinator
    share_partition_manager: SharePartitionManager
    # the share coordinator (KIP-932): durable share-partition state, APIs 83-87
    share_coordinator: ShareCoordinator
    #: The client quota managers and the cluster's quotas (``broker/quota/``).
    quota_managers: QuotaManagers | None = None
    # The cluster's SCRAM credentials (Describe/AlterUserScramCredentials, SCRAM logins).
    scram_credentials: ScramCredentialStore = field(default_factory=ScramCredentialStore)
    #: Kafka's StandardAuthorizer when ``authorizer.class.name`` names it, else None
    #: (everything allowed); the cluster's ACLs it reads (the ACL APIs change them).
    authorizer: StandardAuthorizer | None = None
    acl_store: AclStore = field(default_factory=AclStore)

    def auto_create_topic(self, name: str) -> TopicInfo:
        """Create a topic with the broker's defaults (``auto.create.topics.enable``)."""
        alive = len(self.metadata.alive_brokers())
        return self.metadata.create_topic(
            name,
            self.config.num_partitions,
            min(self.config.default_replication_factor, max(alive, 1)),
            {},
        )
