"""The control endpoint against a real broker and real clients.

Faults are injected over HTTP and observed by aiokafka the way an application would
see them; latency is checked against the broker's own TotalTimeMs (which is at least the
injected delay by construction), never against a wall clock. State is awaited by
bounded polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import MessageSizeTooLargeError, TopicAuthorizationFailedError
from prometheus_client.parser import text_string_to_metric_families

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.integration.conftest import FAST_GROUPS

TIMEOUT_S = 20.0
POLL = {"attempts": 1000, "step_s": 0.02}  # 20 s at most


@contextlib.asynccontextmanager
async def control_cluster(
    brokers: int = 1, **overrides: str
) -> AsyncIterator[tuple[MiniKafka, Http]]:
    config = BrokerConfig.model_validate({**FAST_GROUPS, **overrides})
    app = MiniKafka(config, brokers=brokers, port=0, control_port=0)
    await app.start()
    try:
        assert app.control_url is not None
        headers = {"Authorization": f"Bearer {app.control_token}"}
        async with aiohttp.ClientSession(app.control_url, headers=headers) as session:
            yield app, Http(session)
    finally:
        await app.stop()


class Http:
    """JSON calls on the control endpoint: (status, decoded body)."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def call(
        self, method: str, path: str, body: Any = None, raw: bytes | None = None
    ) -> tuple[int, Any]:
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        headers = {"Content-Type": "application/json"} if method != "GET" else {}
        async with self.session.request(method, path, data=data, headers=headers) as resp:
            text = await resp.text()
            if resp.content_type == "application/json":
                return resp.status, json.loads(text)
            return resp.status, text

    async def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = await self.call(method, path, body)
        assert status < 300, (status, answer)
        return answer


async def end_offset(app: MiniKafka, topic: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=app.bootstrap)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        return int((await consumer.end_offsets([tp]))[tp])
    finally:
        await consumer.stop()


def metric(
    text: str, family: str, sample: str, default: float | None = None, **labels: str
) -> float:
    for fam in text_string_to_metric_families(text):
        if fam.name != family:
            continue
        for s in fam.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    if default is not None:
        return default
    raise AssertionError(f"no {sample}{labels} in /metrics")


# -- error injection seen by a real client ----------------------------------------------------


async def test_failed_produces_append_nothing_and_retriable_ones_are_retried() -> None:
    async with control_cluster() as (app, http):
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, retry_backoff_ms=20)
        await producer.start()
        try:
            await producer.send_and_wait("orders", b"a")
            assert await end_offset(app, "orders") == 1

            # Non-retriable: the client sees the error, and the log is untouched.
            rule = await http.ok(
                "POST",
                "/faults",
                {"broker": 0, "api_key": "Produce", "error_code": "MESSAGE_TOO_LARGE"},
            )
            assert rule["remaining"] == 1
            with pytest.raises(MessageSizeTooLargeError):
                await producer.send_and_wait("orders", b"b")
            assert await end_offset(app, "orders") == 1

            # Retriable: three refusals, then the producer's retry succeeds.
            await http.ok(
                "POST",
                "/faults",
                {"broker": 0, "api_key": 0, "error_code": "NOT_LEADER_OR_FOLLOWER", "count": 3},
            )
            await producer.send_and_wait("orders", b"c")
            faults = await http.ok("GET", "/faults")
            assert faults["failures"] == []
            assert faults["injected"] == {"0": 4}
            assert await end_offset(app, "orders") == 2
        finally:
            await producer.stop()

        consumer = AIOKafkaConsumer(
            "orders", bootstrap_servers=app.bootstrap, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            batches = await consumer.getmany(timeout_ms=5000, max_records=2)
            assert [r.value for records in batches.values() for r in records] == [b"a", b"c"]
        finally:
            await consumer.stop()


async def test_list_offsets_and_metadata_errors_reach_the_client_until_cleared() -> None:
    async with control_cluster() as (app, http):
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)
        await producer.start()
        consumer = AIOKafkaConsumer(bootstrap_servers=app.bootstrap)
        await consumer.start()
        try:
            await producer.send_and_wait("known", b"x")
            tp = TopicPartition("known", 0)
            await http.ok(
                "POST",
                "/faults",
                {
                    "broker": 0,
                    "api_key": "ListOffsets",
                    "error_code": "TOPIC_AUTHORIZATION_FAILED",
                    "count": 5,
                    "topic": "known",
                    "partition": 0,
                },
            )
            with pytest.raises(TopicAuthorizationFailedError):
                await consumer.end_offsets([tp])
            await http.ok("DELETE", "/faults")
            assert (await consumer.end_offsets([tp]))[tp] == 1

            # Metadata for one topic: the producer cannot learn it, and says why.
            await http.ok(
                "POST",
                "/faults",
                {
                    "broker": 0,
                    "api_key": 3,
                    "error_code": 29,
                    "count": 100,
                    "topic": "secret",
                },
            )
            with pytest.raises(TopicAuthorizationFailedError):
                await producer.send_and_wait("secret", b"s")
            assert app.faults.injected[0] >= 2
            await http.ok("DELETE", "/faults/0")
            await producer.send_and_wait("known", b"y")  # service restored
        finally:
            await consumer.stop()
            await producer.stop()


# -- latency -------------------------------------------------------------------------------


async def test_latency_keeps_response_order_and_shows_in_total_time() -> None:
    async with control_cluster() as (app, http):
        broker = app.brokers[0]
        metadata = {
            "topics": (),
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        versions = {"client_software_name": "t", "client_software_version": "1"}
        total_before = app.request_metrics[0].histogram("Metadata", "TotalTimeMs")
        fast_before = total_before.count_at_most(250.0)
        count_before = total_before.count

        await http.ok("POST", "/brokers/0/latency", {"ms": 300})
        raw = await RawClient.connect("127.0.0.1", broker.port, timeout_s=TIMEOUT_S)
        try:
            # Pipelined: the broker reads the second only once the first is answered
            # (one request in progress per connection), and each is delayed.
            sent = [raw.send(3, 12, "MetadataRequest", **metadata) for _ in range(2)]
            await raw.drain()
            # The client connection also refuses any answer that is not the oldest's.
            assert [(await raw.response()).correlation_id for _ in sent] == sent
            await http.ok("POST", "/brokers/0/latency", {"ms": 0})
            fast = raw.send(18, 3, "ApiVersionsRequest", **versions)
            await raw.drain()
            assert (await raw.response()).correlation_id == fast
        finally:
            await raw.close()

        total = app.request_metrics[0].histogram("Metadata", "TotalTimeMs")
        assert total.count == count_before + 2
        assert total.count_at_most(250.0) == fast_before  # each took >= 300 ms
        assert total.sum >= total_before.sum + 600

        # The same through /metrics, with a real client.
        await http.ok("POST", "/brokers/0/latency", {"ms": 120})
        text = await http.ok("GET", "/metrics")
        family = "kafka_network_requestmetrics_totaltimems"
        fast = metric(
            text, family, family + "_bucket", 0.0, request="Produce", broker="0", le="100.0"
        )
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait("slow", str(i).encode())
        finally:
            await producer.stop()
        text = await http.ok("GET", "/metrics")
        count = metric(text, family, family + "_count", request="Produce", broker="0")
        assert count >= 3
        assert (
            metric(text, family, family + "_bucket", request="Produce", broker="0", le="100.0")
            == fast
        )
        faults = await http.ok("GET", "/faults")
        assert faults["latency_ms"] == {"0": 120}


# -- /metrics and /purgatory -------------------------------------------------------------------


async def test_purgatory_lists_a_parked_fetch_until_a_produce_completes_it() -> None:
    async with control_cluster() as (app, http):
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)
        await producer.start()
        await producer.send_and_wait("waiting", b"first")
        consumer = AIOKafkaConsumer(
            "waiting",
            bootstrap_servers=app.bootstrap,
            auto_offset_reset="latest",
            fetch_max_wait_ms=10_000,
        )
        await consumer.start()
        try:
            getting = asyncio.ensure_future(consumer.getone())

            async def fetch_ops() -> list[dict[str, Any]]:
                view = await http.ok("GET", "/purgatory")
                (broker,) = view["brokers"]
                ops: list[dict[str, Any]] = broker["purgatories"]["Fetch"]["operations"]
                return ops

            async def parked() -> bool:
                return any(op["kind"] == "DelayedFetch" for op in await fetch_ops())

            await wait_until(parked, "a parked fetch in /purgatory", **POLL)
            (op,) = [op for op in await fetch_ops() if op["kind"] == "DelayedFetch"]
            assert "waiting-0" in op["keys"]
            assert 0 < op["remaining_ms"] <= 10_000

            text = await http.ok("GET", "/metrics")
            delayed = "kafka_server_delayedoperationpurgatory_numdelayedoperations"
            size = "kafka_server_delayedoperationpurgatory_purgatorysize"
            assert metric(text, delayed, delayed, delayedOperation="Fetch", broker="0") >= 1
            assert metric(text, size, size, delayedOperation="Fetch", broker="0") >= 1
            for name in ("Produce", "Heartbeat", "Rebalance"):
                metric(text, delayed, delayed, delayedOperation=name, broker="0")

            await producer.send_and_wait("waiting", b"second")
            record = await asyncio.wait_for(getting, TIMEOUT_S)
            assert record.value == b"second"

            # The consumer fetches again and parks anew; the first fetch is gone.
            async def first_gone() -> bool:
                return all(o["deadline_ms"] != op["deadline_ms"] for o in await fetch_ops())

            await wait_until(first_gone, "the completed fetch to leave /purgatory", **POLL)
        finally:
            await consumer.stop()
            await producer.stop()

        text = await http.ok("GET", "/metrics")
        total = "kafka_network_requestmetrics_totaltimems"
        requests = "kafka_network_requestmetrics_requests"
        for request in ("Produce", "Fetch", "FetchConsumer", "Metadata", "ApiVersions"):
            assert metric(text, total, total + "_count", request=request, broker="0") >= 1
        assert metric(text, requests, requests + "_total", request="Produce", broker="0") >= 2
        remote = "kafka_network_requestmetrics_remotetimems"
        assert metric(text, remote, remote + "_sum", request="FetchConsumer", broker="0") > 0
        under = "kafka_server_replicamanager_underreplicatedpartitions"
        assert metric(text, under, under, broker="0") == 0
        assert metric(text, "minikafka_broker_up", "minikafka_broker_up", broker="0") == 1


# -- bad requests ----------------------------------------------------------------------------


BAD_REQUESTS: list[tuple[str, str, Any, int, str]] = [
    ("POST", "/faults", b"{not json", 400, "not JSON"),
    ("POST", "/faults", [1, 2], 400, "JSON object"),
    ("POST", "/faults", {"broker": 9, "api_key": 0, "error_code": 6}, 404, "unknown broker"),
    ("POST", "/faults", {"broker": 0, "api_key": 0, "error_code": "BOGUS"}, 400, "BOGUS"),
    ("POST", "/faults", {"broker": 0, "api_key": "Bogus", "error_code": 6}, 400, "Bogus"),
    ("POST", "/faults", {"broker": 0, "api_key": 67, "error_code": 6}, 400, "cannot fail"),
    ("POST", "/faults", {"broker": 0, "api_key": 0, "error_code": 0}, 400, "not an error"),
    (
        "POST",
        "/faults",
        {"broker": 0, "api_key": 0, "error_code": 6, "count": "3"},
        400,
        "count",
    ),
    (
        "POST",
        "/faults",
        {"broker": 0, "api_key": 0, "error_code": 6, "colour": "red"},
        400,
        "colour",
    ),
    ("POST", "/faults", {"broker": "zero", "api_key": 0, "error_code": 6}, 400, "integer"),
    ("POST", "/faults", {"api_key": 0, "error_code": 6}, 400, "broker"),
    ("POST", "/brokers/9/latency", {"ms": 5}, 404, "unknown broker"),
    ("POST", "/brokers/x/latency", {"ms": 5}, 400, "integer"),
    ("POST", "/brokers/0/latency", {"ms": -5}, 400, "ms"),
    ("POST", "/brokers/0/latency", {"ms": "5"}, 400, "ms"),
    ("POST", "/brokers/0/latency", {}, 400, "ms"),
    ("POST", "/brokers/0/replication", {"action": "explode"}, 400, "action"),
    ("POST", "/brokers/0/replication", {"action": "delay"}, 400, "delay_ms"),
    ("POST", "/brokers/0/replication", {"action": "delay", "delay_ms": -1}, 400, "delay_ms"),
    ("POST", "/brokers/9/replication", {"action": "pause"}, 404, "unknown broker"),
    ("POST", "/brokers/9/stop", None, 404, "unknown broker"),
    ("POST", "/brokers/9/start", None, 404, "unknown broker"),
    ("DELETE", "/faults/9", None, 404, "unknown broker"),
    ("GET", "/purgatory?broker=9", None, 404, "unknown broker"),
    ("GET", "/no/such/route", None, 404, "Not Found"),
]


async def test_bad_control_requests_get_4xx_and_change_nothing() -> None:
    async with control_cluster(brokers=2) as (_app, http):
        await http.ok(
            "POST", "/faults", {"broker": 1, "api_key": "Fetch", "error_code": 6, "count": 2}
        )
        await http.ok("POST", "/brokers/1/latency", {"ms": 7})
        faults_before = await http.ok("GET", "/faults")
        cluster_before = await http.ok("GET", "/cluster")
        assert [b["alive"] for b in cluster_before["brokers"]] == [True, True]
        for method, path, body, status, words in BAD_REQUESTS:
            raw = body if isinstance(body, bytes) else None
            got, answer = await http.call(method, path, None if raw else body, raw=raw)
            assert got == status, (method, path, body, answer)
            assert words in answer["error"], (method, path, answer)
            assert await http.ok("GET", "/faults") == faults_before, (method, path)
            assert await http.ok("GET", "/cluster") == cluster_before, (method, path)


async def _metrics_value(http: Http, family: str, sample: str, broker: int) -> float:
    text = await http.ok("GET", "/metrics")
    return metric(text, family, sample, 0.0, broker=str(broker))


async def test_paused_replication_shrinks_the_isr_and_resume_expands_it() -> None:
    overrides = {"replica.lag.time.max.ms": "300", "default.replication.factor": "2"}
    async with control_cluster(brokers=2, **overrides) as (app, http):
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks=1)
        await producer.start()
        try:
            await producer.send_and_wait("replicated", b"0")
            (state,) = (await http.ok("GET", "/cluster"))["topics"]["replicated"]["partitions"]
            leader = state["leader"]
            (follower,) = [r for r in state["replicas"] if r != leader]

            async def isr() -> list[int]:
                cluster = await http.ok("GET", "/cluster")
                return list(cluster["topics"]["replicated"]["partitions"][0]["isr"])

            async def full() -> bool:
                return sorted(await isr()) == [0, 1]

            await wait_until(full, "both replicas in the ISR", **POLL)
            answer = await http.ok("POST", f"/brokers/{follower}/replication", {"action": "pause"})
            assert answer == {"broker": follower, "action": "pause"}
            await producer.send_and_wait("replicated", b"1")

            under = "kafka_server_replicamanager_underreplicatedpartitions"
            shrinks = "kafka_server_replicamanager_isrshrinkspersec"
            expands = "kafka_server_replicamanager_isrexpandspersec"

            async def shrunk() -> bool:
                return await isr() == [leader] and (
                    await _metrics_value(http, under, under, leader) == 1
                )

            await wait_until(shrunk, "the paused follower to leave the ISR", **POLL)
            assert await _metrics_value(http, shrinks, shrinks + "_total", leader) >= 1

            await http.ok("POST", f"/brokers/{follower}/replication", {"action": "resume"})

            async def healed() -> bool:
                # One state, polled whole: with replica.lag.time.max.ms=300 a loaded machine
                # can drop the follower again between two separate reads.
                return await full() and await _metrics_value(http, under, under, leader) == 0

            await wait_until(healed, "the resumed follower to rejoin the ISR", **POLL)
            assert await _metrics_value(http, expands, expands + "_total", leader) >= 1

            answer = await http.ok(
                "POST", f"/brokers/{follower}/replication", {"action": "delay", "delay_ms": 5}
            )
            assert answer == {"broker": follower, "action": "delay", "delay_ms": 5}
        finally:
            await producer.stop()


async def test_stop_and_start_a_broker_through_the_endpoint() -> None:
    async with control_cluster(brokers=2) as (_app, http):
        assert await http.ok("POST", "/brokers/1/stop") == {"broker": 1, "alive": False}
        assert await http.ok("POST", "/brokers/1/stop") == {"broker": 1, "alive": False}
        cluster = await http.ok("GET", "/cluster")
        assert [b["alive"] for b in cluster["brokers"]] == [True, False]
        assert (await http.ok("GET", "/health"))["alive"] == 1
        assert await _metrics_value(http, "minikafka_broker_up", "minikafka_broker_up", 1) == 0

        assert await http.ok("POST", "/brokers/1/start") == {"broker": 1, "alive": True}
        cluster = await http.ok("GET", "/cluster")
        assert [b["alive"] for b in cluster["brokers"]] == [True, True]
        # The restarted broker serves clients again.
        producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{cluster['brokers'][1]['port']}")
        await producer.start()
        try:
            await producer.send_and_wait("after-restart", b"x")
        finally:
            await producer.stop()


async def test_health_and_cluster() -> None:
    async with control_cluster(brokers=2) as (app, http):
        health = await http.ok("GET", "/health")
        assert health == {"status": "ok", "brokers": 2, "alive": 2, "bootstrap": app.bootstrap}
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait("seen", b"x")
        finally:
            await producer.stop()
        cluster = await http.ok("GET", "/cluster")
        ports = sorted(b["port"] for b in cluster["brokers"])
        assert ports == sorted(b.port for b in app.brokers)
        (partition, *_) = cluster["topics"]["seen"]["partitions"]
        assert partition["leader"] in (0, 1)
        assert partition["leader"] in partition["isr"]


# -- the command line ---------------------------------------------------------------------------


def _fault_cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "minikafka", "fault", "--control", url, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_serves_control_and_drives_faults(broker_process: Any) -> None:
    broker = broker_process(["--control-port", "0"])
    assert " control=http://127.0.0.1:" in broker.ready_line
    url = broker.ready_line.split("control=", 1)[1].split()[0]
    token = broker.ready_line.split("control_token=", 1)[1].split()[0]
    assert f" console={url}/console?token={token}" in broker.ready_line

    status = _fault_cli(url, "status")
    assert status.returncode == 0, status.stderr
    answer = json.loads(status.stdout)
    assert (answer["status"], answer["problems"]) == ("ok", [])
    assert answer["faults"]["failures"] == []

    fail = _fault_cli(
        url,
        "fail",
        "--broker",
        "0",
        "--api-key",
        "Produce",
        "--error",
        "NOT_LEADER_OR_FOLLOWER",
        "--count",
        "2",
        "--topic",
        "t",
        "--partition",
        "0",
    )
    assert fail.returncode == 0, fail.stderr
    assert json.loads(fail.stdout)["error"] == "NOT_LEADER_OR_FOLLOWER"
    latency = _fault_cli(url, "latency", "0", "25")
    assert latency.returncode == 0, latency.stderr
    (rule,) = json.loads(_fault_cli(url, "status").stdout)["faults"]["failures"]
    assert (rule["api"], rule["remaining"], rule["topic"], rule["partition"]) == (
        "Produce",
        2,
        "t",
        0,
    )

    bad = _fault_cli(url, "fail", "--broker", "7", "--api-key", "0", "--error", "6")
    assert bad.returncode == 1
    assert "unknown broker id 7" in bad.stderr

    clear = _fault_cli(url, "clear")
    assert clear.returncode == 0, clear.stderr
    faults = json.loads(_fault_cli(url, "status").stdout)["faults"]
    assert faults["failures"] == [] and faults["latency_ms"] == {}
    assert faults["replication"] == {}
    assert broker.terminate() == 0


def test_cli_fault_without_an_endpoint_fails_cleanly() -> None:
    result = _fault_cli("http://127.0.0.1:1", "status")
    assert result.returncode == 1
    assert "cannot reach" in result.stderr


def test_serve_without_control_port_prints_no_control(broker_process: Any) -> None:
    broker = broker_process([])
    assert "control=" not in broker.ready_line
