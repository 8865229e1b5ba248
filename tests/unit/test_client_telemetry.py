"""Client telemetry (KIP-714) on the manual clock: CLIENT_METRICS subscriptions and their
checks, matching, instance ids, the push interval, Kafka's errors in Kafka's order, the
store across a restart, and the decode of real OTLP pushes librdkafka 2.16 sent
(``tests/data/client_telemetry/``: zstd, as GetTelemetrySubscriptions offered first)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError
from broker.config.broker_config import CLIENT_TELEMETRY_RECEIVER, BrokerConfig
from broker.ids import IdSource
from broker.observability.client_telemetry.client_metrics_configs import INTERVAL_MS_DEFAULT
from broker.observability.client_telemetry.client_metrics_instance import (
    ClientAttributes,
    ClientMetricsInstance,
)
from broker.observability.client_telemetry.client_metrics_manager import (
    ClientMetricsManager,
    subscription_id,
)
from broker.observability.client_telemetry.client_metrics_store import ClientMetricsStore
from broker.observability.client_telemetry.client_telemetry_receiver import (
    ClientTelemetryReceiver,
)
from broker.observability.client_telemetry.otlp_payload import decode_payload
from broker.observability.client_telemetry.telemetry_metrics import client_telemetry_families
from protocol.builders import request_builder
from protocol.compression import GZIP, ZSTD, compress, decompress
from purgatory import ManualClock
from tests.helpers.dispatch_node import dispatch_node
from tests.unit.test_api_versions_vs_kafka import TELEMETRY_ON

E = ErrorCode
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DATA = Path(__file__).parents[1] / "data" / "client_telemetry"
PRODUCER = (DATA / "librdkafka_2_16_producer.otlp.zst").read_bytes()
CONSUMER = (DATA / "librdkafka_2_16_consumer.otlp.zst").read_bytes()
ZERO = uuid.UUID(int=0)


def client(
    client_id: str = "app-1", name: str = "librdkafka", port: int = 50000, version: str = "2.16.1"
) -> ClientAttributes:
    return ClientAttributes(f"c-{port}", client_id, name, version, "127.0.0.1", port)


class World:
    def __init__(self, data_dir: Path | None = None, max_bytes: int = 1 << 20) -> None:
        self.clock = ManualClock(1_000)
        self.store = ClientMetricsStore(data_dir)
        self.receiver = ClientTelemetryReceiver()
        self.manager = ClientMetricsManager(
            self.store, self.clock, IdSource.seeded(1), max_bytes, self.receiver
        )

    def subscribe(self, name: str, **configs: str) -> None:
        self.store.alter(name, [(k.replace("_", "."), v, SET) for k, v in configs.items()])

    def get(
        self, instance_id: uuid.UUID | None = ZERO, who: ClientAttributes | None = None
    ) -> tuple[ErrorCode, ClientMetricsInstance]:
        return self.manager.get_telemetry_subscriptions(instance_id, who or client())

    def push(
        self,
        instance: ClientMetricsInstance,
        payload: bytes = PRODUCER,
        codec: int = ZSTD,
        terminating: bool = False,
        subscription: int | None = None,
    ) -> ErrorCode:
        return self.manager.push_telemetry(
            instance.instance_id,
            instance.subscription_id if subscription is None else subscription,
            terminating,
            codec,
            payload,
            instance.attributes,
        )


def refused(
    store: ClientMetricsStore, name: str, changes: list[tuple[str, str | None, int]]
) -> MetadataError:
    with pytest.raises(MetadataError) as info:
        store.alter(name, changes)
    return info.value


# -- subscriptions -----------------------------------------------------------------------


def test_config_checks_are_kafkas() -> None:
    store = ClientMetricsStore()
    error = refused(store, "s", [("interval.ms", "99", SET)])
    assert error.error is E.invalid_request
    assert error.message == (
        "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"
    )
    assert refused(store, "s", [("interval.ms", "3600001", SET)]).error is E.invalid_request
    assert refused(store, "s", [("colour", "red", SET)]).message == (
        "Unknown client metrics configuration: colour"
    )
    bad = refused(store, "s", [("match", "client_colour=red", SET)])
    assert (bad.error, bad.message) == (
        E.invalid_config,
        "Illegal client matching pattern: client_colour=red",
    )
    assert refused(store, "s", [("match", "client_id=(", SET)]).error is E.invalid_config
    assert refused(store, "s", [("match", "client_id", SET)]).error is E.invalid_config
    assert refused(store, "", [("metrics", "a", SET)]).message == "Subscription name can't be empty"
    assert refused(store, "s", [("interval.ms", "5", APPEND)]).error is E.invalid_config
    assert store.names() == []  # nothing refused was kept


def test_append_subtract_and_deleting_every_config_removes_the_subscription() -> None:
    store = ClientMetricsStore()
    store.alter("s", [("metrics", "a.", SET), ("metrics", "b.,c.", APPEND)])
    assert store.configs("s") == {"metrics": "a.,b.,c."}
    store.alter("s", [("metrics", "b.", SUBTRACT)])
    assert store.configs("s") == {"metrics": "a.,c."}
    version = store.version
    store.alter("s", [("metrics", None, DELETE)])
    assert store.names() == [] and store.version == version + 1
    store.alter("t", [("interval.ms", "1000", SET)], validate_only=True)
    assert store.names() == []


def test_subscriptions_are_durable(tmp_path: Path) -> None:
    World(tmp_path).subscribe("s", metrics="org.apache.kafka.producer.", interval_ms="1000")
    again = ClientMetricsStore(tmp_path)
    assert again.configs("s") == {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}
    assert [s.interval_ms for s in again.subscriptions()] == [1000]


def test_matching_subscriptions_are_merged_as_kafka() -> None:
    w = World()
    w.subscribe(
        "producers",
        metrics="org.apache.kafka.producer.",
        interval_ms="2000",
        match="client_id=app-.*,client_software_name=librdkafka",
    )
    w.subscribe(
        "latency",
        metrics="org.apache.kafka.consumer.node.",
        interval_ms="1000",
        match="client_software_version=2\\.16\\..*",
    )
    w.subscribe("java", metrics="*", match="client_software_name=apache-kafka-java")
    error, instance = w.get(who=client("app-1"))
    assert error is E.none
    assert instance.metrics == ("org.apache.kafka.consumer.node.", "org.apache.kafka.producer.")
    assert instance.push_interval_ms == 1000  # the smallest of the matched
    _, other = w.get(who=client("other", port=50001))  # client_id must match whole
    assert other.metrics == ("org.apache.kafka.consumer.node.",)
    _, java = w.get(who=client("app-1", "apache-kafka-java", 50002, "4.2.0"))
    assert java.metrics == ("*",)  # '*' alone when a match has it
    assert java.push_interval_ms == INTERVAL_MS_DEFAULT
    nobody = World()
    assert nobody.get()[1].metrics == () and nobody.get()[1].push_interval_ms == 300000


def test_subscription_id_is_kafkas_formula() -> None:
    instance_id = uuid.UUID("4ab15d58-8afd-419d-b550-dea9778cc064")
    assert -(2**31) <= subscription_id(["a."], 1000, instance_id) < 2**31
    assert subscription_id(["a."], 1000, instance_id) != subscription_id(["a."], 2000, instance_id)
    assert subscription_id(["a."], 1000, instance_id) != subscription_id(["b."], 1000, instance_id)
    zero = uuid.UUID(int=0)  # Uuid.hashCode of zero is 0: the CRC32C of "[]300000" itself
    assert subscription_id([], 300000, zero) == 3569834974 - 2**32


# -- instances and the push interval ------------------------------------------------------


def test_instance_ids_are_assigned_for_zero_and_kept_otherwise() -> None:
    w = World()
    _, first = w.get()
    assert first.instance_id.int != 0
    assert w.get(None, client(port=50001))[1].instance_id not in (first.instance_id, ZERO)
    chosen = uuid.UUID("4ab15d58-8afd-419d-b550-dea9778cc064")
    assert w.get(chosen, client(port=50002))[1].instance_id == chosen


def test_the_push_interval_is_enforced() -> None:
    w = World()
    w.subscribe("all", metrics="*", interval_ms="1000")
    error, instance = w.get()
    assert error is E.none and instance.push_interval_ms == 1000
    w.clock.advance(10)
    assert w.get(instance.instance_id)[0] is E.throttling_quota_exceeded
    assert w.push(instance) is E.none  # the first push after a get: at once (jitter)
    w.clock.advance(500)
    assert w.push(instance) is E.throttling_quota_exceeded
    w.clock.advance(500)
    assert w.push(instance) is E.none
    w.clock.advance(1)
    assert w.push(instance, terminating=True) is E.none  # a terminating push may be early
    w.clock.advance(1000)
    assert w.push(instance) is E.invalid_request  # nothing after terminating
    assert w.receiver.pushes == 3


def test_push_errors_in_kafkas_order() -> None:
    w = World(max_bytes=600)
    w.subscribe("all", metrics="*", interval_ms="100")
    _, instance = w.get()
    assert w.manager.push_telemetry(None, 0, False, ZSTD, b"", client()) is E.invalid_request
    assert w.manager.push_telemetry(uuid.UUID(int=1), 0, False, ZSTD, b"", client()) is (
        E.invalid_request
    )
    assert w.push(instance, subscription=instance.subscription_id + 1) is E.unknown_subscription_id
    # after UNKNOWN_SUBSCRIPTION_ID the client may get again at once
    assert w.get(instance.instance_id)[0] is E.none
    w.clock.advance(100)
    assert w.push(instance, codec=7) is E.unsupported_compression_type
    assert w.get(instance.instance_id)[0] is E.none  # ... and after this one
    w.clock.advance(100)
    assert w.push(instance, payload=CONSUMER) is E.telemetry_too_large  # 692 bytes > 600
    w.clock.advance(100)
    inflated = compress(GZIP, decompress(ZSTD, PRODUCER) + bytes(5000))  # 5 KB of zeros
    assert len(inflated) <= 600 and w.push(instance, inflated, GZIP) is E.telemetry_too_large
    w.clock.advance(100)
    assert w.push(instance, b"not zstd") is E.invalid_record
    w.clock.advance(100)
    assert w.push(instance, compress(GZIP, b"\xff\xff\xff")) is E.invalid_record
    w.clock.advance(100)
    assert w.push(instance, b"") is E.none  # no metrics: accepted, nothing exported


def test_a_changed_subscription_is_seen_at_the_next_request() -> None:
    w = World()
    w.subscribe("all", metrics="org.apache.kafka.producer.", interval_ms="60000")
    _, instance = w.get()
    w.subscribe("all", metrics="*")
    error, again = w.get(instance.instance_id)  # not throttled: a new subscription
    assert error is E.none and again.metrics == ("*",)
    assert again.subscription_id != instance.subscription_id
    assert w.push(instance) is E.unknown_subscription_id  # the old id


def test_instances_go_with_their_connection_and_after_their_expiry() -> None:
    w = World()
    _, instance = w.get()
    w.manager.connection_closed(instance.attributes.connection_id)
    assert w.manager.instance(instance.instance_id) is None
    _, instance = w.get(instance.instance_id)
    w.clock.advance(3 * 300000)  # max(60 s, 3 x the default 5 minutes)
    error, fresh = w.get(instance.instance_id)
    assert error is E.none and fresh is not instance  # expired: built again


# -- payloads -----------------------------------------------------------------------------


def test_librdkafka_pushes_decode() -> None:
    producer = decode_payload(ZSTD, PRODUCER, 1 << 20)
    names = {p.name for p in producer.points}
    assert "org.apache.kafka.producer.node.request.latency.avg" in names
    assert "org.apache.kafka.producer.record.queue.time.max" in names
    [latency] = [p for p in producer.points if p.name.endswith("node.request.latency.avg")]
    assert latency.kind == "gauge" and latency.attributes == (("node.id", "0"),)
    assert latency.value > 0 and latency.time_unix_nano > 0
    consumer = decode_payload(ZSTD, CONSUMER, 1 << 20)
    by_name = {p.name: p for p in consumer.points}
    assert by_name["org.apache.kafka.consumer.fetch.manager.fetch.latency.avg"].kind == "gauge"
    total = by_name["org.apache.kafka.consumer.coordinator.rebalance.latency.total"]
    assert (total.kind, total.monotonic, total.delta) == ("sum", True, True)


def test_pushed_metrics_become_prometheus_families() -> None:
    w = World()
    w.subscribe("all", metrics="*", interval_ms="100")
    _, instance = w.get()
    assert w.push(instance, CONSUMER) is E.none
    w.clock.advance(100)
    assert w.push(instance, CONSUMER) is E.none
    families = {f.name: f for f in client_telemetry_families([(0, w.receiver)])}
    fetch = families["client_telemetry_org_apache_kafka_consumer_fetch_manager_fetch_latency_avg"]
    [sample] = fetch.samples
    assert sample.labels == {
        "broker": "0",
        "client_id": "app-1",
        "client_instance_id": str(instance.instance_id),
    }
    total = families["client_telemetry_org_apache_kafka_consumer_coordinator_rebalance_latency"]
    assert total.type == "counter"  # a monotonic delta sum: two pushes add up
    one = decode_payload(ZSTD, CONSUMER, 1 << 20)
    [delta] = [p.value for p in one.points if p.name.endswith("rebalance.latency.total")]
    assert total.samples[0].value == 2 * delta
    [pushes] = families["minikafka_client_telemetry_pushes"].samples
    assert pushes.value == 2


# -- on the wire, through the dispatcher ---------------------------------------------------


def test_the_apis_on_the_wire() -> None:
    """IncrementalAlterConfigs makes a subscription, DescribeConfigs and
    ListConfigResources show it; GetTelemetrySubscriptions answers with it and a push of
    librdkafka's bytes is accepted."""
    node = dispatch_node(config=TELEMETRY_ON)
    alter = request_builder(44, 1)
    answer = node.answer(
        node.send(
            44,
            1,
            alter.IncrementalAlterConfigsRequest(
                resources=(
                    alter.AlterConfigsResource(
                        resource_type=16,
                        resource_name="fast",
                        configs=(
                            alter.AlterableConfig(name="metrics", config_operation=SET, value="*"),
                            alter.AlterableConfig(
                                name="interval.ms", config_operation=SET, value="500"
                            ),
                        ),
                    ),
                ),
                validate_only=False,
            ),
        )
    )
    assert [r.error_code for r in answer.responses] == [E.none]
    describe = request_builder(32, 4)
    described = node.answer(
        node.send(
            32,
            4,
            describe.DescribeConfigsRequest(
                resources=(
                    describe.DescribeConfigsResource(
                        resource_type=16, resource_name="fast", configuration_keys=None
                    ),
                ),
                include_synonyms=False,
                include_documentation=False,
            ),
        )
    )
    [result] = described.results
    assert {(c.name, c.value, c.config_source) for c in result.configs} == {
        ("metrics", "*", 7),
        ("interval.ms", "500", 7),
    }
    listing = request_builder(74, 1)
    listed = node.answer(node.send(74, 1, listing.ListConfigResourcesRequest(resource_types=(16,))))
    assert [(r.resource_type, r.resource_name) for r in listed.config_resources] == [(16, "fast")]

    get = request_builder(71, 0)
    subscription = node.answer(
        node.send(71, 0, get.GetTelemetrySubscriptionsRequest(client_instance_id=ZERO))
    )
    assert subscription.error_code is E.none and subscription.client_instance_id != ZERO
    assert subscription.requested_metrics == ("*",)
    assert subscription.push_interval.total_seconds() == 0.5
    assert tuple(subscription.accepted_compression_types) == (4, 3, 1, 2)
    assert subscription.telemetry_max_bytes == 1048576 and subscription.delta_temporality
    push = request_builder(72, 0)
    pushed = node.answer(
        node.send(
            72,
            0,
            push.PushTelemetryRequest(
                client_instance_id=subscription.client_instance_id,
                subscription_id=subscription.subscription_id,
                terminating=False,
                compression_type=ZSTD,
                metrics=PRODUCER,
            ),
        )
    )
    assert pushed.error_code is E.none
    telemetry = node.broker.services.client_telemetry
    assert telemetry is not None and telemetry.receiver.pushes == 1


def test_serve_client_telemetry_names_the_receiver_in_metric_reporters() -> None:
    from minikafka.cli import build_parser, plan_serve

    def config(*args: str) -> BrokerConfig:
        return plan_serve(build_parser().parse_args(["serve", "--port", "0", *args])).config

    assert not config().client_telemetry_enabled
    on = config("--client-telemetry")
    assert on.client_telemetry_enabled and on.metric_reporters == (
        f"org.apache.kafka.common.metrics.JmxReporter,{CLIENT_TELEMETRY_RECEIVER}"
    )
    mine = config("--client-telemetry", "--override", "metric.reporters=com.example.Reporter")
    assert mine.metric_reporters == f"com.example.Reporter,{CLIENT_TELEMETRY_RECEIVER}"


def test_a_push_in_the_capture_is_read_apart_from_the_requests(tmp_path: Path) -> None:
    """``read_capture`` (the replay's, the report's) yields requests and events only;
    ``read_client_telemetry`` yields the pushes, points and all."""
    from protocol.capture import ClientTelemetryPush, TelemetryPoint
    from protocol.capture_files import CaptureWriter, read_capture, read_client_telemetry
    from tests.helpers.captures import make_request

    push = ClientTelemetryPush(
        broker_id=1,
        connection_id="c",
        client_id="app-1",
        client_instance_id=str(uuid.UUID(int=7)),
        received_unix_us=1,
        received_monotonic_us=1,
        points=[TelemetryPoint(name="m.avg", kind="gauge", value=2.5, attributes={"node.id": "1"})],
    )
    with CaptureWriter(tmp_path, broker_id=1) as writer:
        writer.write(make_request())
        writer.write(push)
    assert [type(r).__name__ for r in read_capture(tmp_path)] == ["CaptureRequest"]
    assert list(read_client_telemetry(tmp_path)) == [push]


def test_the_legacy_alter_configs_replaces_the_whole_set() -> None:
    node = dispatch_node(config=TELEMETRY_ON)
    store = node.broker.services.client_metrics
    store.alter("s", [("metrics", "a.", SET), ("interval.ms", "1000", SET)])
    b = request_builder(33, 2)

    def alter(*configs: tuple[str, str]) -> ErrorCode:
        resource = b.AlterConfigsResource(
            resource_type=16,
            resource_name="s",
            configs=tuple(b.AlterableConfig(name=k, value=v) for k, v in configs),
        )
        body = b.AlterConfigsRequest(resources=(resource,), validate_only=False)
        [result] = node.answer(node.send(33, 2, body)).responses
        return ErrorCode(result.error_code)

    assert alter(("metrics", "b.")) is E.none
    assert store.configs("s") == {"metrics": "b."}  # interval.ms went back to its default
    assert alter(("interval.ms", "5")) is E.invalid_request and store.configs("s")
    assert alter() is E.none and store.names() == []
