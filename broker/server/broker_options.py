"""What differs from one broker to the next, in one value: the per-broker options.

``MiniKafka`` makes one for each broker it builds (and again at a restart, with the ports
the broker had); ``build_standalone_broker`` makes one for a broker that never listens.
What every broker shares is ``ClusterStores``; what a broker builds from the two (its
purgatories, replicas, coordinators, dispatcher) is ``build_broker``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from broker.config.broker_config import BrokerConfig
from broker.coordinator.coordinator_loader import EventLoopLoadScheduler, LoadScheduler
from broker.handlers.base import ApiHandler
from broker.log import LogManager
from broker.security.listeners import ChannelBuilder
from broker.server.dispatch import HandlerPool, RequestObserver
from broker.server.request_timing import RequestClock
from purgatory import Clock


@dataclass(frozen=True, slots=True)
class BrokerOptions:
    """One broker's id, config, clocks, logs, listeners and request handling."""

    broker_id: int
    #: The cluster's config with this broker's ``broker.id``.
    config: BrokerConfig
    #: The loop's monotonic clock: deadlines, timers, sessions.
    clock: Clock
    #: Its log dirs (Kafka's log.dirs), or its memory logs kept across a restart.
    logs: LogManager
    #: The clocks requests are timed with (a simulation hands in its virtual ones).
    request_clock: RequestClock = field(default_factory=RequestClock)
    host: str = "127.0.0.1"
    #: The PLAINTEXT port (0: ephemeral).
    port: int = 0
    #: What Metadata tells clients (advertised.listeners); by default ``host``.
    advertised_host: str | None = None
    #: The TLS/SASL listeners (``broker/security/listeners.py``) and their ports once
    #: open (kept across a restart).
    channels: Sequence[ChannelBuilder] = ()
    listener_ports: Mapping[str, int] | None = None
    #: The API handlers by key; None: every API minikafka serves.
    handlers: Mapping[int, ApiHandler] | None = None
    #: A simulation's request handlers in virtual time; None in real time.
    handler_pool: HandlerPool | None = None
    #: Told of every request, besides metrics and capture (tools, tests).
    observers: Sequence[RequestObserver] = ()
    #: Makes the scheduler each coordinator loads its partitions on (Kafka's coordinator
    #: scheduler threads; tests hand in one that holds loads as long as they want).
    load_scheduler: Callable[[], LoadScheduler] = EventLoopLoadScheduler
    #: A broker that never listens keeps its share state in-process (no
    #: Read/WriteShareGroupState over TCP).
    in_process_share_state: bool = False
