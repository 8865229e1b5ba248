"""A broker's request handler threads in virtual time: service times and the request queue.

Kafka hands each request to one of ``num.io.threads`` request handler threads
(``KafkaRequestHandlerPool``) through one FIFO request queue; a request that finds them
all busy waits, and that wait is its ``RequestQueueTimeMs``. In a simulation the
handlers run in no time at all, so without a model a simulated broker would never be
busy and never queue. ``SimulatedRequestHandlers`` gives each request a service time
drawn from a ``protocol.service_times.ServiceTimeModel`` (fitted from a capture or
Kafka's request log, or a table) and the earliest-free of the broker's handlers, in
arrival order -- the dispatcher (``broker.server.dispatch.HandlerPool``) runs the request
when its service time on its handler is over.

A request's handler work is done at the end of its service time, where a Kafka handler
thread's append or read completes (an acks=all Produce wakes the followers' fetches then),
and its answer leaves at once. A request that parks holds its handler for its modelled
local time, which is what Kafka measured as the handler's time before it parked.

The network threads (``num.network.threads``, Kafka's processors) send the answers: a
connection is served by one of them, a response waits for it (ResponseQueueTimeMs) and
holds it for a send time drawn per API and response size (ResponseSendTimeMs, fitted
from the capture's send times). Where we differ from Kafka: reading a request costs its
network thread nothing. Draws come from a seeded ``random.Random`` per broker, in order,
so the same seed gives the same service times.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Callable
from pathlib import Path

from protocol.capture_files import read_capture
from protocol.service_times import FOLLOWER_WORK_KEY, ServiceTimeModel, fit_capture_records
from virtual_time.network import LatencyModel

__all__ = ["SimulatedRequestHandlers", "link_latency", "load_service_times"]

#: Kafka's default ``num.io.threads``.
DEFAULT_IO_THREADS = 8
#: Kafka's default ``num.network.threads``.
DEFAULT_NETWORK_THREADS = 3


def load_service_times(path: Path) -> ServiceTimeModel:
    """A service-time table (a ``.json`` file: ``ServiceTimeModel.to_table``'s, or one
    written by hand), or the model fitted from a capture (a directory or capture file).
    ValueError says what is wrong with it."""
    if path.is_file() and path.suffix == ".json":
        try:
            table = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read the service-time table {path}: {exc}") from exc
        if not isinstance(table, dict):
            raise ValueError(f"{path} is not a service-time table (a JSON object)")
        return ServiceTimeModel.from_table(table, source=f"table {path}")
    if not path.exists():
        raise ValueError(f"no service-time table or capture at {path}")
    model = fit_capture_records(read_capture(path), source=f"capture {path}")
    if not model.by_api:
        raise ValueError(f"the capture {path} holds no served request to fit service times to")
    return model


def link_latency(model: ServiceTimeModel | None) -> LatencyModel | None:
    """The links' latency the service-time model fitted from a capture's fetch
    turnarounds (``ServiceTimeModel.link_latency_ms``); None (the simulation's default)
    when it has none."""
    if model is None or model.link_latency_ms is None:
        return None
    base_ms, jitter_ms = model.link_latency_ms
    return LatencyModel(base_s=base_ms / 1000.0, jitter_s=jitter_ms / 1000.0)


class SimulatedRequestHandlers:
    """``threads`` handlers, each free from a virtual instant on (monotonic ns), and
    ``network_threads`` network threads (Kafka's processors): each connection is served by
    one of them, given round robin in the order connections first answer, as Kafka's
    acceptor hands new connections out; a response waits for its thread (the response
    queue) and holds it for its send time (``ServiceTimeModel.send``)."""

    def __init__(
        self,
        threads: int,
        model: ServiceTimeModel,
        rng: random.Random,
        network_threads: int = DEFAULT_NETWORK_THREADS,
        *,
        now_ns: Callable[[], int] | None = None,
    ) -> None:
        if threads < 1:
            raise ValueError(f"num.io.threads must be at least 1, not {threads}")
        if network_threads < 1:
            raise ValueError(f"num.network.threads must be at least 1, not {network_threads}")
        self.threads = threads
        self.model = model
        self._rng = rng
        self._free_at_ns = [0] * threads  # a heap: the earliest-free handler first
        self._network_free_at_ns = [0] * network_threads
        self._processor_of: dict[str, int] = {}
        #: With a clock, a follower's work on a fetch answer takes a handler too: a pool
        #: shared by every broker of a cluster on one thread, as ``minikafka serve`` runs.
        self._now_ns = now_ns

    def occupy(self, api_key: int, request_size: int, now_ns: int) -> tuple[int, int]:
        """(start, end) of the request on the earliest-free handler, which it then holds
        until ``end``: FIFO, since requests are occupied in the order they arrive."""
        free_ns = heapq.heappop(self._free_at_ns)
        start_ns = max(free_ns, now_ns)
        service_ms = self.model.service_ms(api_key, request_size, self._rng.random())
        end_ns = start_ns + round(service_ms * 1_000_000)
        heapq.heappush(self._free_at_ns, end_ns)
        return start_ns, end_ns

    def send(
        self, connection_id: str, api_key: int, response_size: int, now_ns: int
    ) -> tuple[int, int]:
        """(start, end) of the response's send on its connection's network thread."""
        processor = self._processor_of.get(connection_id)
        if processor is None:
            processor = len(self._processor_of) % len(self._network_free_at_ns)
            self._processor_of[connection_id] = processor
        start_ns = max(self._network_free_at_ns[processor], now_ns)
        send = self.model.send
        send_ms = (
            0.0 if send is None else send.service_ms(api_key, response_size, self._rng.random())
        )
        end_ns = start_ns + round(send_ms * 1_000_000)
        self._network_free_at_ns[processor] = end_ns
        return start_ns, end_ns

    def follower_work(self) -> float:
        """Seconds a follower works on a fetch answer (``FOLLOWER_WORK_KEY`` of the model:
        0 when it has none); on a handler of this pool when it has a clock."""
        if FOLLOWER_WORK_KEY not in self.model.by_api:
            return 0.0
        if self._now_ns is None:
            return self.model.service_ms(FOLLOWER_WORK_KEY, None, self._rng.random()) / 1000.0
        now_ns = self._now_ns()
        _, end_ns = self.occupy(FOLLOWER_WORK_KEY, 0, now_ns)
        return max(0, end_ns - now_ns) / 1e9

    def busy(self, now_ns: int) -> int:
        """How many handlers are busy at ``now_ns`` (for tests and metrics)."""
        return sum(1 for free in self._free_at_ns if free > now_ns)
