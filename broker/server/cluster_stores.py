"""What every broker of the in-process cluster shares, built once and passed whole.

Kafka keeps these in the controller's metadata image (topics, configs, quotas, ACLs, SCRAM
credentials, delegation tokens) and each broker reads its copy; minikafka's brokers share
one process, so they share the stores themselves. ``MiniKafka`` builds one ``ClusterStores``
and hands it to every broker it builds (and builds again at a restart); a broker's builders
take from it what they use. Besides the stores proper it carries what else outlives one
broker: the id source (every random id of the cluster), the fault injector and the request
metrics (kept by broker id, so a restart keeps them), the capture set and the inter-broker
client (how brokers reach each other).

Adding a cluster-wide store: a field here, built in ``MiniKafka`` (and in
``ClusterStores.in_memory``), read by the builder of the package that uses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.cluster.controller import Controller
from broker.cluster.features import FeatureControl
from broker.group.group_configs import GroupConfigStore
from broker.ids import IdSource
from broker.observability.client_telemetry.client_metrics_store import ClientMetricsStore
from broker.observability.metrics import RequestMetrics
from broker.quota.client_quota_store import ClientQuotaStore
from broker.remote.tiered_storage import TieredStorage
from broker.security.authorizer.acl_store import AclStore
from broker.security.delegation_token_manager import DelegationTokenManager
from broker.security.sasl_client import InterBrokerClient
from broker.security.scram_credentials import ScramCredentialStore
from broker.server.dispatch import FaultPolicy

if TYPE_CHECKING:
    from broker.observability.capture import BrokerCapture, CaptureSet


@dataclass(frozen=True, slots=True)
class ClusterStores:
    """The cluster's shared state and sources, one of each for every broker."""

    #: Topics, partitions, brokers, configs: the cluster's metadata (Kafka's image).
    metadata: ClusterMetadata
    #: The in-process controller (leader election, ISR changes, the KRaft quorum).
    controller: Controller
    #: Every random id (cluster, topic and member ids, fetch sessions, directory tags).
    ids: IdSource
    #: What can be failed or delayed per broker (the control endpoint's injector).
    faults: FaultPolicy
    #: The finalized features (KIP-584): ApiVersions reports them, UpdateFeatures moves them.
    features: FeatureControl = field(default_factory=FeatureControl)
    #: KIP-848's GROUP resources (per-group configs).
    group_configs: GroupConfigStore = field(default_factory=GroupConfigStore)
    #: KIP-714's CLIENT_METRICS resources (client telemetry subscriptions).
    client_metrics: ClientMetricsStore = field(default_factory=ClientMetricsStore)
    #: The client quotas (Describe/AlterClientQuotas).
    client_quotas: ClientQuotaStore = field(default_factory=ClientQuotaStore)
    #: The ACLs (CreateAcls/DeleteAcls), read by every broker's authorizer.
    acls: AclStore = field(default_factory=AclStore)
    #: The SCRAM credentials (Describe/AlterUserScramCredentials, SCRAM logins).
    scram_credentials: ScramCredentialStore = field(default_factory=ScramCredentialStore)
    #: The delegation tokens (KIP-48: the token APIs, token logins); None: in memory, off.
    delegation_tokens: DelegationTokenManager | None = None
    #: How brokers reach each other (inter.broker.listener.name): None for PLAINTEXT.
    inter_broker: InterBrokerClient | None = None
    #: Each broker's request metrics by id: they outlive a broker's restart.
    request_metrics: dict[int, RequestMetrics] = field(default_factory=dict)
    #: Every request and delayed-operation event into rolling files; None when off.
    capture: CaptureSet | None = None
    #: The remote tier (KIP-405, broker/remote/); None unless
    #: remote.log.storage.system.enable.
    tiered_storage: TieredStorage | None = None

    @classmethod
    def in_memory(
        cls,
        metadata: ClusterMetadata,
        faults: FaultPolicy,
        controller: Controller | None = None,
        ids: IdSource | None = None,
    ) -> ClusterStores:
        """Fresh stores in memory around ``metadata`` (and its ``controller``, when
        brokers built apart share one): unit tests and the in-process benchmarks."""
        return cls(
            metadata=metadata,
            controller=controller if controller is not None else Controller(metadata),
            ids=ids or IdSource.system(),
            faults=faults,
        )

    def metrics_of(self, broker_id: int) -> RequestMetrics:
        """The broker's request metrics, made at its first start and kept after."""
        return self.request_metrics.setdefault(broker_id, RequestMetrics(broker_id))

    def capture_of(self, broker_id: int) -> BrokerCapture | None:
        """The broker's capture, None when capture is off."""
        return self.capture.for_broker(broker_id) if self.capture is not None else None
