"""Kafka's request and purgatory metrics: what the observer records and how /metrics
names it. Timings are synthetic nanosecond stamps, so nothing here reads a clock."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.app import build_broker
from broker.cluster.cluster_metadata import ClusterMetadata
from broker.config.broker_config import BrokerConfig
from broker.control.faults import NoFaults
from broker.log import LogManager
from broker.observability.metrics import (
    BUCKETS_MS,
    PHASES,
    Histogram,
    RequestMetrics,
    render_prometheus,
)
from broker.server.broker_options import BrokerOptions
from broker.server.broker_server import Broker
from broker.server.cluster_stores import ClusterStores
from broker.server.context import ConnectionInfo, RequestContext
from broker.server.request_timing import RequestTiming
from protocol.api_registry import request_class
from protocol.builders import request_builder
from protocol.codec import RequestHeader
from purgatory import DelayedOperation, ManualClock

MS = 1_000_000


def _ctx(api_key: int, version: int, stamps_ms: dict[str, float], **timing: Any) -> RequestContext:
    """A completed request whose timing stamps are ``stamps_ms`` (ms from 0)."""
    t = RequestTiming(**timing)
    for name, ms in stamps_ms.items():
        setattr(t, name, int(ms * MS))
    info = ConnectionInfo("c", "127.0.0.1", 1, 9092)
    return RequestContext(RequestHeader(api_key, version, 1, "x"), info, None, t)  # type: ignore[arg-type]


STAMPS = {
    "received_ns": 10,
    "local_start_ns": 12,  # request queue 2
    "local_end_ns": 15,  # local 3
    "remote_end_ns": 115,  # remote 100
    "send_start_ns": 116,  # response queue 1
    "send_end_ns": 116.5,  # send 0.5
}


def _fetch_request(replica_id: int) -> Any:
    b = request_builder(1, 11)
    return b.FetchRequest(
        replica_id=replica_id,
        max_wait=500,
        min_bytes=1,
        max_bytes=1024,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(),
        forgotten_topics_data=(),
        rack_id="",
    )


def test_the_six_phases_land_in_kafka_s_names() -> None:
    metrics = RequestMetrics(0)
    metrics.request_completed(_ctx(0, 9, STAMPS, purgatory="Produce"), object(), 10)
    expected = {
        "RequestQueueTimeMs": 2.0,
        "LocalTimeMs": 3.0,
        "RemoteTimeMs": 100.0,
        "ResponseQueueTimeMs": 1.0,
        "ResponseSendTimeMs": 0.5,
        "TotalTimeMs": 106.5,
    }
    for phase, value in expected.items():
        histogram = metrics.histogram("Produce", phase)
        assert histogram.count == 1, phase
        assert histogram.sum == pytest.approx(value), phase
    assert metrics.request_count("Produce") == 1
    assert metrics.request_count("Fetch") == 0


def test_a_request_not_parked_has_no_remote_time() -> None:
    metrics = RequestMetrics(0)
    stamps = {k: v for k, v in STAMPS.items() if k != "remote_end_ns"}
    metrics.request_completed(_ctx(3, 12, stamps), object(), 10)
    assert metrics.histogram("Metadata", "RemoteTimeMs").sum == 0
    assert metrics.histogram("Metadata", "ResponseQueueTimeMs").sum == pytest.approx(101.0)


def test_fetches_count_as_fetch_and_as_consumer_or_follower() -> None:
    metrics = RequestMetrics(0)
    consumer, follower = _ctx(1, 11, STAMPS), _ctx(1, 11, STAMPS)
    metrics.request_received(consumer, _fetch_request(-1), b"")
    metrics.request_received(follower, _fetch_request(2), b"")
    metrics.request_completed(follower, object(), 10)
    metrics.request_completed(consumer, object(), 10)
    assert metrics.request_count("Fetch") == 2
    assert metrics.request_count("FetchConsumer") == 1
    assert metrics.request_count("FetchFollower") == 1


def test_expired_operations_are_counted_by_kind() -> None:
    metrics = RequestMetrics(0)
    fetch = _ctx(1, 11, STAMPS, purgatory="Fetch", purgatory_outcome="expired")
    metrics.request_received(fetch, _fetch_request(-1), b"")
    metrics.request_completed(fetch, object(), 10)
    produce = _ctx(0, 9, STAMPS, purgatory="Produce", purgatory_outcome="expired")
    metrics.request_completed(produce, object(), 10)
    done = _ctx(0, 9, STAMPS, purgatory="Produce", purgatory_outcome="completed")
    metrics.request_completed(done, object(), 10)
    assert metrics.fetch_expirations == {"consumer": 1, "follower": 0}
    assert metrics.produce_expirations == 1


def test_histogram_buckets_are_upper_bounds() -> None:
    h = Histogram()
    for value in (0.0, 1.0, 1.0001, 99.0, 1e9):
        h.observe(value)
    cumulative = dict(h.cumulative())
    assert cumulative["1.0"] == 2  # le=1.0 holds 0.0 and 1.0 exactly
    assert cumulative["2.5"] == 3
    assert cumulative[repr(BUCKETS_MS[-1])] == 4
    assert cumulative["+Inf"] == 5
    assert h.count_at_most(1.0) == 2


# -- rendering ------------------------------------------------------------------------------


class _Parked(DelayedOperation):
    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass


def _broker(broker_id: int, cluster: ClusterMetadata) -> Broker:
    config = BrokerConfig.model_validate({"broker.id": str(broker_id)})
    return build_broker(
        BrokerOptions(
            broker_id=broker_id,
            config=config,
            clock=ManualClock(),
            logs=LogManager(None),
            port=9092 + broker_id,
        ),
        ClusterStores.in_memory(cluster, NoFaults()),
    )


def _families(text: bytes) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text.decode())}


def _value(families: dict[str, Any], family: str, sample: str, **labels: str) -> float:
    for s in families[family].samples:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    raise AssertionError(f"no sample {sample} {labels}")


def test_render_names_follow_kafka_jmx_names() -> None:
    cluster = ClusterMetadata()
    for i in (0, 1):
        cluster.register_broker(i, "127.0.0.1", 9092 + i)
    brokers = [_broker(0, cluster), _broker(1, cluster)]
    topic = cluster.create_topic("t", 2, 2, {})
    for state in topic.partitions:  # broker 0 leads both; one ISR is short
        state.leader = 0
        state.replicas = [0, 1]
    topic.partitions[0].isr = [0]
    topic.partitions[1].isr = [0, 1]
    brokers[0].purgatories["Fetch"].try_complete_else_watch(_Parked(500), [("t", 0), ("t", 1)])
    metrics = {0: RequestMetrics(0), 1: RequestMetrics(1)}
    metrics[0].request_completed(_ctx(0, 9, STAMPS), object(), 10)

    families = _families(render_prometheus(lambda: brokers, metrics, lambda: {0: 3}))

    total = "kafka_network_requestmetrics_totaltimems"
    assert families[total].type == "histogram"
    assert _value(families, total, total + "_count", request="Produce", broker="0") == 1
    assert _value(families, total, total + "_sum", request="Produce", broker="0") == 106.5
    assert _value(families, total, total + "_bucket", request="Produce", le="100.0") == 0
    assert _value(families, total, total + "_bucket", request="Produce", le="250.0") == 1
    for phase in PHASES:
        assert f"kafka_network_requestmetrics_{phase.lower()}" in families
    requests = "kafka_network_requestmetrics_requests"
    assert _value(families, requests, requests + "_total", request="Produce", version="9") == 1

    size = "kafka_server_delayedoperationpurgatory_purgatorysize"
    delayed = "kafka_server_delayedoperationpurgatory_numdelayedoperations"
    assert _value(families, size, size, delayedOperation="Fetch", broker="0") == 2
    assert _value(families, delayed, delayed, delayedOperation="Fetch", broker="0") == 1
    for name in ("Produce", "Heartbeat", "Rebalance", "ShareFetch"):
        assert _value(families, delayed, delayed, delayedOperation=name, broker="1") == 0
    expirations = "kafka_server_delayedoperationpurgatory_expirations"
    assert _value(families, expirations, expirations + "_total", delayedOperation="Fetch") == 0

    under = "kafka_server_replicamanager_underreplicatedpartitions"
    assert _value(families, under, under, broker="0") == 1
    assert _value(families, under, under, broker="1") == 0
    leaders = "kafka_server_replicamanager_leadercount"
    assert _value(families, leaders, leaders, broker="0") == 2
    shrinks = "kafka_server_replicamanager_isrshrinkspersec"
    assert _value(families, shrinks, shrinks + "_total", broker="0") == 0
    active = "kafka_controller_kafkacontroller_activecontrollercount"
    assert _value(families, active, active, broker="0") == 1
    assert _value(families, active, active, broker="1") == 0
    injected = "minikafka_faults_injected"
    assert _value(families, injected, injected + "_total", broker="0") == 3


def test_request_class_of_fetch_has_a_replica_id() -> None:
    """Guard for the follower split: some Fetch versions carry replica_id in
    replica_state instead; both are read."""
    assert "replica_id" in request_class(1, 11).__dataclass_fields__
    assert "replica_state" in request_class(1, 15).__dataclass_fields__
