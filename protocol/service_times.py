"""Service times: how long a broker's request handler is busy with a request, per API and
request size, fitted from what a broker measured or given as a table.

A simulated broker (``broker.simulation``) runs in virtual time, where this
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
    "QUANTILES",
    "SIZE_BUCKET_BOUNDS",
    "TABLE_FORMAT",
    "ServiceTimeDistribution",
    "ServiceTimeFitter",
    "ServiceTimeModel",
    "fit_capture_records",
    "size_bucket",
]

#: Upper bounds (exclusive, bytes) of the request-size buckets; a last bucket above.
SIZE_BUCKET_BOUNDS: Final = (1 << 10, 1 << 14, 1 << 18, 1 << 22)
#: Quantiles kept per distribution: p0, p1, ..., p100.
QUANTILES: Final = 101
#: The table's ``format`` field.
TABLE_FORMAT: Final = "minikafka-service-times/1"

_API_KEYS_BY_NAME: Final = {spec.name: key for key, spec in KIO_VERSIONS.items()}


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
        return cls(by_bucket, by_api, default, source or str(table.get("source", "")), send)


def _entry(api_key: int, bucket: int | None, dist: ServiceTimeDistribution) -> dict[str, Any]:
    return {
        "api_key": api_key,
        "api": api_name(api_key) if api_key in KIO_VERSIONS else str(api_key),
        "size_bucket": bucket,
        "samples": dist.samples,
        "quantiles_ms": [*dist.quantiles_ms],
    }


def _read_entry(entry: Mapping[str, Any]) -> tuple[int, int | None, ServiceTimeDistribution]:
    if "api_key" in entry:
        key = int(entry["api_key"])
    else:
        api = entry["api"]
        key = int(api) if isinstance(api, int) or str(api).isdigit() else _API_KEYS_BY_NAME[api]
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
    inter-broker alike, since follower fetches occupy handlers too; the send times
    (``ServiceTimeModel.send``) by response size."""
    fitter = ServiceTimeFitter(seed=seed, reservoir=reservoir)
    sends = ServiceTimeFitter(seed=seed + 1, reservoir=reservoir)
    for record in records:
        if isinstance(record, CaptureRequest):
            fitter.add(record.api_key, record.request_size, record.local_time_ms)
            sends.add(record.api_key, record.response_size, record.response_send_time_ms)
    model = fitter.fit(source)
    return replace(model, send=sends.fit(source))
