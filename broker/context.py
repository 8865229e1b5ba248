"""What a handler is given for one request: who asked, what, and the clock on it.

Timing follows Kafka's RequestChannel breakdown so that figures read the same as a real
broker's request log: request queue (received -> handler start), local (handler run),
remote (parked in a purgatory), response queue (ready -> its turn to be written, since
responses leave in request order), send (write to the socket), total.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.codec import RequestHeader

if TYPE_CHECKING:
    from broker.broker import Broker


@dataclass(slots=True)
class ConnectionInfo:
    """One client connection, named as Kafka names it in its request log."""

    connection_id: str
    client_host: str
    client_port: int
    listener_port: int
    sequence: int = 0
    close: Callable[[str], None] | None = None


@dataclass(slots=True)
class RequestTiming:
    """Monotonic nanosecond timestamps of one request's life; 0 means "not reached"."""

    received_ns: int = 0
    wall_received_ms: float = 0.0
    local_start_ns: int = 0
    local_end_ns: int = 0
    remote_end_ns: int = 0
    response_ready_ns: int = 0
    send_start_ns: int = 0
    send_end_ns: int = 0
    purgatory: str | None = None
    purgatory_outcome: str | None = None

    def breakdown_ms(self) -> dict[str, float]:
        """Kafka's names, in milliseconds with microsecond precision."""
        remote_end = self.remote_end_ns or self.local_end_ns
        ready = self.response_ready_ns or remote_end
        send_end = self.send_end_ns or ready
        send_start = self.send_start_ns or ready
        return {
            "request_queue_ms": _ms(self.local_start_ns - self.received_ns),
            "local_ms": _ms(self.local_end_ns - self.local_start_ns),
            "remote_ms": _ms(remote_end - self.local_end_ns),
            "response_queue_ms": _ms(send_start - remote_end),
            "send_ms": _ms(send_end - send_start),
            "total_ms": _ms(send_end - self.received_ns),
        }


def _ms(ns: int) -> float:
    return round(max(ns, 0) / 1_000_000, 3)


@dataclass(slots=True)
class RequestContext:
    """Everything a handler may look at besides the decoded request body."""

    header: RequestHeader
    connection: ConnectionInfo
    broker: Broker
    timing: RequestTiming = field(default_factory=RequestTiming)
    request_size: int = 0

    @property
    def api_version(self) -> int:
        return self.header.api_version

    def close_connection(self, reason: str) -> None:
        """Close the client's connection (Kafka's answer to an acks=0 produce error)."""
        if self.connection.close is not None:
            self.connection.close(reason)

    def parked_in(self, purgatory: str) -> None:
        """Note that this request waits in ``purgatory`` (for capture and metrics)."""
        self.timing.purgatory = purgatory

    def purgatory_done(self, outcome: str) -> None:
        """``outcome`` is ``completed`` or ``expired``."""
        self.timing.purgatory_outcome = outcome
