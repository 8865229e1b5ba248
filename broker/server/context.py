"""What a handler is given for one request: who asked, what, the services, the clock on it.

``RequestContext`` carries the request header, the ``ConnectionInfo`` (the principal, which
client quotas match against the ``user`` entity; the listener's name and security protocol;
the connection's throttle callback), the handler's ``BrokerServices`` and the request's
``RequestTiming``. It is also the ``ParkedRequest`` a component that parks an operation
tells where the request waits (``parked_in``) and how it left (``purgatory_done``), which
is how the timing breakdown and the capture know a request's remote time and purgatory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from broker.quota.throttled_channel import ThrottleCallback
from broker.security.principal import ANONYMOUS, KafkaPrincipal
from broker.server.purgatories import PurgatoryName, PurgatoryOutcome
from broker.server.request_timing import RequestTiming
from broker.server.services import BrokerServices
from protocol.codec import RequestHeader


@dataclass(slots=True)
class ConnectionInfo:
    """One client connection, named as Kafka names it in its request log.

    ``principal``, ``listener_name`` and ``security_protocol`` are what the listener learnt
    (TLS, SASL); a plaintext connection is ``User:ANONYMOUS`` on ``PLAINTEXT``.
    """

    connection_id: str
    client_host: str
    client_port: int
    listener_port: int
    sequence: int = 0
    close: Callable[[str], None] | None = None
    principal: KafkaPrincipal = ANONYMOUS
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    #: The connection as Kafka's ``ThrottleCallback`` (``start_throttling`` mutes it,
    #: ``end_throttling`` unmutes it): what a client over its quota is throttled by.
    throttle_callback: ThrottleCallback | None = None
    #: What the client's ApiVersions v3+ said it runs (Kafka's ``ClientInformation``):
    #: client telemetry's ``match`` selects on them.
    client_software_name: str | None = None
    client_software_version: str | None = None


@dataclass(slots=True)
class RequestContext:
    """Everything a handler may look at besides the decoded request body."""

    header: RequestHeader
    connection: ConnectionInfo
    services: BrokerServices
    timing: RequestTiming = field(default_factory=RequestTiming)
    request_size: int = 0

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def connection_id(self) -> str:
        return self.connection.connection_id

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    def close_connection(self, reason: str) -> None:
        """Close the client's connection (Kafka's answer to an acks=0 produce error)."""
        if self.connection.close is not None:
            self.connection.close(reason)

    def parked_in(self, purgatory: PurgatoryName) -> None:
        """Note that this request waits in ``purgatory`` (for capture and metrics)."""
        self.timing.parked_in(purgatory)

    def purgatory_done(self, outcome: PurgatoryOutcome) -> None:
        self.timing.purgatory_done(outcome)
