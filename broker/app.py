"""The composition root: builds the cluster's parts, starts and stops them in order.

Nothing in the broker reaches for a global: the clock, the shared stores, each broker's
purgatories, logs and coordinators are made here and passed down. What every broker
shares is built once (``ClusterStores``); what differs per broker is one value
(``BrokerOptions``); each package builds its own parts (``build_replica_manager``,
``build_group_coordinators``, ``build_share``, ...), and ``build_broker`` is the list of
those calls in the order of dependence. Tests use the same entry point (``MiniKafka``) as
the command line, on port 0.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from broker import buggify
from broker.buggify import Buggify
from broker.cluster.cluster_metadata import ClusterMetadata
from broker.cluster.controller import Controller
from broker.cluster.features import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    TRANSACTION_VERSION,
    FeatureControl,
    bootstrap_levels,
)
from broker.cluster.kraft_quorum import KRaftQuorum, parse_quorum_voters
from broker.config.broker_config import BrokerConfig, replayable_configs
from broker.control.faults import FaultInjector
from broker.control.hosting import ControlEndpoint
from broker.coordinator.coordinator_loader import EventLoopLoadScheduler, LoadScheduler
from broker.group.group_builder import build_group_coordinators
from broker.group.group_configs import GroupConfigStore
from broker.handlers.base import ApiHandler
from broker.handlers.registry import api_specs, broker_registry
from broker.ids import IdSource
from broker.log import LogManager
from broker.log.memory_log import MemoryLog
from broker.observability.client_telemetry.client_metrics_store import ClientMetricsStore
from broker.observability.client_telemetry.client_telemetry_builder import (
    build_client_telemetry,
)
from broker.quota.client_quota_store import ClientQuotaStore
from broker.quota.quota_managers import build_quota_managers
from broker.remote.remote_log_metadata_manager import RemoteLogMetadataManager
from broker.remote.storage_model import RemoteStorageModel
from broker.remote.tiered_storage import TieredStorage
from broker.replica.replica_builder import (
    build_fetch_manager,
    build_log_cleaner,
    build_replica_manager,
)
from broker.replica.replica_fetcher import ReplicaFetcherManager
from broker.replica.replica_manager import ReplicaManager
from broker.replica.replication_faults import ReplicationFaults
from broker.security.authorizer.acl_store import AclStore
from broker.security.broker_security import build_security
from broker.security.delegation_token_manager import (
    DelegationTokenExpiry,
    DelegationTokenManager,
)
from broker.security.delegation_token_store import DelegationTokenStore
from broker.security.listeners import ChannelBuilder, inter_broker_client, security_listeners
from broker.security.scram_credentials import ScramCredentialStore
from broker.server.broker_options import BrokerOptions
from broker.server.broker_server import Broker, Component
from broker.server.cluster_stores import ClusterStores
from broker.server.dispatch import FaultPolicy, HandlerPool, RequestObserver
from broker.server.purgatories import PurgatorySet
from broker.server.request_timing import RequestClock
from broker.server.response_cache import ResponseCache
from broker.server.server_builder import build_dispatcher, build_server
from broker.server.services import BrokerServices, Coordinators
from broker.share.share_components import build_share
from broker.txn.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from broker.txn.transaction_coordinator import build_transaction_coordinator
from purgatory import Clock, LoopClock

if TYPE_CHECKING:
    from broker.observability.capture import CaptureSet
    from broker.observability.metrics import RequestMetrics


def build_broker(options: BrokerOptions, stores: ClusterStores) -> Broker:
    """Build one broker whole: every part gets exactly what it uses, at construction.

    The order is the order of dependence: the purgatories (with capture's listeners);
    the replicas (fetchers and replica manager over one table of hosted partitions, the
    log cleaner over it); the group coordinators over the replica manager (their
    ``__consumer_offsets``); the transaction coordinator (``__transaction_state`` and its
    marker channel); the share parts (``__share_group_state``, the persister, share
    groups and partitions); the quota managers, the security parts and client telemetry
    (when on); the services handlers see, the dispatcher, and the broker that starts
    them all.
    """
    capture = stores.capture_of(options.broker_id)
    purgatories = PurgatorySet(
        options.clock,
        options.config,
        capture.purgatory_listeners() if capture is not None else None,
    )
    replica_manager = build_replica_manager(options, stores, purgatories)
    log_cleaner = build_log_cleaner(options, purgatories, replica_manager)
    groups = build_group_coordinators(options, stores, purgatories, replica_manager)
    txn_coordinator = build_transaction_coordinator(
        options.broker_id,
        options.config,
        options.clock,
        stores.metadata,
        replica_manager,
        purgatories.scheduler_timer,
        options.load_scheduler(),
        stores.inter_broker,
        lambda: stores.features.level(TRANSACTION_VERSION),
    )
    add_partitions_to_txn = AddPartitionsToTxnManager(
        options.broker_id,
        stores.metadata,
        txn_coordinator.coordinator_endpoint,
        stores.inter_broker,
    )
    share = build_share(options, stores, purgatories, replica_manager, groups)
    handlers = (
        options.handlers
        if options.handlers is not None
        else broker_registry(options.config.client_telemetry_enabled)
    )
    quotas = build_quota_managers(options.config, options.clock, stores.client_quotas)
    client_telemetry = build_client_telemetry(
        options.config,
        options.clock,
        stores.client_metrics,
        stores.ids,
        (capture,) if capture is not None else (),
    )
    services = BrokerServices(
        broker_id=options.broker_id,
        config=options.config,
        clock=options.clock,
        metadata=stores.metadata,
        features=stores.features,
        replica_manager=replica_manager,
        fetch_manager=build_fetch_manager(options, stores),
        share_partition_manager=share.partition_manager,
        add_partitions_to_txn_manager=add_partitions_to_txn,
        coordinators=Coordinators(
            group=groups.group,
            group_metadata_manager=groups.group_metadata_manager,
            consumer_group=groups.consumer_group,
            share_group=share.group_coordinator,
            streams_group=groups.streams_group,
            txn=txn_coordinator,
            share=share.coordinator,
        ),
        quota_managers=quotas,
        security=build_security(
            options.config, stores.acls, stores.scram_credentials, stores.delegation_tokens
        ),
        api_specs=api_specs(handlers),
        response_cache=ResponseCache(stores.metadata),
        client_metrics=stores.client_metrics,
        client_telemetry=client_telemetry,
    )
    dispatcher = build_dispatcher(options, stores, handlers, services, purgatories)
    components: tuple[Component, ...] = (
        replica_manager,
        log_cleaner,
        groups.group,
        txn_coordinator,
        add_partitions_to_txn,
        share.coordinator,
        share.persister,
        share.dead_letters,
        quotas,
        *token_expiry(options.config, stores.delegation_tokens, purgatories),
    )
    return build_server(options, stores, dispatcher, purgatories, components)


def token_expiry(
    config: BrokerConfig, tokens: DelegationTokenManager | None, purgatories: PurgatorySet
) -> tuple[Component, ...]:
    """The sweep of expired delegation tokens, when tokens are on (none otherwise, so a
    cluster without them schedules nothing more)."""
    if tokens is None or not tokens.enabled:
        return ()
    interval = config.delegation_token_expiry_check_interval_ms
    return (DelegationTokenExpiry(purgatories.scheduler_timer, tokens, interval),)


def fault_injector(handlers: Mapping[int, ApiHandler]) -> FaultInjector:
    """The injector for these handlers: each may be failed, and limited to a topic(-
    partition) where its requests name topics."""
    return FaultInjector(
        frozenset(handlers), frozenset(k for k, h in handlers.items() if h.topic_partitions)
    )


def build_standalone_broker(
    clock: Clock,
    *,
    config: BrokerConfig | None = None,
    faults: FaultPolicy | None = None,
    handlers: Mapping[int, ApiHandler] | None = None,
    port: int = 9092,
    load_scheduler: Callable[[], LoadScheduler] = EventLoopLoadScheduler,
) -> Broker:
    """Broker 0 of a cluster of its own (registered at 127.0.0.1:``port``, never
    listening unless started), logs in memory: for what drives a dispatcher without
    sockets — unit tests on a ``ManualClock`` and the in-process benchmarks."""
    metadata = ClusterMetadata()
    metadata.register_broker(0, "127.0.0.1", port)
    config = config if config is not None else BrokerConfig.model_validate({})
    return build_broker(
        BrokerOptions(
            broker_id=0,
            config=config,
            clock=clock,
            logs=LogManager(None),
            port=port,
            handlers=handlers,
            load_scheduler=load_scheduler,
            in_process_share_state=True,  # it never listens: the share state stays in-process
        ),
        ClusterStores.in_memory(
            metadata,
            faults
            if faults is not None
            else fault_injector(handlers or broker_registry(config.client_telemetry_enabled)),
        ),
    )


class ClusterOptions(TypedDict, total=False):
    """``MiniKafka``'s keyword arguments: the in-process cluster's shape and hooks.

    ``brokers`` (1), ``host`` (127.0.0.1), ``port`` (0: ephemeral; else broker N listens
    on port + N), ``data_dir`` (None: logs in memory; else durable, as is every store),
    ``advertised_host`` (what Metadata tells clients; by default ``host``),
    ``control_port``/``control_host``/``control_token`` (the control endpoint; off without
    a port; a token is made when none is given),
    ``capture_dir`` (capture of every request; off when None), ``observers`` (told of
    every request of every broker), and what a simulation replaces: ``request_clock``
    (the clocks requests are timed with), ``handler_pools`` (a broker's request handlers
    in virtual time, by id and config), ``load_scheduler`` (what each coordinator loads
    its partitions on; tests may hold loads), ``ids`` (every random id of the cluster),
    ``broker_clocks`` (broker N's clock and request clock: the loop's and
    ``request_clock`` by default; a simulation skews one broker's) and ``buggify`` (the
    simulation's BUGGIFY points, installed while the cluster runs: `broker.buggify`).
    """

    brokers: int
    host: str
    port: int
    data_dir: Path | None
    control_port: int | None
    control_host: str
    control_token: str | None
    capture_dir: Path | None
    advertised_host: str | None
    observers: Sequence[RequestObserver]
    load_scheduler: Callable[[], LoadScheduler]
    request_clock: RequestClock | None
    handler_pools: Callable[[int, BrokerConfig], HandlerPool] | None
    ids: IdSource | None
    broker_clocks: Callable[[int], tuple[Clock, RequestClock]] | None
    buggify: Buggify | None


class MiniKafka:
    """N brokers in one process sharing one cluster's stores (``ClusterStores``)."""

    def __init__(
        self, config: BrokerConfig | None = None, **options: Unpack[ClusterOptions]
    ) -> None:
        for name in options.keys() - ClusterOptions.__optional_keys__:  # as a named argument
            raise TypeError(f"MiniKafka.__init__() got an unexpected keyword argument {name!r}")
        brokers = options.get("brokers", 1)
        if brokers < 1:
            raise ValueError("--brokers must be at least 1")
        self.config = config or BrokerConfig.model_validate({})
        self.num_brokers = brokers
        self.host = options.get("host", "127.0.0.1")
        # What Metadata tells clients (Kafka's advertised.listeners): by default the
        # listen address; a container listening on 0.0.0.0 advertises its service name.
        self.advertised_host = options.get("advertised_host") or self.host
        self.base_port = options.get("port", 0)
        self.data_dir = options.get("data_dir")
        if self.data_dir is None and self.config.log_dirs:
            self.data_dir = Path(self.config.log_dirs.split(",")[0])
        self.observers = tuple(options.get("observers", ()))
        self._load_scheduler = options.get("load_scheduler", EventLoopLoadScheduler)
        self._request_clock = options.get("request_clock")
        self._handler_pools = options.get("handler_pools")
        self._broker_clocks = options.get("broker_clocks")
        self._buggify = options.get("buggify")
        self.capture_dir = options.get("capture_dir")
        # The clocks requests are timed with: the system's, or a simulation's virtual ones.
        self._clocks = self._request_clock or RequestClock()
        # SASL's session lifetimes and delegation tokens are dates: the wall clock, in
        # seconds for LoopClock.
        self._wall_clock = LoopClock(lambda: self._clocks.wall_ms() / 1000)
        self.stores = self._build_stores(options.get("ids") or IdSource.system())
        self.brokers: list[Broker] = []
        self.stopped_brokers: set[int] = set()
        self._started = False
        # Without a data dir, a broker's memory logs are its "disk": kept across a
        # stop_broker/start_broker so a restarted follower has something to truncate.
        self._memory_logs: dict[int, LogManager] = {}
        # Control endpoint (broker/control/): faults and metrics are per broker id, so
        # they outlive a broker's restart; the HTTP server runs only with a port.
        self.control_port = options.get("control_port")
        self.control_host = options.get("control_host", "127.0.0.1")
        self._control = ControlEndpoint(
            self.control_host, self.control_port, options.get("control_token")
        )
        self.replication = ReplicationFaults(
            lambda: len(self.brokers), self._fetchers, self.config.replica_lag_time_max_ms
        )

    def _build_stores(self, ids: IdSource) -> ClusterStores:
        """The cluster's stores, each durable beside the metadata when there is a data
        dir; also the listeners, checked whole here (a bad keystore fails the start)."""
        clocks = self._clocks
        # Every random id of the cluster (cluster, topic and member ids, fetch sessions,
        # directory tags): the system's entropy, or a simulation's seeded source.
        metadata = ClusterMetadata(data_dir=self.data_dir, ids=ids)
        # The finalized features; a new cluster's as Kafka 4.2 formats one, with the
        # consumer protocol and share groups as the broker config allows them.
        protocols = self.config.group_coordinator_rebalance_protocols.replace(" ", "").split(",")
        features = FeatureControl(
            self.data_dir,
            bootstrap_levels(
                "consumer" in protocols, self.config.group_share_enable, "streams" in protocols
            ),
        )
        group_configs = GroupConfigStore(self.data_dir)  # KIP-848 GROUP resources
        client_quotas = ClientQuotaStore(self.data_dir)
        client_metrics = ClientMetricsStore(self.data_dir)  # KIP-714 subscriptions
        # Security (broker/security/): the TLS/SASL listeners beside the PLAINTEXT one.
        self.listeners = security_listeners(self.config)
        scram_credentials = ScramCredentialStore(self.data_dir)
        # Delegation tokens (KIP-48): kept beside the credentials, timed on the wall clock.
        delegation_tokens = DelegationTokenManager(
            DelegationTokenStore(self.data_dir),
            self.config.delegation_token_secret_key,
            self.config.delegation_token_max_lifetime_ms,
            self.config.delegation_token_expiry_time_ms,
            self._wall_clock,
            ids.random_bytes,
        )
        acls = AclStore(self.data_dir)
        # How brokers reach each other (inter.broker.listener.name): None for PLAINTEXT.
        inter_broker = inter_broker_client(self.config, self.listeners, ids.random_bytes)
        # The in-process controller (leader election, ISR changes) of every broker.
        quorum_voters = parse_quorum_voters(self.config.controller_quorum_voters)
        controller = Controller(
            metadata,
            KRaftQuorum(metadata, quorum_voters, clocks.wall_clock_ms),
            static_min_insync_replicas=self.config.min_insync_replicas,
            eligible_leader_replicas_level=lambda: features.level(ELIGIBLE_LEADER_REPLICAS_VERSION),
        )
        # what can be failed, and limited
        self.faults = fault_injector(broker_registry(self.config.client_telemetry_enabled))
        # Capture (broker/observability/capture.py): every request and delayed-operation
        # event of every broker, into rolling files under capture_dir; off when None.
        self.captures: CaptureSet | None = None
        if self.capture_dir is not None:
            from broker.observability.capture import CaptureSet

            # Its own timer, on the monotonic clock the loop's time is read from.
            self.captures = CaptureSet(
                self.capture_dir,
                clock=LoopClock(lambda: clocks.monotonic_ns() / 1e9),
                request_clock=clocks,
                cluster_config=replayable_configs(self.config),
            )
        return ClusterStores(
            metadata=metadata,
            controller=controller,
            ids=ids,
            faults=self.faults,
            features=features,
            group_configs=group_configs,
            client_quotas=client_quotas,
            client_metrics=client_metrics,
            acls=acls,
            scram_credentials=scram_credentials,
            delegation_tokens=delegation_tokens,
            inter_broker=inter_broker,
            capture=self.captures,
            tiered_storage=self._tiered_storage(ids, metadata),
        )

    def _tiered_storage(self, ids: IdSource, metadata: ClusterMetadata) -> TieredStorage | None:
        """The shared remote tier when remote.log.storage.system.enable (KIP-405); its
        latency draws from a generator seeded off the cluster's random source; its
        metadata topic is appended to and read at the running brokers' replica managers."""
        if not self.config.remote_log_storage_system_enable:
            return None
        return TieredStorage.build(
            self.config,
            self.data_dir,
            random.Random(ids.rng.getrandbits(64)),
            metadata,
            self._running_replica_managers,
            self._clocks.wall_clock_ms,
        )

    def _running_replica_managers(self) -> dict[int, ReplicaManager]:
        return {
            b.broker_id: b.replica_manager
            for b in self.brokers
            if b.broker_id not in self.stopped_brokers
        }

    # -- the stores, by the names tests, tools and the control endpoint use ----------

    @property
    def cluster(self) -> ClusterMetadata:
        return self.stores.metadata

    @property
    def controller(self) -> Controller:
        return self.stores.controller

    @property
    def ids(self) -> IdSource:
        return self.stores.ids

    @property
    def group_configs(self) -> GroupConfigStore:
        return self.stores.group_configs

    @property
    def client_quotas(self) -> ClientQuotaStore:
        return self.stores.client_quotas

    @property
    def acls(self) -> AclStore:
        return self.stores.acls

    @property
    def scram_credentials(self) -> ScramCredentialStore:
        return self.stores.scram_credentials

    @property
    def request_metrics(self) -> dict[int, RequestMetrics]:
        return self.stores.request_metrics

    @property
    def remote_storage(self) -> RemoteStorageModel | None:
        """The remote tier's model and faults (KIP-405); None when tiered storage is off."""
        tiered = self.stores.tiered_storage
        return tiered.model if tiered is not None else None

    @property
    def remote_tier_metadata(self) -> RemoteLogMetadataManager | None:
        """What the remote tier holds (the control endpoint's GET /remote)."""
        tiered = self.stores.tiered_storage
        return tiered.metadata if tiered is not None else None

    # -- building and running the brokers ----------------------------------------------

    def _extra_log_dirs(self) -> list[Path]:
        """The directories of ``log.dirs`` besides the data dir (several log dirs)."""
        if self.data_dir is None or not self.config.log_dirs:
            return []
        named = [Path(d.strip()) for d in self.config.log_dirs.split(",") if d.strip()]
        return [d for d in named if d != self.data_dir]

    def _logs(self, broker_id: int) -> LogManager:
        """Kafka's log.dirs: the data dir first, then the others (each with its broker-N);
        without a data dir, the broker's memory logs, kept across a restart."""
        broker_dir = self.data_dir / f"broker-{broker_id}" if self.data_dir is not None else None
        extra_dirs = [d / f"broker-{broker_id}" for d in self._extra_log_dirs()]
        logs = self._memory_logs.get(broker_id) or LogManager(
            broker_dir, extra_dirs=extra_dirs, ids=self.stores.ids
        )
        if self.data_dir is None:
            self._memory_logs[broker_id] = logs
        return logs

    def _broker_options(
        self,
        broker_id: int,
        port: int | None = None,
        listener_ports: Mapping[str, int] | None = None,
    ) -> BrokerOptions:
        if port is None:
            port = 0 if self.base_port == 0 else self.base_port + broker_id
        logs = self._logs(broker_id)
        config = self.config.model_copy(update={"broker_id": broker_id})
        if self._broker_clocks is not None:
            clock, request_clock = self._broker_clocks(broker_id)
        else:
            clock = LoopClock(asyncio.get_running_loop().time)
            request_clock = self._request_clock or RequestClock()
        return BrokerOptions(
            broker_id=broker_id,
            config=config,
            clock=clock,
            logs=logs,
            request_clock=request_clock,
            host=self.host,
            port=port,
            advertised_host=self.advertised_host,
            channels=[
                ChannelBuilder(
                    listener,
                    self.stores.scram_credentials,
                    self._wall_clock,
                    self.stores.ids.random_bytes,
                    self.stores.delegation_tokens,
                )
                for listener in self.listeners
            ],
            listener_ports=listener_ports,
            handler_pool=self._handler_pools(broker_id, config) if self._handler_pools else None,
            observers=self.observers,
            load_scheduler=self._load_scheduler,
        )

    async def start(self) -> None:
        if self._buggify is not None:
            buggify.install(self._buggify)
        for broker_id in range(self.num_brokers):
            self.brokers.append(build_broker(self._broker_options(broker_id), self.stores))
        # Register every broker before any starts, so placement sees the whole cluster.
        for broker in self.brokers:
            self.cluster.register_broker(broker.broker_id, broker.advertised_host, broker.port)
        for broker in self.brokers:
            await broker.start()
        if self.captures is not None:
            self.captures.start()
        await self._control.start(self)
        self._started = True

    async def stop(self) -> None:
        await self._control.stop()
        for broker in reversed(self.brokers):
            if broker.broker_id not in self.stopped_brokers:
                await broker.stop()
        if self.captures is not None:
            await self.captures.stop()
            self.captures = None
        if self._buggify is not None:
            buggify.install(None)
        self._started = False

    async def stop_broker(self, broker_id: int) -> None:
        """Stop one broker as if its process died; the controller fails its leaders over.

        Its listener closes and its connections drop (clients refresh metadata and
        retry elsewhere); then the controller removes it from every ISR and elects new
        leaders from the remaining ISR members (leader epoch + 1). No-op if stopped.
        """
        if broker_id in self.stopped_brokers:
            return
        broker = self.brokers[broker_id]
        self.stopped_brokers.add(broker_id)
        self.controller.quorum.on_broker_stopped(broker_id)  # what it had, it keeps
        await broker.stop()
        self.controller.on_broker_failure(broker_id)

    async def crash_broker(self, broker_id: int) -> int:
        """`stop_broker`, and the machine lost its power: each memory log loses what it had
        not flushed (``flush.messages``/``flush.ms``; `MemoryLog.lose_unflushed`), as page
        cache that never reached the disk. Returns the offsets lost. Without a data dir only:
        the memory logs are the simulated disk (a real disk's page cache survives a
        process's death, which is all `stop_broker` is)."""
        if self.data_dir is not None:
            raise ValueError("a power loss is simulated on memory logs only (no data dir)")
        await self.stop_broker(broker_id)
        logs = self._memory_logs.get(broker_id)
        if logs is None:
            return 0
        return sum(
            plog.lose_unflushed() for plog in logs.logs.values() if isinstance(plog, MemoryLog)
        )

    async def start_broker(self, broker_id: int) -> None:
        """Restart a stopped broker on the same port with the same data (dir or memory).

        Its replicas come back as followers: they truncate to what the leader's epochs
        prove (OffsetForLeaderEpoch), catch up, and rejoin the ISR. Partitions that had
        no live ISR member are led by it again. No-op if it is running.
        """
        if broker_id not in self.stopped_brokers:
            return
        old = self.brokers[broker_id]
        options = self._broker_options(broker_id, old.port, old.listener_ports)
        broker = build_broker(options, self.stores)
        self.brokers[broker_id] = broker
        await broker.start()
        self.stopped_brokers.discard(broker_id)
        self.controller.on_broker_startup(broker_id)
        self.replication.apply(broker_id)

    # -- replication faults (the control endpoint's ClusterControl) ----------------------

    def pause_replication(self, broker_id: int) -> None:
        """Broker ``broker_id``'s followers stop fetching (``ReplicationFaults.pause``)."""
        self.replication.pause(broker_id)

    def resume_replication(self, broker_id: int) -> None:
        """Full speed again (``ReplicationFaults.resume``)."""
        self.replication.resume(broker_id)

    def set_replication_delay_ms(self, broker_id: int, ms: int) -> None:
        """Follower fetches at least ``ms`` apart (``ReplicationFaults.set_delay_ms``)."""
        self.replication.set_delay_ms(broker_id, ms)

    def clear_replication_faults(self, broker_id: int | None = None) -> None:
        """Resume replication of one broker, or of every broker (``fault clear``)."""
        self.replication.clear(broker_id)

    def replication_faults(self) -> dict[int, dict[str, object]]:
        """The replication faults in force, by broker id (only brokers that have one)."""
        return self.replication.in_force()

    def _fetchers(self, broker_id: int) -> ReplicaFetcherManager | None:
        """The broker's fetcher manager, None while it is stopped."""
        if broker_id in self.stopped_brokers:
            return None
        return self.brokers[broker_id].replica_manager.fetcher_manager

    # -- addresses -----------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.advertised_host}:{b.port}" for b in self.brokers)

    def listener_bootstrap(self, listener_name: str) -> str:
        """``host:port,...`` of every broker on one listener (``PLAINTEXT``: ``bootstrap``)."""
        name = listener_name.upper()
        if not any(listener.name == name for listener in self.listeners):
            return self.bootstrap
        return ",".join(
            f"{self.cluster.brokers[b.broker_id].address(name)[0]}:{b.listener_ports[name]}"
            for b in self.brokers
            if name in b.listener_ports
        )

    @property
    def control_url(self) -> str | None:
        """``http://HOST:PORT`` of the control endpoint, None when it does not run."""
        return self._control.url

    @property
    def control_token(self) -> str:
        """What the control endpoint's state changes must carry (guard.py)."""
        return self._control.token

    async def __aenter__(self) -> MiniKafka:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
