"""The composition root: builds the cluster's parts, starts and stops them in order.

Nothing in the broker reaches for a global: the clock, the shared metadata, each
broker's purgatories, logs and coordinator are made here and passed down. Tests use the
same entry point (``MiniKafka``) as the command line, on port 0.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.cluster.controller import Controller
from broker.cluster.kraft_quorum import KRaftQuorum, parse_quorum_voters
from broker.config.broker_config import BrokerConfig, replayable_configs
from broker.control.faults import FaultInjector
from broker.coordinator.coordinator_loader import EventLoopLoadScheduler, LoadScheduler
from broker.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from broker.group.group_config import GroupConfig, OffsetConfig
from broker.group.group_configs import GroupConfigManager, GroupConfigStore
from broker.group.group_coordinator import GroupCoordinator
from broker.group.group_log import offsets_topic_log
from broker.group.group_metadata_manager import GroupMetadataManager
from broker.handlers.base import ApiHandler
from broker.handlers.registry import api_specs, build_registry
from broker.ids import IdSource
from broker.log import LogManager
from broker.log.log_cleaner import CleanerConfig, LogCleaner
from broker.observability.metrics import RequestMetrics
from broker.quota.client_quota_store import ClientQuotaStore
from broker.quota.quota_managers import QuotaManagers
from broker.quota.replication_quota_manager import ReplicationQuotas
from broker.quota.throttled_channel import ThrottledChannelReaper
from broker.replica.fetch_session import FetchManager, FetchSessionCache
from broker.replica.leader_endpoint import LeaderEndpoint
from broker.replica.partition import Partition, TopicPartition
from broker.replica.replica_fetcher import ReplicaFetcherManager
from broker.replica.replica_manager import ReplicaManager
from broker.security.authorizer.acl_store import AclStore
from broker.security.authorizer.standard_authorizer import StandardAuthorizer, parse_super_users
from broker.security.listeners import ChannelBuilder, inter_broker_client, security_listeners
from broker.security.sasl_client import InterBrokerClient
from broker.security.scram_credentials import ScramCredentialStore
from broker.server.broker_server import Broker
from broker.server.dispatch import FaultPolicy, HandlerPool, RequestDispatcher, RequestObserver
from broker.server.purgatories import PurgatorySet
from broker.server.request_timing import RequestClock
from broker.server.response_cache import ResponseCache
from broker.server.services import BrokerServices
from broker.share.network_persister import NetworkStatePersister
from broker.share.persister import InProcessStatePersister, PersisterStateManager
from broker.share.share_components import build_share_groups
from broker.share_coordinator.share_coordinator import build_share_coordinator
from broker.txn.transaction_coordinator import build_transaction_coordinator
from purgatory import Clock, LoopClock

if TYPE_CHECKING:
    from broker.control.server import ControlServer
    from broker.observability.capture import BrokerCapture, CaptureSet

log = logging.getLogger("broker.app")


def build_broker(
    *,
    broker_id: int,
    config: BrokerConfig,
    metadata: ClusterMetadata,
    controller: Controller,
    clock: Clock,
    logs: LogManager,
    faults: FaultPolicy,
    request_metrics: RequestMetrics,
    capture: BrokerCapture | None = None,
    observers: Sequence[RequestObserver] = (),
    host: str = "127.0.0.1",
    port: int = 0,
    advertised_host: str | None = None,
    request_clock: RequestClock | None = None,
    handlers: Mapping[int, ApiHandler] | None = None,
    load_scheduler: Callable[[], LoadScheduler] = EventLoopLoadScheduler,
    group_config_store: GroupConfigStore | None = None,
    client_quotas: ClientQuotaStore | None = None,
    channels: Sequence[ChannelBuilder] = (),
    listener_ports: Mapping[str, int] | None = None,
    scram_credentials: ScramCredentialStore | None = None,
    inter_broker: InterBrokerClient | None = None,
    handler_pool: HandlerPool | None = None,
    acl_store: AclStore | None = None,
    in_process_share_state: bool = False,
    ids: IdSource | None = None,
) -> Broker:
    """Build one broker whole: every part gets exactly what it uses, at construction.

    The order is the order of dependence: purgatories (with capture's listeners), the
    replica fetcher manager and the replica manager over one table of hosted partitions,
    the group metadata manager over the replica manager (its ``__consumer_offsets``), the
    consumer group coordinator (KIP-848) and the group coordinator over that manager, the
    transaction coordinator (its
    ``__transaction_state`` and marker channel), the fetch manager (incremental fetch
    sessions), the services handlers see, the dispatcher, and the broker that starts
    them all. ``load_scheduler`` makes the scheduler each coordinator loads its
    partitions on (Kafka's coordinator scheduler threads; tests hand in one that holds
    loads as long as they want).
    """
    request_clock = request_clock or RequestClock()
    ids = ids or IdSource.system()  # member ids, fetch session ids (a simulation seeds it)
    purgatories = PurgatorySet(
        clock, config, capture.purgatory_listeners() if capture is not None else None
    )
    hosted: dict[TopicPartition, Partition] = {}
    replication_quotas = ReplicationQuotas(
        broker_id,
        metadata,
        clock,
        config.replication_quota_window_num,
        config.replication_quota_window_size_seconds,
    )
    fetcher_manager = ReplicaFetcherManager(
        broker_id,
        config,
        metadata,
        clock,
        hosted,
        leader_endpoint=functools.partial(LeaderEndpoint, security=inter_broker),
        inter_broker_listener=inter_broker.listener_name if inter_broker else "PLAINTEXT",
        replication_quotas=replication_quotas,
        # A simulation's follower: its work on each fetch answer takes modelled time.
        response_work=handler_pool.follower_work if handler_pool is not None else None,
    )
    replica_manager = ReplicaManager(
        broker_id,
        metadata,
        config,
        clock,
        purgatories.produce,
        purgatories.fetch,
        logs,
        controller,
        fetcher_manager,
        purgatories.scheduler_timer,
        hosted,
        request_clock.wall_clock_ms,
        delete_records_purgatory=purgatories.delete_records,
        share_fetch_purgatory=purgatories.share_fetch,
        replication_quotas=replication_quotas,
    )
    # Kafka's LogCleaner: compacts every hosted replica's cleanup.policy=compact log.
    log_cleaner = LogCleaner(
        CleanerConfig.from_broker_config(config),
        clock,
        replica_manager.wall_clock_ms,
        purgatories.scheduler_timer,
        hosted,
        broker_id,
    )
    offset_config = OffsetConfig.from_broker_config(config)
    group_metadata_manager = GroupMetadataManager(
        broker_id,
        offset_config,
        clock,
        metadata,
        offsets_topic_log(
            replica_manager,
            clock,
            offset_config.offsets_commit_timeout_ms,
            offset_config.offsets_commit_required_acks,
            offset_config.offsets_load_buffer_size,
        ),
        purgatories.scheduler_timer,
        # Kafka's group-metadata-manager scheduler thread: loads in slices on the loop.
        load_scheduler=load_scheduler(),
        uuid_factory=ids.member_id,
    )
    # Kafka 4's consumer groups (KIP-848) beside the classic ones: timeouts on the
    # scheduler timer, the assignor's topics from the metadata, the classic groups asked
    # only whether an id is taken; v0 member ids generated here (the random source).
    consumer_group_coordinator = ConsumerGroupCoordinator(
        ConsumerGroupConfig.from_broker_config(config),
        purgatories.scheduler_timer,
        metadata,
        group_metadata_manager,
        member_id_factory=ids.member_id,
        # Per-group configs (GROUP resources): the cluster's store, this broker's bounds.
        group_configs=GroupConfigManager(
            group_config_store or GroupConfigStore(), ConsumerGroupConfig.from_broker_config(config)
        ),
    )
    group_coordinator = GroupCoordinator(
        GroupConfig.from_broker_config(config),
        purgatories.heartbeat,
        purgatories.rebalance,
        group_metadata_manager,
        consumer_group_coordinator,
    )
    # Kafka's TransactionCoordinator, with its state manager over __transaction_state and
    # its marker channel (WriteTxnMarkers to the partition leaders over TCP).
    txn_coordinator = build_transaction_coordinator(
        broker_id,
        config,
        clock,
        metadata,
        replica_manager,
        purgatories.scheduler_timer,
        load_scheduler(),
        inter_broker,
    )
    # The share coordinator (KIP-932's durable share-partition state in
    # __share_group_state) and the persister the share partitions reach it through:
    # Read/WriteShareGroupState requests to the coordinator's broker over TCP, or — a
    # broker that never listens (``in_process_share_state``) — calls on its own.
    share_coordinator = build_share_coordinator(
        broker_id, config, metadata, replica_manager, clock, load_scheduler()
    )
    persister: PersisterStateManager
    if in_process_share_state:
        persister = InProcessStatePersister(
            share_coordinator,
            lambda b: share_coordinator if b == broker_id else None,
            purgatories.scheduler_timer,
        )
    else:
        persister = NetworkStatePersister(
            broker_id, share_coordinator, metadata, purgatories.scheduler_timer, inter_broker
        )
    # Share groups (KIP-932): membership beside the other groups, share partitions beside
    # the replicas they read.
    share_group_coordinator, share_partition_manager = build_share_groups(
        config,
        clock,
        metadata,
        replica_manager,
        purgatories,
        group_metadata_manager,
        consumer_group_coordinator,
        persister,
    )
    handlers = handlers if handlers is not None else build_registry()
    # Kafka's QuotaManagers over the cluster's quotas (shared, like the metadata), with
    # the ThrottledChannel timer that unmutes throttled connections.
    quotas = QuotaManagers(
        client_quotas if client_quotas is not None else ClientQuotaStore(),
        clock,
        ThrottledChannelReaper(clock),
        config.quota_window_num,
        config.quota_window_size_seconds,
    )
    services = BrokerServices(
        broker_id=broker_id,
        config=config,
        clock=clock,
        metadata=metadata,
        replica_manager=replica_manager,
        group_coordinator=group_coordinator,
        group_metadata_manager=group_metadata_manager,
        consumer_group_coordinator=consumer_group_coordinator,
        txn_coordinator=txn_coordinator,
        # Kafka's FetchManager over its FetchSessionCache: the Fetch handler's sessions.
        fetch_manager=FetchManager(
            clock,
            FetchSessionCache(config.max_incremental_fetch_session_cache_slots, rng=ids.rng),
            metadata,
        ),
        api_specs=api_specs(handlers),
        response_cache=ResponseCache(metadata),
        quota_managers=quotas,
        share_group_coordinator=share_group_coordinator,
        share_partition_manager=share_partition_manager,
        share_coordinator=share_coordinator,
        scram_credentials=scram_credentials or ScramCredentialStore(),
        authorizer=build_authorizer(config, acl_store),
        acl_store=acl_store if acl_store is not None else AclStore(),
    )
    everyone: list[RequestObserver] = [request_metrics, *observers]
    if capture is not None:
        everyone.append(capture)
    dispatcher = RequestDispatcher(
        handlers,
        services,
        faults,
        everyone,
        request_clock,
        purgatories.scheduler_timer,
        quotas,
        handler_pool,  # a simulation's request handlers in virtual time; None in real time
    )
    return Broker(
        host=host,
        port=port,
        advertised_host=advertised_host or host,
        metadata=metadata,
        dispatcher=dispatcher,
        purgatories=purgatories,
        components=(
            replica_manager,
            log_cleaner,
            group_coordinator,
            txn_coordinator,
            share_coordinator,
            persister,
            quotas,
        ),
        request_clock=request_clock,
        channels=channels,
        listener_ports=listener_ports,
    )


def build_authorizer(config: BrokerConfig, acl_store: AclStore | None) -> StandardAuthorizer | None:
    """Kafka's StandardAuthorizer over the cluster's ACLs when ``authorizer.class.name``
    names it; None (every request allowed) otherwise."""
    if not config.authorizer_class_name:
        return None
    return StandardAuthorizer(
        acl_store if acl_store is not None else AclStore(),
        parse_super_users(config.super_users),
        config.allow_everyone_if_no_acl_found,
    )


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
    return build_broker(
        broker_id=0,
        config=config if config is not None else BrokerConfig.model_validate({}),
        metadata=metadata,
        controller=Controller(metadata),
        clock=clock,
        logs=LogManager(None),
        faults=faults if faults is not None else fault_injector(handlers or build_registry()),
        request_metrics=RequestMetrics(0),
        port=port,
        handlers=handlers,
        load_scheduler=load_scheduler,
        in_process_share_state=True,  # it never listens: the share state stays in-process
    )


class MiniKafka:
    """N brokers in one process sharing one cluster metadata."""

    def __init__(
        self,
        config: BrokerConfig | None = None,
        *,
        brokers: int = 1,
        host: str = "127.0.0.1",
        port: int = 0,
        data_dir: Path | None = None,
        control_port: int | None = None,
        control_host: str = "127.0.0.1",
        capture_dir: Path | None = None,
        advertised_host: str | None = None,
        observers: Sequence[RequestObserver] = (),
        load_scheduler: Callable[[], LoadScheduler] = EventLoopLoadScheduler,
        request_clock: RequestClock | None = None,
        handler_pools: Callable[[int, BrokerConfig], HandlerPool] | None = None,
        ids: IdSource | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError("--brokers must be at least 1")
        self.config = config or BrokerConfig.model_validate({})
        self.host = host
        # What Metadata tells clients (Kafka's advertised.listeners): by default the
        # listen address; a container listening on 0.0.0.0 advertises its service name.
        self.advertised_host = advertised_host or host
        self.base_port = port
        self.data_dir = data_dir
        if data_dir is None and self.config.log_dirs:
            self.data_dir = Path(self.config.log_dirs.split(",")[0])
        self.num_brokers = brokers
        # Told of every request of every broker, besides metrics and capture (tools, tests).
        self.observers = tuple(observers)
        # What each broker's coordinators load their partitions on (tests may hold loads).
        self._load_scheduler = load_scheduler
        # The clocks requests are timed with (a simulation hands in its virtual ones).
        self._request_clock = request_clock
        # A simulation's request handlers per broker (id, config -> pool); None in real time.
        self._handler_pools = handler_pools
        clocks = request_clock or RequestClock()
        # Every random id of the cluster (cluster, topic and member ids, fetch sessions,
        # directory tags): the system's entropy, or a simulation's seeded source.
        self.ids = ids or IdSource.system()
        self.cluster = ClusterMetadata(data_dir=self.data_dir, ids=self.ids)
        self.group_configs = GroupConfigStore(self.data_dir)  # KIP-848 GROUP resources
        # The cluster's client quotas (DescribeClientQuotas/AlterClientQuotas), shared by
        # every broker like the metadata; client-quotas.json beside it with a data dir.
        self.client_quotas = ClientQuotaStore(self.data_dir)
        # Security (broker/security/): the TLS/SASL listeners beside the PLAINTEXT one,
        # checked whole here (a bad keystore fails the start), and the cluster's SCRAM
        # credentials, durable with a data directory.
        self.listeners = security_listeners(self.config)
        self.scram_credentials = ScramCredentialStore(self.data_dir)
        # The cluster's ACLs (CreateAcls/DeleteAcls), read by every broker's authorizer;
        # acls.json beside the metadata with a data dir.
        self.acls = AclStore(self.data_dir)
        # How brokers reach each other (inter.broker.listener.name): None for PLAINTEXT.
        self.inter_broker = inter_broker_client(self.config, self.listeners, os.urandom)
        self.brokers: list[Broker] = []
        self._started = False
        # The in-process controller (leader election, ISR changes) shared by all brokers.
        self.controller = Controller(
            self.cluster,
            KRaftQuorum(
                self.cluster,
                parse_quorum_voters(self.config.controller_quorum_voters),
                clocks.wall_clock_ms,
            ),
        )
        self.stopped_brokers: set[int] = set()
        # Without a data dir, a broker's memory logs are its "disk": kept across a
        # stop_broker/start_broker so a restarted follower has something to truncate.
        self._memory_logs: dict[int, LogManager] = {}
        # Control endpoint (broker/control/): faults and metrics are per broker id, so
        # they outlive a broker's restart; the HTTP server runs only with a port.
        self.control_port = control_port
        self.control_host = control_host
        handlers = build_registry()  # what can be failed, and limited to a topic
        self.faults = fault_injector(handlers)
        self.request_metrics: dict[int, RequestMetrics] = {}
        # Replication faults by broker id, like the injector's: they outlive a restart
        # (applied again when the broker starts) until resumed or cleared.
        self._replication_paused: set[int] = set()
        self._replication_delay_ms: dict[int, int] = {}
        self._control: ControlServer | None = None
        # Capture (broker/observability/capture.py): every request and delayed-operation event
        # of every broker, into rolling files under capture_dir; off when None.
        self.capture_dir = capture_dir
        self.captures: CaptureSet | None = None
        if capture_dir is not None:
            from broker.observability.capture import CaptureSet

            # Its own timer, on the monotonic clock the loop's time is read from.
            self.captures = CaptureSet(
                capture_dir,
                clock=LoopClock(lambda: clocks.monotonic_ns() / 1e9),
                request_clock=clocks,
                cluster_config=replayable_configs(self.config),
            )
        # SASL's session lifetimes are dates: the wall clock, in seconds for LoopClock.
        self._wall_clock = LoopClock(lambda: clocks.wall_ms() / 1000)

    def _extra_log_dirs(self) -> list[Path]:
        """The directories of ``log.dirs`` besides the data dir (several log dirs)."""
        if self.data_dir is None or not self.config.log_dirs:
            return []
        named = [Path(d.strip()) for d in self.config.log_dirs.split(",") if d.strip()]
        return [d for d in named if d != self.data_dir]

    def _build_broker(
        self,
        broker_id: int,
        port: int | None = None,
        listener_ports: Mapping[str, int] | None = None,
    ) -> Broker:
        if port is None:
            port = 0 if self.base_port == 0 else self.base_port + broker_id
        broker_dir = self.data_dir / f"broker-{broker_id}" if self.data_dir is not None else None
        # Kafka's log.dirs: the data dir first, then the others (each with its broker-N).
        extra_dirs = [d / f"broker-{broker_id}" for d in self._extra_log_dirs()]
        logs = self._memory_logs.get(broker_id) or LogManager(
            broker_dir, extra_dirs=extra_dirs, ids=self.ids
        )
        if self.data_dir is None:
            self._memory_logs[broker_id] = logs
        config = self.config.model_copy(update={"broker_id": broker_id})
        return build_broker(
            broker_id=broker_id,
            config=config,
            metadata=self.cluster,
            controller=self.controller,
            clock=LoopClock(asyncio.get_running_loop().time),
            logs=logs,
            faults=self.faults,
            request_metrics=self.request_metrics.setdefault(broker_id, RequestMetrics(broker_id)),
            capture=self.captures.for_broker(broker_id) if self.captures is not None else None,
            observers=self.observers,
            host=self.host,
            port=port,
            advertised_host=self.advertised_host,
            load_scheduler=self._load_scheduler,
            request_clock=self._request_clock,
            group_config_store=self.group_configs,
            client_quotas=self.client_quotas,
            channels=[
                ChannelBuilder(listener, self.scram_credentials, self._wall_clock, os.urandom)
                for listener in self.listeners
            ],
            listener_ports=listener_ports,
            scram_credentials=self.scram_credentials,
            inter_broker=self.inter_broker,
            handler_pool=self._handler_pools(broker_id, config) if self._handler_pools else None,
            acl_store=self.acls,
            ids=self.ids,
        )

    async def start(self) -> None:
        for broker_id in range(self.num_brokers):
            broker = self._build_broker(broker_id)
            self.brokers.append(broker)
        # Register every broker before any starts, so placement sees the whole cluster.
        for broker in self.brokers:
            self.cluster.register_broker(broker.broker_id, broker.advertised_host, broker.port)
        for broker in self.brokers:
            await broker.start()
        if self.captures is not None:
            self.captures.start()
        if self.control_port is not None:
            from broker.control.server import ControlServer  # aiohttp only when asked

            self._control = ControlServer(self, self.control_host, self.control_port)
            await self._control.start()
        self._started = True

    async def stop(self) -> None:
        if self._control is not None:
            await self._control.stop()
            self._control = None
        for broker in reversed(self.brokers):
            if broker.broker_id not in self.stopped_brokers:
                await broker.stop()
        if self.captures is not None:
            await self.captures.stop()
            self.captures = None
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

    async def start_broker(self, broker_id: int) -> None:
        """Restart a stopped broker on the same port with the same data (dir or memory).

        Its replicas come back as followers: they truncate to what the leader's epochs
        prove (OffsetForLeaderEpoch), catch up, and rejoin the ISR. Partitions that had
        no live ISR member are led by it again. No-op if it is running.
        """
        if broker_id not in self.stopped_brokers:
            return
        old = self.brokers[broker_id]
        broker = self._build_broker(broker_id, port=old.port, listener_ports=old.listener_ports)
        self.brokers[broker_id] = broker
        await broker.start()
        self.stopped_brokers.discard(broker_id)
        self.controller.on_broker_startup(broker_id)
        self._apply_replication_faults(broker_id)

    # -- replication faults (the control endpoint's ClusterControl) ----------------------

    def pause_replication(self, broker_id: int) -> None:
        """Broker ``broker_id`` stops fetching as a follower; its leaders' ISRs shrink.

        Kept by broker id: a stopped broker is paused when it starts again."""
        self._check_broker_id(broker_id)
        self._replication_paused.add(broker_id)
        self._apply_replication_faults(broker_id)
        log.info(
            "Replication of broker %d paused: its followers stop fetching; the leaders drop "
            "it from their ISR after replica.lag.time.max.ms=%d",
            broker_id,
            self.config.replica_lag_time_max_ms,
        )

    def resume_replication(self, broker_id: int) -> None:
        """Undo ``pause_replication`` and ``set_replication_delay_ms``: full speed again."""
        self._check_broker_id(broker_id)
        had = broker_id in self._replication_paused or broker_id in self._replication_delay_ms
        self._replication_paused.discard(broker_id)
        self._replication_delay_ms.pop(broker_id, None)
        fetchers = self._fetchers(broker_id)
        if fetchers is not None:
            fetchers.resume_replication()
        if had:
            log.info("Replication of broker %d resumed at full speed", broker_id)

    def set_replication_delay_ms(self, broker_id: int, ms: int) -> None:
        """Space every follower fetch of ``broker_id`` at least ``ms`` apart (0: none)."""
        self._check_broker_id(broker_id)
        if ms < 0:
            raise ValueError("replication delay must be >= 0")
        if ms == 0:
            self._replication_delay_ms.pop(broker_id, None)
        else:
            self._replication_delay_ms[broker_id] = ms
        fetchers = self._fetchers(broker_id)
        if fetchers is not None:
            fetchers.set_replication_delay_ms(ms)
        log.info("Replication of broker %d: follower fetches at least %d ms apart", broker_id, ms)

    def clear_replication_faults(self, broker_id: int | None = None) -> None:
        """Resume replication of one broker, or of every broker (``fault clear``)."""
        for b in range(len(self.brokers)) if broker_id is None else (broker_id,):
            self.resume_replication(b)

    def replication_faults(self) -> dict[int, dict[str, object]]:
        """The replication faults in force, by broker id (only brokers that have one)."""
        faulty = sorted(self._replication_paused | set(self._replication_delay_ms))
        return {
            b: {
                "paused": b in self._replication_paused,
                "delay_ms": self._replication_delay_ms.get(b, 0),
            }
            for b in faulty
        }

    def _apply_replication_faults(self, broker_id: int) -> None:
        fetchers = self._fetchers(broker_id)
        if fetchers is None:
            return
        if broker_id in self._replication_paused:
            fetchers.pause_replication()
        delay = self._replication_delay_ms.get(broker_id, 0)
        if delay:
            fetchers.set_replication_delay_ms(delay)

    def _check_broker_id(self, broker_id: int) -> None:
        if not 0 <= broker_id < len(self.brokers):
            raise ValueError(f"unknown broker id {broker_id}")

    def _fetchers(self, broker_id: int) -> ReplicaFetcherManager | None:
        """The broker's fetcher manager, None while it is stopped."""
        self._check_broker_id(broker_id)
        if broker_id in self.stopped_brokers:
            return None
        return self.brokers[broker_id].replica_manager.fetcher_manager

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
        return self._control.url if self._control is not None else None

    async def __aenter__(self) -> MiniKafka:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
