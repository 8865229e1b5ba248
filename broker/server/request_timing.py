"""One request's timing, in Kafka's RequestChannel terms, on injected clocks.

Figures read the same as a real broker's request log: request queue (received ->
handler start), local (handler run), remote (parked in a purgatory), response queue
(ready -> its turn to be written, since responses leave in request order), send (write
to the socket), total. The component that parks a request says where
(``parked_in``) and how it left (``purgatory_done``); capture and metrics read it.

The purgatory ``Clock`` counts whole milliseconds (uvloop's ``loop.time`` is cached
per loop iteration), too coarse for a breakdown whose local time is often a few
microseconds; so the dispatcher and the connection read a ``RequestClock`` instead,
whose defaults are `broker.real_clock`'s and which a simulation or a test builds over
anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker import real_clock
from broker.server.purgatories import PurgatoryName, PurgatoryOutcome


@dataclass(frozen=True, slots=True)
class RequestClock:
    """Monotonic nanoseconds for durations, wall milliseconds for the capture's dates."""

    monotonic_ns: Callable[[], int] = real_clock.monotonic_ns
    wall_ms: Callable[[], float] = real_clock.wall_ms

    def wall_clock_ms(self) -> int:
        """Whole epoch milliseconds (LogAppendTime, DescribeQuorum, transaction dates)."""
        return int(self.wall_ms())


@dataclass(slots=True)
class RequestTiming:
    """Monotonic nanosecond timestamps of one request's life; 0 means "not reached"."""

    received_ns: int = 0
    local_start_ns: int = 0
    local_end_ns: int = 0
    remote_end_ns: int = 0
    response_ready_ns: int = 0
    send_start_ns: int = 0
    send_end_ns: int = 0
    purgatory: PurgatoryName | None = None
    purgatory_outcome: PurgatoryOutcome | None = None
    #: The quota throttle time answered (KIP-219: the connection is muted this long
    #: after the response is sent); 0 when no quota was violated.
    throttle_time_ms: int = 0

    def parked_in(self, purgatory: PurgatoryName) -> None:
        """This request waits in ``purgatory`` (said by whoever parks it)."""
        self.purgatory = purgatory

    def purgatory_done(self, outcome: PurgatoryOutcome) -> None:
        self.purgatory_outcome = outcome

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
