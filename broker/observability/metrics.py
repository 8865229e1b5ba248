"""Kafka's broker metrics, in Prometheus form, for ``/metrics``.

Request metrics follow Kafka's ``kafka.network:type=RequestMetrics`` (request names as
Kafka names them; a Fetch counts under ``Fetch`` and under ``FetchConsumer`` or
``FetchFollower``), with the six timing phases of ``RequestTiming``. Purgatory,
replica-manager and controller gauges are read from the broker's state when
``/metrics`` is scraped, so they cost nothing per request. The metrics clients push
(KIP-714, when the receiver is on) are there too, under ``client_telemetry_``
(``broker/observability/client_telemetry/telemetry_metrics.py``).

JMX names map to Prometheus the way the usual JMX exporter rules do: domain, type and
name, lower-cased and joined by ``_``, other key properties as labels, plus ``broker``:
``kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce`` becomes
``kafka_network_requestmetrics_totaltimems{request="Produce",broker="0"}``. Kafka's
time metrics are histograms with percentiles; here they are Prometheus histograms with
fixed buckets (quantiles are then ``histogram_quantile`` away). Meters (``...PerSec``)
are counters (``_total``); their rate is Prometheus's job.

Per-request cost is kept small on purpose: the observer touches no prometheus-client
object on the request path, only lists of ints (one ``bisect`` of the phase's integer
nanoseconds and two adds per phase, unrolled; no float until someone reads);
prometheus-client builds the text at scrape time, from a registry of our own (never its
global one, so two clusters in one process do not collide).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from broker.observability.client_telemetry.telemetry_metrics import client_telemetry_families
from broker.quota.quota_metrics import quota_families, replication_quota_families
from broker.remote.remote_log_manager import RemoteLogManager
from protocol.api_registry import KIO_VERSIONS, api_name

if TYPE_CHECKING:
    from broker.server.broker_server import Broker
    from broker.server.context import RequestContext

__all__ = [
    "BUCKETS_MS",
    "PHASES",
    "Histogram",
    "MetricsCollector",
    "RequestMetrics",
    "render_prometheus",
]

FETCH_KEY = 1
CONSUMER_FETCH = "FetchConsumer"
FOLLOWER_FETCH = "FetchFollower"

PHASES: tuple[str, ...] = (
    "RequestQueueTimeMs",
    "LocalTimeMs",
    "RemoteTimeMs",
    "ResponseQueueTimeMs",
    "ResponseSendTimeMs",
    "TotalTimeMs",
)
"""Kafka's RequestMetrics time names, in the order ``RequestMetrics`` records them."""

BUCKETS_MS: tuple[float, ...] = (
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1000.0,
    2500.0,
    5000.0,
    10000.0,
    30000.0,
    60000.0,
)
"""Upper bounds (``le``) of the time histograms; +Inf is implied."""

_NS_PER_MS = 1_000_000.0


class Histogram:
    """A fixed-bucket histogram: per-bucket counts (not cumulative), sum and count."""

    __slots__ = ("count", "counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS_MS) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS_MS, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus buckets: (le, observations <= le), ending with +Inf."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip(BUCKETS_MS, self.counts, strict=False):
            running += n
            out.append((repr(bound), float(running)))
        out.append(("+Inf", float(self.count)))
        return out

    def count_at_most(self, value_ms: float) -> int:
        """Observations in buckets whose upper bound is <= ``value_ms`` (for tests)."""
        index = bisect.bisect_right(BUCKETS_MS, value_ms)
        return sum(self.counts[:index])


_NS_BUCKETS: tuple[int, ...] = tuple(round(bound * _NS_PER_MS) for bound in BUCKETS_MS)
"""``BUCKETS_MS`` in nanoseconds: phases are bucketed as the integer stamps' differences."""
_STRIDE = len(BUCKETS_MS) + 1  # buckets of one phase in ``_ApiMetrics.counts``


class _ApiMetrics:
    """One request name's counters and time histograms, kept flat for the request path:
    ``counts`` holds the six phases' buckets one after the other (not cumulative) and
    ``sums_ns`` their sums in nanoseconds; a phase's observation count is the sum of its
    buckets. ``histograms`` builds ``Histogram`` snapshots for readers."""

    __slots__ = ("counts", "requests_by_version", "sums_ns")

    def __init__(self) -> None:
        self.counts = [0] * (_STRIDE * len(PHASES))
        self.sums_ns = [0] * len(PHASES)
        self.requests_by_version: dict[int, int] = {}

    def observe_ns(
        self, version: int, queue: int, local: int, remote: int, wait: int, send: int, total: int
    ) -> None:
        """One request's six phases (``PHASES`` order), in nanoseconds, none negative."""
        by_version = self.requests_by_version
        by_version[version] = by_version.get(version, 0) + 1
        # Unrolled: this runs for every request; one bisect and two adds per phase.
        counts = self.counts
        sums = self.sums_ns
        bisect_left = bisect.bisect_left
        b = _NS_BUCKETS
        counts[bisect_left(b, queue)] += 1
        counts[_STRIDE + bisect_left(b, local)] += 1
        counts[2 * _STRIDE + bisect_left(b, remote)] += 1
        counts[3 * _STRIDE + bisect_left(b, wait)] += 1
        counts[4 * _STRIDE + bisect_left(b, send)] += 1
        counts[5 * _STRIDE + bisect_left(b, total)] += 1
        sums[0] += queue
        sums[1] += local
        sums[2] += remote
        sums[3] += wait
        sums[4] += send
        sums[5] += total

    def histogram(self, phase: int) -> Histogram:
        """A snapshot of phase ``phase`` (an index into ``PHASES``)."""
        h = Histogram()
        h.counts = self.counts[phase * _STRIDE : (phase + 1) * _STRIDE]
        h.count = sum(h.counts)
        h.sum = self.sums_ns[phase] / _NS_PER_MS
        return h

    @property
    def histograms(self) -> tuple[Histogram, ...]:
        return tuple(self.histogram(i) for i in range(len(PHASES)))


class RequestMetrics:
    """A broker observer keeping Kafka's RequestMetrics and delayed-operation expiry
    meters; one per broker id (the composition root keeps it across restarts)."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.apis: dict[str, _ApiMetrics] = {}
        self._names: dict[int, str] = {key: api_name(key) for key in KIO_VERSIONS}
        self._by_key: dict[int, _ApiMetrics] = {}  # api key -> its apis entry
        # Follower fetches in flight: id(ctx) -> ctx (the ctx is held, so its id cannot
        # be reused while it is here; a connection lost mid-fetch leaves an entry, which
        # the size check below bounds).
        self._follower_fetches: dict[int, RequestContext] = {}
        self.fetch_expirations: dict[str, int] = {"consumer": 0, "follower": 0}
        self.produce_expirations = 0

    # -- observer interface -------------------------------------------------------------

    def request_received(self, ctx: RequestContext, request: Any, frame: bytes) -> None:
        if ctx.header.api_key == FETCH_KEY and _replica_id(request) >= 0:
            followers = self._follower_fetches
            if len(followers) > 4096:
                followers.clear()
            followers[id(ctx)] = ctx

    def request_completed(self, ctx: RequestContext, response: Any, size: int) -> None:
        t = ctx.timing
        received = t.received_ns
        local_start = t.local_start_ns
        local_end = t.local_end_ns
        remote_end = t.remote_end_ns or local_end
        send_start = t.send_start_ns or remote_end
        send_end = t.send_end_ns or send_start
        # The stamps come from one monotonic clock in this order; the guards only keep
        # a stamp that was never taken (0) from making a phase negative.
        queue = local_start - received
        local = local_end - local_start
        remote = remote_end - local_end
        wait = send_start - remote_end
        send = send_end - send_start
        total = send_end - received
        if queue < 0 or local < 0 or remote < 0 or wait < 0 or send < 0 or total < 0:
            queue, local, remote = max(queue, 0), max(local, 0), max(remote, 0)
            wait, send, total = max(wait, 0), max(send, 0), max(total, 0)
        header = ctx.header
        api_key = header.api_key
        metrics = self._by_key.get(api_key)
        if metrics is None:
            name = self._names.get(api_key) or f"ApiKey{api_key}"
            metrics = self._by_key[api_key] = self._api(name)
        version = header.api_version
        metrics.observe_ns(version, queue, local, remote, wait, send, total)
        if api_key == FETCH_KEY:
            follower = self._follower_fetches.pop(id(ctx), None) is ctx
            self._api(FOLLOWER_FETCH if follower else CONSUMER_FETCH).observe_ns(
                version, queue, local, remote, wait, send, total
            )
            if t.purgatory_outcome == "expired":
                self.fetch_expirations["follower" if follower else "consumer"] += 1
        elif t.purgatory_outcome == "expired" and t.purgatory == "Produce":
            self.produce_expirations += 1

    def _api(self, name: str) -> _ApiMetrics:
        metrics = self.apis.get(name)
        if metrics is None:
            metrics = self.apis[name] = _ApiMetrics()
        return metrics

    # -- reading ------------------------------------------------------------------------

    def histogram(self, request: str, phase: str) -> Histogram:
        """A snapshot of the histogram of ``phase`` (a name from ``PHASES``) for
        ``request``; empty when no such request completed yet."""
        metrics = self.apis.get(request)
        if metrics is None:
            return Histogram()
        return metrics.histogram(PHASES.index(phase))

    def request_count(self, request: str) -> int:
        metrics = self.apis.get(request)
        return sum(metrics.requests_by_version.values()) if metrics is not None else 0


def _replica_id(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    if state is not None:
        return int(state.replica_id)
    return int(getattr(request, "replica_id", -1))


# -- scrape time ----------------------------------------------------------------------------


class MetricsCollector:
    """A prometheus-client collector reading a cluster's brokers at scrape time.

    ``brokers`` is called at each scrape (brokers may be replaced by a restart);
    ``injected`` gives the fault injector's per-broker count of failed requests.
    """

    def __init__(
        self,
        brokers: Callable[[], Sequence[Broker]],
        request_metrics: Mapping[int, RequestMetrics],
        injected: Callable[[], Mapping[int, int]] | None = None,
    ) -> None:
        self._brokers = brokers
        self._request_metrics = request_metrics
        self._injected = injected

    def collect(self) -> Iterator[Metric]:
        brokers = list(self._brokers())
        yield from self._request_families()
        yield from self._purgatory_families(brokers)
        yield from self._remote_families(brokers)
        yield from self._replica_families(brokers)
        yield from self._share_dlq_families(brokers)
        yield from quota_families((b.broker_id, b.services.quota_managers) for b in brokers)
        yield from replication_quota_families(
            (b.broker_id, b.services.replica_manager.replication_quotas) for b in brokers
        )
        telemetry = [
            (b.broker_id, b.services.client_telemetry.receiver)
            for b in brokers
            if b.services.client_telemetry is not None
        ]
        if telemetry:
            yield from client_telemetry_families(telemetry)
        if self._injected is not None:
            injected = CounterMetricFamily(
                "minikafka_faults_injected",
                "Requests answered with an injected error instead of being handled.",
                labels=["broker"],
            )
            counts = self._injected()
            for broker in brokers:
                injected.add_metric([str(broker.broker_id)], counts.get(broker.broker_id, 0))
            yield injected

    def _request_families(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Kafka RequestMetrics RequestsPerSec: requests completed, by API and version.",
            labels=["request", "version", "broker"],
        )
        histograms = [
            HistogramMetricFamily(
                f"kafka_network_requestmetrics_{phase.lower()}",
                f"Kafka RequestMetrics {phase}, milliseconds.",
                labels=["request", "broker"],
            )
            for phase in PHASES
        ]
        for broker_id, metrics in sorted(self._request_metrics.items()):
            b = str(broker_id)
            for name, api in sorted(metrics.apis.items()):
                for version, n in sorted(api.requests_by_version.items()):
                    requests.add_metric([name, str(version), b], n)
                for family, histogram in zip(histograms, api.histograms, strict=True):
                    family.add_metric([name, b], histogram.cumulative(), histogram.sum)
        yield requests
        yield from histograms
        fetch_expires = CounterMetricFamily(
            "kafka_server_delayedfetchmetrics_expirespersec",
            "Kafka DelayedFetchMetrics ExpiresPerSec: fetches that waited out max.wait.",
            labels=["fetcherType", "broker"],
        )
        produce_expires = CounterMetricFamily(
            "kafka_server_delayedproducemetrics_expirespersec",
            "Kafka DelayedProduceMetrics ExpiresPerSec: produces that timed out waiting "
            "for acks (summed over partitions).",
            labels=["broker"],
        )
        for broker_id, metrics in sorted(self._request_metrics.items()):
            b = str(broker_id)
            for fetcher, n in sorted(metrics.fetch_expirations.items()):
                fetch_expires.add_metric([fetcher, b], n)
            produce_expires.add_metric([b], metrics.produce_expirations)
        yield fetch_expires
        yield produce_expires

    def _purgatory_families(self, brokers: Sequence[Broker]) -> Iterator[Metric]:
        labels = ["delayedOperation", "broker"]
        size = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Kafka PurgatorySize: watcher entries across keys (completed ones until purged).",
            labels=labels,
        )
        delayed = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_numdelayedoperations",
            "Kafka NumDelayedOperations: operations waiting in the purgatory's timer.",
            labels=labels,
        )
        expired = CounterMetricFamily(
            "kafka_server_delayedoperationpurgatory_expirations",
            "Operations completed by expiring, per purgatory.",
            labels=labels,
        )
        for broker in brokers:
            b = str(broker.broker_id)
            for name, purgatory in broker.purgatories.purgatories.items():
                size.add_metric([name, b], purgatory.watched())
                delayed.add_metric([name, b], purgatory.num_delayed())
                expired.add_metric([name, b], purgatory.expired_count)
        yield size
        yield delayed
        yield expired

    def _remote_families(self, brokers: Sequence[Broker]) -> Iterator[Metric]:
        """Tiered storage (KIP-405): Kafka's BrokerTopicMetrics Remote* meters, as totals,
        RemoteCopyLagBytes (bytes of rolled segments not yet copied), RemoteLogSizeBytes
        per partition (KIP-963) and the reader
        pool's RemoteLogReaderTaskQueueSize/AvgIdlePercent; none without
        remote.log.storage.system.enable."""
        labels = ["broker"]
        families = {
            "copy_bytes": CounterMetricFamily(
                "kafka_server_brokertopicmetrics_remotecopybytespersec",
                "Kafka RemoteCopyBytesPerSec: bytes copied to the remote tier.",
                labels=labels,
            ),
            "fetch_bytes": CounterMetricFamily(
                "kafka_server_brokertopicmetrics_remotefetchbytespersec",
                "Kafka RemoteFetchBytesPerSec: bytes read from the remote tier for fetches.",
                labels=labels,
            ),
            "fetch_requests": CounterMetricFamily(
                "kafka_server_brokertopicmetrics_remotefetchrequestspersec",
                "Kafka RemoteFetchRequestsPerSec: remote reads started for fetches.",
                labels=labels,
            ),
            "copy_errors": CounterMetricFamily(
                "kafka_server_brokertopicmetrics_remotecopyerrorspersec",
                "Kafka RemoteCopyErrorsPerSec: copies the remote tier failed.",
                labels=labels,
            ),
        }
        lag = GaugeMetricFamily(
            "kafka_server_brokertopicmetrics_remotecopylagbytes",
            "Kafka RemoteCopyLagBytes: bytes of rolled segments not yet in the remote tier.",
            labels=labels,
        )
        queue = GaugeMetricFamily(
            "kafka_log_remote_remotestoragethreadpool_remotelogreadertaskqueuesize",
            "Kafka RemoteLogReaderTaskQueueSize: remote reads waiting for a reader thread.",
            labels=labels,
        )
        remote_size = GaugeMetricFamily(
            "kafka_server_brokertopicmetrics_remotelogsizebytes",
            "Kafka RemoteLogSizeBytes (KIP-963): bytes the remote tier holds per partition, "
            "from its leader.",
            labels=["broker", "topic", "partition"],
        )
        idle = GaugeMetricFamily(
            "kafka_log_remote_remotestoragethreadpool_remotelogreaderavgidlepercent",
            "Kafka RemoteLogReaderAvgIdlePercent: the reader threads not reading, now.",
            labels=labels,
        )
        any_remote = False
        for broker in brokers:
            rlm = broker.replica_manager.remote_log_manager
            if not isinstance(rlm, RemoteLogManager):
                continue
            any_remote = True
            b = str(broker.broker_id)
            for attribute, family in families.items():
                family.add_metric([b], getattr(rlm, attribute))
            lag.add_metric([b], sum(rlm.copy_lag_bytes.values()))
            queue.add_metric([b], rlm.reader_pool.queue_size)
            for (topic, index), partition in sorted(rlm.partitions.items()):
                if partition.is_leader and rlm.remote_config(topic) is not None:
                    size = rlm.remote_size_bytes((topic, index))
                    remote_size.add_metric([b, topic, str(index)], size)
            idle.add_metric([b], rlm.reader_pool.idle_percent)
        if any_remote:
            yield from families.values()
            yield from (lag, remote_size, queue, idle)

    def _share_dlq_families(self, brokers: Sequence[Broker]) -> Iterator[Metric]:
        """Kafka 4.4's ShareGroupMetrics DLQ meters (KIP-1191), per group, as totals;
        none until a group has dead-lettered something."""
        labels = ["group", "broker"]
        families = {
            "records": CounterMetricFamily(
                "kafka_server_sharegroupmetrics_deadletterqueuerecordcount",
                "Kafka DeadLetterQueueRecordCount: records written to the group's DLQ topic.",
                labels=labels,
            ),
            "produce_requests": CounterMetricFamily(
                "kafka_server_sharegroupmetrics_deadletterqueuetotalproducerequestspersec",
                "Kafka DeadLetterQueueTotalProduceRequestsPerSec: Produce requests to the DLQ.",
                labels=labels,
            ),
            "failed_produce_requests": CounterMetricFamily(
                "kafka_server_sharegroupmetrics_deadletterqueuefailedproducerequestspersec",
                "Kafka DeadLetterQueueFailedProduceRequestsPerSec: DLQ writes that failed.",
                labels=labels,
            ),
        }
        seen = False
        for broker in brokers:
            dead_letters = broker.services.share_partition_manager.dead_letters
            if dead_letters is None:
                continue
            for group, metrics in sorted(dead_letters.metrics.items()):
                seen = True
                for attribute, family in families.items():
                    family.add_metric([group, str(broker.broker_id)], getattr(metrics, attribute))
        if seen:
            yield from families.values()

    def _replica_families(self, brokers: Sequence[Broker]) -> Iterator[Metric]:
        labels = ["broker"]
        under = GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Kafka UnderReplicatedPartitions: partitions led here whose ISR is short.",
            labels=labels,
        )
        leaders = GaugeMetricFamily(
            "kafka_server_replicamanager_leadercount",
            "Kafka LeaderCount: partitions this broker leads.",
            labels=labels,
        )
        partitions = GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount",
            "Kafka PartitionCount: partitions hosted on this broker.",
            labels=labels,
        )
        shrinks = CounterMetricFamily(
            "kafka_server_replicamanager_isrshrinkspersec",
            "Kafka IsrShrinksPerSec: ISR shrinks of partitions led here.",
            labels=labels,
        )
        expands = CounterMetricFamily(
            "kafka_server_replicamanager_isrexpandspersec",
            "Kafka IsrExpandsPerSec: ISR expansions of partitions led here.",
            labels=labels,
        )
        up = GaugeMetricFamily(
            "minikafka_broker_up", "1 while the broker is alive in the cluster.", labels=labels
        )
        active = GaugeMetricFamily(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "Kafka ActiveControllerCount: 1 on the controller.",
            labels=labels,
        )
        offline = GaugeMetricFamily(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Kafka OfflinePartitionsCount (reported by the controller): partitions with "
            "no live leader.",
            labels=labels,
        )
        for broker in brokers:
            b = str(broker.broker_id)
            cluster = broker.services.metadata
            endpoint = cluster.brokers.get(broker.broker_id)
            alive = endpoint is not None and endpoint.alive
            hosted, led, short = _partition_counts(broker)
            manager = broker.replica_manager
            under.add_metric([b], short)
            leaders.add_metric([b], led)
            partitions.add_metric([b], hosted)
            shrinks.add_metric([b], manager.isr_shrinks)
            expands.add_metric([b], manager.isr_expands)
            up.add_metric([b], 1 if alive else 0)
            is_controller = cluster.controller_id == broker.broker_id and alive
            active.add_metric([b], 1 if is_controller else 0)
            if is_controller:
                offline.add_metric([b], _offline_partitions(broker))
        yield from (under, leaders, partitions, shrinks, expands, up, active, offline)


def _partition_counts(broker: Broker) -> tuple[int, int, int]:
    """(hosted, led, led-and-under-replicated) from the cluster metadata, the
    controller's view of leaders and ISRs."""
    hosted = led = short = 0
    for topic in broker.services.metadata.topics.values():
        for state in topic.partitions:
            if broker.broker_id in state.replicas:
                hosted += 1
            if state.leader == broker.broker_id:
                led += 1
                if len(state.isr) < len(state.replicas):
                    short += 1
    return hosted, led, short


def _offline_partitions(broker: Broker) -> int:
    cluster = broker.services.metadata
    alive = {b.broker_id for b in cluster.alive_brokers()}
    return sum(
        1
        for topic in cluster.topics.values()
        for state in topic.partitions
        if state.leader < 0 or state.leader not in alive
    )


def render_prometheus(
    brokers: Callable[[], Sequence[Broker]],
    request_metrics: Mapping[int, RequestMetrics],
    injected: Callable[[], Mapping[int, int]] | None = None,
) -> bytes:
    """The Prometheus text exposition (format 0.0.4) of the cluster's metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MetricsCollector(brokers, request_metrics, injected))
    return generate_latest(registry)
