"""A broker's request handler threads in virtual time: service times and the request queue.

Kafka hands each request to one of ``num.io.threads`` request handler threads
(``KafkaRequestHandlerPool``) through one FIFO request queue; a request that finds them
all busy waits, and that wait is its ``RequestQueueTimeMs``. In a simulation the
handlers run in no time at all, so without a model a simulated broker would never be
busy and never queue. ``SimulatedRequestHandlers`` gives each request a service time
drawn from a ``protocol.service_times.ServiceTimeModel`` (fitted from a capture or
Kafka's request log, or a table) and the earliest-free of the broker's handlers, in
arrival order -- the dispatcher (``broker.dispatch.HandlerPool``) runs the request
when its handler is free and has its answer ready when the service time is over.

Where we differ from Kafka: the network threads (``num.network.threads``, the
response-queue and send parts) are not modelled yet, and a request's handler work
is done at the start of its service time (its effects -- an append, a join -- happen
then; its answer leaves at the end). A request that parks holds its handler for its
modelled local time, which is what Kafka measured as the handler's time before it
parked. Draws come from a seeded ``random.Random`` per broker, in request order,
so the same seed gives the same service times.
"""

from __future__ import annotations

import heapq
import json
import random
from pathlib import Path

from protocol.capture_files import read_capture
from protocol.service_times import ServiceTimeModel, fit_capture_records

__all__ = ["SimulatedRequestHandlers", "load_service_times"]

#: Kafka's default ``num.io.threads``.
DEFAULT_IO_THREADS = 8


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


class SimulatedRequestHandlers:
    """``threads`` handlers, each free from a virtual instant on (monotonic ns)."""

    def __init__(self, threads: int, model: ServiceTimeModel, rng: random.Random) -> None:
        if threads < 1:
            raise ValueError(f"num.io.threads must be at least 1, not {threads}")
        self.threads = threads
        self.model = model
        self._rng = rng
        self._free_at_ns = [0] * threads  # a heap: the earliest-free handler first

    def occupy(self, api_key: int, request_size: int, now_ns: int) -> tuple[int, int]:
        """(start, end) of the request on the earliest-free handler, which it then holds
        until ``end``: FIFO, since requests are occupied in the order they arrive."""
        free_ns = heapq.heappop(self._free_at_ns)
        start_ns = max(free_ns, now_ns)
        service_ms = self.model.service_ms(api_key, request_size, self._rng.random())
        end_ns = start_ns + round(service_ms * 1_000_000)
        heapq.heappush(self._free_at_ns, end_ns)
        return start_ns, end_ns

    def busy(self, now_ns: int) -> int:
        """How many handlers are busy at ``now_ns`` (for tests and metrics)."""
        return sum(1 for free in self._free_at_ns if free > now_ns)
