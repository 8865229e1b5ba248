"""Service times: how long a broker's request handler is busy with a request, per API and
request size, fitted from what a broker measured or given as a table.

A simulated broker (``simulation``) runs in virtual time, where this
interpreter's own speed means nothing: a request costs its broker what the model says.
The cost is Kafka's ``LocalTimeMs`` -- the time a request handler thread
(``num.io.threads``) spends on the request -- since that is what occupies a handler
and makes later requests wait in the request queue (``RequestQueueTimeMs``).

Fitted from samples of (API key, request size, local time): a capture's
``CaptureRequest`` records (``fit_capture_records``) or Kafka's request log, which has
no request size (every sample then lands in one size bucket; ``spark_jobs`` feeds it
through ``ServiceTimeFitter``). Each (API, size bucket) keeps a reservoir sample of at
most ``reservoir`` local times, drawn with a seeded ``random.Random``: memory is bounded
whatever the capture's length, and the same input and seed give the same model. The
model holds each reservoir as ``QUANTILES`` evenly spaced quantiles (p0..p100) and
draws a service time by the inverse of that distribution at a uniform number the
caller draws from its own seeded source.

Size buckets are powers of 16 from 1 KiB (``SIZE_BUCKET_BOUNDS``): a Produce of a few
records and one of a megabyte do not cost the same. A bucket with fewer than
``min_samples`` samples falls back to its API over every size, and an API never seen
to the distribution of every request.

The table (``to_table``/``from_table``, JSON-ready) is how a model travels -- between
the Spark jobs that fit it from a request log and the simulation that uses it -- and
how a person writes one by hand: an entry names its API by key or by Kafka's name
(``"api": "Produce"``), optionally a size bucket, and either ``quantiles_ms`` or one
constant ``service_ms``. Kafka has no such model: this is ours.

Sans-IO, and nothing here reads a clock or module-level randomness.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from protocol.api_registry import KIO_VERSIONS, api_name
from protocol.capture import CaptureRequest

__all__ = [
    "FETCH_FOLLOWER_KEY",
    "FETCH_FOLLOWER_NAME",
    "FOLLOWER_WORK_KEY",
    "FOLLOWER_WORK_NAME",
    "QUANTILES",
    "SIZE_BUCKET_BOUNDS",
    "TABLE_FORMAT",
    "ServiceTimeDistribution",
    "ServiceTimeFitter",
    "ServiceTimeModel",
    "fit_capture_records",
    "service_key",
    "service_key_of",
    "size_bucket",
]

#: Upper bounds (exclusive, bytes) of the request-size buckets; a last bucket above.
SIZE_BUCKET_BOUNDS: Final = (1 << 10, 1 << 14, 1 << 18, 1 << 22)
#: Quantiles kept per distribution: p0, p1, ..., p100.
QUANTILES: Final = 101
#: The table's ``format`` field.
TABLE_FORMAT: Final = "minikafka-service-times/1"

#: The model's key for a follower's Fetch. Kafka's request metrics tell a follower's
#: fetch ("FetchFollower") from a consumer's ("FetchConsumer"), and they cost
#: differently (a follower's reads every partition it follows, a consumer's answer is
#: larger to send): the model keeps them apart under this pseudo API key.
FETCH_FOLLOWER_KEY: Final = -1
FETCH_FOLLOWER_NAME: Final = "FetchFollower"
#: The model's key for a follower's own work on a fetch answer (``_with_links``): not a
#: request, so no Kafka metric names it.
FOLLOWER_WORK_KEY: Final = -2
FOLLOWER_WORK_NAME: Final = "ReplicaFetcherWork"
_FETCH: Final = 1

_API_KEYS_BY_NAME: Final = {
    **{spec.name: key for key, spec in KIO_VERSIONS.items()},
    FETCH_FOLLOWER_NAME: FETCH_FOLLOWER_KEY,
    FOLLOWER_WORK_NAME: FOLLOWER_WORK_KEY,
}


def service_key(api_key: int, replica_id: int | None) -> int:
    """The model's key of a request: its API key, or `FETCH_FOLLOWER_KEY` for a Fetch a
    follower sent (replica id >= 0)."""
    if api_key == _FETCH and replica_id is not None and replica_id >= 0:
        return FETCH_FOLLOWER_KEY
    return api_key


def service_key_of(api_key: int, request: Any) -> int:
    """``service_key`` of a decoded request (Fetch v15+ keeps the replica id in
    ``replica_state``)."""
    if api_key != _FETCH:
        return api_key
    replica_id = getattr(request, "replica_id", None)
    if replica_id is None:
        state = getattr(request, "replica_state", None)
        replica_id = getattr(state, "replica_id", None)
    return service_key(api_key, None if replica_id is None else int(replica_id))


def size_bucket(size_bytes: int | None) -> int | None:
    """The size bucket of a request of ``size_bytes`` (None when the size is unknown)."""
    if size_bytes is None:
        return None
    return bisect.bisect_right(SIZE_BUCKET_BOUNDS, size_bytes)


def _quantiles(values: list[float], n: int = QUANTILES) -> tuple[float, ...]:
    """``n`` evenly spaced quantiles of ``values`` (linear interpolation between order
    statistics, numpy's default)."""
    ordered = sorted(values)
    last = len(ordered) - 1
    out = []
    for i in range(n):
        position = last * i / (n - 1) if n > 1 else last / 2
        low = math.floor(position)
        high = min(low + 1, last)
        out.append(ordered[low] + (ordered[high] - ordered[low]) * (position - low))
    return tuple(out)


@dataclass(frozen=True)
class ServiceTimeDistribution:
    """A service-time distribution as evenly spaced quantiles from p0 to p100 (one
    value: a constant), and how many samples it was fitted from."""

    quantiles_ms: tuple[float, ...]
    samples: int = 0

    def __post_init__(self) -> None:
        if not self.quantiles_ms:
            raise ValueError("a service-time distribution needs at least one quantile")
        if any(not math.isfinite(q) or q < 0 for q in self.quantiles_ms):
            raise ValueError(f"service times must be finite and >= 0: {self.quantiles_ms}")
        if list(self.quantiles_ms) != sorted(self.quantiles_ms):
            raise ValueError("quantiles must not decrease")

    def sample(self, u: float) -> float:
        """The service time at cumulative probability ``u`` in [0, 1): the inverse of
        the distribution, linear between neighbouring quantiles."""
        q = self.quantiles_ms
        if len(q) == 1:
            return q[0]
        position = min(max(u, 0.0), 1.0) * (len(q) - 1)
        low = min(int(position), len(q) - 2)
        return q[low] + (q[low + 1] - q[low]) * (position - low)

    def quantile(self, p: float) -> float:
        """The ``p`` quantile (0..1)."""
        return self.sample(p)


_ZERO: Final = ServiceTimeDistribution((0.0,))


@dataclass(frozen=True)
class ServiceTimeModel:
    """Service times per API key and size bucket, with the fallbacks of the module doc."""

    by_bucket: Mapping[tuple[int, int], ServiceTimeDistribution] = field(default_factory=dict)
    by_api: Mapping[int, ServiceTimeDistribution] = field(default_factory=dict)
    default: ServiceTimeDistribution = _ZERO
    #: Where the model came from, for people ("capture DIR", "table FILE", ...).
    source: str = ""
    #: The response send times (Kafka's ResponseSendTimeMs: a network thread busy writing
    #: the answer), per API and *response* size, in the same form; None: sends take no time.
    send: ServiceTimeModel | None = None
    #: One-way link latency (base ms, uniform jitter ms) fitted from the capture
    #: (``fit_capture_records``); None: the simulation's default.
    link_latency_ms: tuple[float, float] | None = None

    def distribution(self, api_key: int, request_size: int | None) -> ServiceTimeDistribution:
        bucket = size_bucket(request_size)
        if bucket is not None:
            found = self.by_bucket.get((api_key, bucket))
            if found is not None:
                return found
        return self.by_api.get(api_key, self.default)

    def service_ms(self, api_key: int, request_size: int | None, u: float) -> float:
        """The service time of one request, at the caller's uniform draw ``u``."""
        return self.distribution(api_key, request_size).sample(u)

    def to_table(self) -> dict[str, Any]:
        """The model as a JSON-ready table (``from_table`` reads it back)."""
        entries: list[dict[str, Any]] = []
        for key, dist in sorted(self.by_api.items()):
            entries.append(_entry(key, None, dist))
        for (key, bucket), dist in sorted(self.by_bucket.items()):
            entries.append(_entry(key, bucket, dist))
        table: dict[str, Any] = {
            "format": TABLE_FORMAT,
            "source": self.source,
            "size_bucket_bounds_bytes": list(SIZE_BUCKET_BOUNDS),
            "default": {
                "samples": self.default.samples,
                "quantiles_ms": [*self.default.quantiles_ms],
            },
            "entries": entries,
        }
        if self.send is not None:
            table["send"] = self.send.to_table()
        if self.link_latency_ms is not None:
            base, jitter = self.link_latency_ms
            table["link_latency_ms"] = {"base": base, "jitter": jitter}
        return table

    @classmethod
    def from_table(cls, table: Mapping[str, Any], source: str = "") -> ServiceTimeModel:
        """Read a table (``to_table``'s or hand-written); ValueError names what is wrong."""
        fmt = table.get("format", TABLE_FORMAT)
        if fmt != TABLE_FORMAT:
            raise ValueError(f"not a service-time table of this version: format {fmt!r}")
        bounds = table.get("size_bucket_bounds_bytes", list(SIZE_BUCKET_BOUNDS))
        if list(bounds) != list(SIZE_BUCKET_BOUNDS):
            raise ValueError(f"size buckets {bounds} differ from {list(SIZE_BUCKET_BOUNDS)}")
        by_bucket: dict[tuple[int, int], ServiceTimeDistribution] = {}
        by_api: dict[int, ServiceTimeDistribution] = {}
        for index, entry in enumerate(table.get("entries", [])):
            try:
                key, bucket, dist = _read_entry(entry)
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"service-time table entry {index}: {exc}") from exc
            if bucket is None:
                by_api[key] = dist
            else:
                by_bucket[(key, bucket)] = dist
        default = _read_distribution(table["default"]) if "default" in table else _ZERO
        send = cls.from_table(table["send"]) if isinstance(table.get("send"), Mapping) else None
        link = table.get("link_latency_ms")
        latency = None
        if isinstance(link, Mapping):
            latency = (float(link["base"]), float(link.get("jitter", 0.0)))
            if not all(math.isfinite(v) and v >= 0 for v in latency):
                raise ValueError(f"link_latency_ms must be finite and >= 0: {link}")
        source = source or str(table.get("source", ""))
        return cls(by_bucket, by_api, default, source, send, latency)


def _entry(api_key: int, bucket: int | None, dist: ServiceTimeDistribution) -> dict[str, Any]:
    return {
        "api_key": api_key,
        "api": _key_name(api_key),
        "size_bucket": bucket,
        "samples": dist.samples,
        "quantiles_ms": [*dist.quantiles_ms],
    }


def _key_name(api_key: int) -> str:
    if api_key == FETCH_FOLLOWER_KEY:
        return FETCH_FOLLOWER_NAME
    if api_key == FOLLOWER_WORK_KEY:
        return FOLLOWER_WORK_NAME
    return api_name(api_key) if api_key in KIO_VERSIONS else str(api_key)


def _read_entry(entry: Mapping[str, Any]) -> tuple[int, int | None, ServiceTimeDistribution]:
    if "api_key" in entry:
        key = int(entry["api_key"])
    else:
        api = entry["api"]
        numeric = isinstance(api, int) or str(api).lstrip("-").isdigit()
        key = int(api) if numeric else _API_KEYS_BY_NAME[api]
    bucket = entry.get("size_bucket")
    if bucket is not None and not 0 <= int(bucket) <= len(SIZE_BUCKET_BOUNDS):
        raise ValueError(f"size_bucket {bucket} is not 0..{len(SIZE_BUCKET_BOUNDS)}")
    return key, None if bucket is None else int(bucket), _read_distribution(entry)


def _read_distribution(entry: Mapping[str, Any]) -> ServiceTimeDistribution:
    if "service_ms" in entry:
        return ServiceTimeDistribution((float(entry["service_ms"]),), int(entry.get("samples", 0)))
    quantiles = tuple(float(q) for q in entry["quantiles_ms"])
    return ServiceTimeDistribution(quantiles, int(entry.get("samples", 0)))


class _Reservoir:
    """At most ``size`` of the values offered, each kept with equal probability
    (Vitter's algorithm R), drawn from the fitter's seeded source."""

    def __init__(self, size: int, rng: random.Random):
        self.size, self.rng = size, rng
        self.values: list[float] = []
        self.seen = 0

    def offer(self, value: float) -> None:
        self.seen += 1
        if len(self.values) < self.size:
            self.values.append(value)
            return
        slot = self.rng.randrange(self.seen)
        if slot < self.size:
            self.values[slot] = value

    def distribution(self) -> ServiceTimeDistribution:
        return ServiceTimeDistribution(_quantiles(self.values), self.seen)


class ServiceTimeFitter:
    """Collects (API, request size, local time) samples; ``fit`` makes the model."""

    def __init__(self, *, seed: int = 0, reservoir: int = 4096, min_samples: int = 20):
        if reservoir < 1 or min_samples < 1:
            raise ValueError("the reservoir and min_samples must be at least 1")
        self._rng = random.Random(seed)
        self._reservoir, self._min_samples = reservoir, min_samples
        self._by_bucket: dict[tuple[int, int], _Reservoir] = {}
        self._by_api: dict[int, _Reservoir] = {}
        self._all = _Reservoir(reservoir, self._rng)

    def _of(self, table: dict[Any, _Reservoir], key: Any) -> _Reservoir:
        found = table.get(key)
        if found is None:
            found = table[key] = _Reservoir(self._reservoir, self._rng)
        return found

    def add(self, api_key: int, request_size: int | None, local_time_ms: float) -> None:
        if not math.isfinite(local_time_ms) or local_time_ms < 0:
            return  # a sample no broker can have measured: not a service time
        bucket = size_bucket(request_size)
        if bucket is not None:
            self._of(self._by_bucket, (api_key, bucket)).offer(local_time_ms)
        self._of(self._by_api, api_key).offer(local_time_ms)
        self._all.offer(local_time_ms)

    def fit(self, source: str = "") -> ServiceTimeModel:
        """The model of every sample added; buckets with too few samples are left to
        their API's distribution."""
        by_bucket = {
            key: r.distribution()
            for key, r in sorted(self._by_bucket.items())
            if r.seen >= self._min_samples
        }
        by_api = {key: r.distribution() for key, r in sorted(self._by_api.items())}
        default = self._all.distribution() if self._all.seen else _ZERO
        return ServiceTimeModel(by_bucket, by_api, default, source)


def fit_capture_records(
    records: Iterable[object], *, source: str = "", seed: int = 0, reservoir: int = 4096
) -> ServiceTimeModel:
    """Fit from a capture's records (``protocol.capture_files.read_capture``'s output;
    delayed-operation events are ignored): every served request, client and
    inter-broker alike, since follower fetches occupy handlers too (under
    `FETCH_FOLLOWER_KEY`, as Kafka's metrics keep them apart); the send times
    (``ServiceTimeModel.send``) by response size."""
    fitter = ServiceTimeFitter(seed=seed, reservoir=reservoir)
    sends = ServiceTimeFitter(seed=seed + 1, reservoir=reservoir)
    gaps = {key: _Reservoir(reservoir, random.Random(seed + 2 + key)) for key in (-1, 1)}
    last: dict[tuple[int, str], CaptureRequest] = {}
    for record in records:
        if isinstance(record, CaptureRequest):
            key = service_key(record.api_key, record.replica_id)
            fitter.add(key, record.request_size, record.local_time_ms)
            sends.add(key, record.response_size, record.response_send_time_ms)
            if key in gaps:
                _offer_turnaround(last, record, gaps[key])
    model = replace(fitter.fit(source), send=sends.fit(source))
    return _with_links(model, follower=gaps[FETCH_FOLLOWER_KEY], consumer=gaps[_FETCH])


def _offer_turnaround(
    last: dict[tuple[int, str], CaptureRequest], record: CaptureRequest, out: _Reservoir
) -> None:
    """The time from a fetch answer leaving the broker to the next fetch arriving on the
    same connection (a connection's records come in order)."""
    where = (record.broker_id, record.connection_id)
    previous = last.get(where)
    last[where] = record
    if previous is None or previous.sequence + 1 != record.sequence:
        return
    answered_us = previous.received_unix_us + previous.total_time_ms * 1000.0
    gap_ms = (record.received_unix_us - answered_us) / 1000.0
    if gap_ms >= 0:
        out.offer(gap_ms)


#: Fewest turnarounds a link or follower-work fit is made from.
_MIN_TURNAROUNDS: Final = 20


def _with_links(
    model: ServiceTimeModel, *, follower: _Reservoir, consumer: _Reservoir
) -> ServiceTimeModel:
    """The model with the links' latency and the followers' own work, from fetch
    turnarounds (an answer leaving the broker to the next fetch arriving).

    A consumer's turnaround is two trips over the link and next to no work (a client
    fetches again at once): its p10 is two base trips and its median two base trips plus
    one jitter width (the median of two uniform jitters). A follower's turnaround is the
    same two trips plus its fetcher's work on the answer (appending it, building the next
    fetch), which Kafka's request metrics do not show, plus whatever else kept its broker
    busy meanwhile. The work alone is what the fastest turnarounds show, those between
    the p10 and the p30, less the link's median round trip: kept as `FOLLOWER_WORK_KEY`,
    so that waiting comes from the simulation (``--shared-threads``), not twice. Without
    consumer fetches the link is fitted from the followers' turnarounds alone (their work
    then rides on the link)."""
    link = consumer if consumer.seen >= _MIN_TURNAROUNDS else follower
    if link.seen < _MIN_TURNAROUNDS:
        return model
    q = _quantiles(link.values, 11)  # p0, p10, ..., p100
    base, jitter = q[1] / 2, max(q[5] - q[1], 0.0)
    latency = (round(base, 4), round(jitter, 4))
    if link is follower:
        return replace(model, link_latency_ms=latency)
    round_trip = 2 * base + jitter
    if follower.seen < _MIN_TURNAROUNDS:
        return replace(model, link_latency_ms=latency)
    ordered = sorted(follower.values)
    fastest = ordered[len(ordered) // 10 : max(len(ordered) * 3 // 10, len(ordered) // 10 + 1)]
    work = [max(gap - round_trip, 0.0) for gap in fastest]
    by_api = {
        **model.by_api,
        FOLLOWER_WORK_KEY: ServiceTimeDistribution(_quantiles(work), follower.seen),
    }
    return replace(model, by_api=by_api, link_latency_ms=latency)
