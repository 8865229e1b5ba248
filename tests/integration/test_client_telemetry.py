"""Client telemetry (KIP-714) with librdkafka 2.16 (confluent-kafka's wheel).

With the receiver on (``metric.reporters``, as ``serve --client-telemetry``) and a
subscription made by ``minikafka client-metrics alter`` (all metrics, every 500 ms), a
producer and a consumer in a group push what the broker shows at ``/metrics`` (and
``/client-telemetry``) under their client ids -- the producer's request latency (its
requests are Produce), the consumer's fetch latency and rebalance latency -- and what
the capture keeps, one record per push. With the receiver off, ApiVersions advertises
neither 71 nor 72 and librdkafka sends neither (``enable.metrics.push`` is on by default
in both runs).
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from pathlib import Path

import aiohttp
import pytest
from confluent_kafka import Consumer, Producer

from broker.app import MiniKafka
from broker.config.broker_config import CLIENT_TELEMETRY_RECEIVER, BrokerConfig
from kafka_tools.admin_client_metrics import client_metrics_alter, client_metrics_describe
from protocol.capture_files import read_client_telemetry
from testkit.polling import wait_until
from tests.integration.conftest import FAST_GROUPS

pytestmark = pytest.mark.asyncio

_QUIET = {"log_level": 3}
PRODUCER_LATENCY = "client_telemetry_org_apache_kafka_producer_node_request_latency_avg"
FETCH_LATENCY = "client_telemetry_org_apache_kafka_consumer_fetch_manager_fetch_latency_avg"
REBALANCE = "client_telemetry_org_apache_kafka_consumer_coordinator_rebalance_latency"


def _run_clients(bootstrap: str, topic: str, stop: threading.Event) -> None:
    """A producer and a group consumer, busy until ``stop`` (librdkafka pushes on its
    own threads while they run)."""
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "tel-producer", **_QUIET})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "tel-consumer",
            "group.id": "tel-group",
            "auto.offset.reset": "earliest",
            **_QUIET,
        }
    )
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            producer.produce(topic, b"x" * 100)
            producer.poll(0)
            consumer.poll(0.05)
        producer.flush(10)
    finally:
        consumer.close()


async def _until_shown(app: MiniKafka, topic: str, wanted: list[str]) -> str:
    """Run the clients until ``/metrics`` has every wanted line start; the text."""
    stop = threading.Event()
    clients = asyncio.create_task(asyncio.to_thread(_run_clients, app.bootstrap, topic, stop))
    text = ""
    async with aiohttp.ClientSession() as session:

        async def shown() -> bool:
            nonlocal text
            async with session.get(f"{app.control_url}/metrics") as response:
                text = await response.text()
            return all(any(line.startswith(w) for line in text.splitlines()) for w in wanted)

        try:
            await wait_until(
                shown, "the clients' pushed metrics at /metrics", attempts=150, step_s=0.1
            )
        finally:
            stop.set()
            await clients
    return text


async def test_librdkafka_pushes_what_metrics_and_the_capture_show(tmp_path: Path) -> None:
    config = BrokerConfig.model_validate(
        {**FAST_GROUPS, "metric.reporters": CLIENT_TELEMETRY_RECEIVER}
    )
    app = MiniKafka(config, port=0, control_port=0, capture_dir=tmp_path)
    async with app:
        app.cluster.create_topic("tel", 1, 1, {})
        tool = argparse.Namespace(
            bootstrap=app.bootstrap,
            name="all",
            generate_name=False,
            metrics="*",
            interval=500,
            match="client_software_name=confluent-kafka-python|librdkafka",
        )
        assert await client_metrics_alter(tool) == 0
        assert app.stores.client_metrics.configs("all")["interval.ms"] == "500"
        text = await _until_shown(
            app,
            "tel",
            [
                f'{PRODUCER_LATENCY}{{broker="0",client_id="tel-producer"',
                f'{FETCH_LATENCY}{{broker="0",client_id="tel-consumer"',
                f'{REBALANCE}_avg{{broker="0",client_id="tel-consumer"',
            ],
        )
        assert f'{REBALANCE}_total{{broker="0",client_id="tel-consumer"' in text
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{app.control_url}/client-telemetry") as response,
        ):
            shown = await response.json()
        assert shown["enabled"] and shown["subscriptions"]["all"]["metrics"] == "*"
        assert {"tel-producer", "tel-consumer"} <= {c["client_id"] for c in shown["clients"]}
        assert 'minikafka_client_telemetry_pushes_total{broker="0",client_id="tel-producer"' in text
        assert (
            await client_metrics_describe(argparse.Namespace(bootstrap=app.bootstrap, name=None))
            == 0
        )
    pushes = list(read_client_telemetry(tmp_path))
    by_client = {p.client_id: p for p in pushes}
    assert {"tel-producer", "tel-consumer"} <= set(by_client)
    producer = by_client["tel-producer"]
    assert producer.client_software_name is not None and producer.connection_id
    names = {point.name for p in pushes for point in p.points}
    assert "org.apache.kafka.producer.node.request.latency.avg" in names
    assert "org.apache.kafka.consumer.fetch.manager.fetch.latency.max" in names


async def test_with_the_receiver_off_nothing_is_advertised_or_pushed() -> None:
    app = MiniKafka(BrokerConfig.model_validate(FAST_GROUPS), port=0)
    async with app:
        app.cluster.create_topic("tel", 1, 1, {})
        app.stores.client_metrics.put("all", {"metrics": "*", "interval.ms": "100"})
        stop = threading.Event()
        clients = asyncio.create_task(asyncio.to_thread(_run_clients, app.bootstrap, "tel", stop))
        metrics = app.request_metrics[0]
        try:
            await wait_until(
                lambda: (
                    metrics.request_count("SyncGroup") >= 1
                    and metrics.request_count("Fetch") >= 5
                    and metrics.request_count("Produce") >= 1
                ),
                "the clients at work",
            )
        finally:
            stop.set()
            await clients
        assert metrics.request_count("GetTelemetrySubscriptions") == 0
        assert metrics.request_count("PushTelemetry") == 0
        apis = {spec.api_key for spec in app.brokers[0].services.api_specs}
        assert not {71, 72} & apis
