"""``fault clear`` heals everything, ``resume-replication`` undoes pause and delay, and
``fault status`` (``GET /status``) says what is broken -- against real brokers."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

from aiokafka import AIOKafkaConsumer
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from testkit.polling import wait_until
from tests.helpers.cluster import ProduceClient, raw_to_leader
from tests.integration.test_control import POLL, Http, control_cluster

# The ISR must not shrink on its own while a test holds a follower: a paused follower
# then blocks an acks=all produce until it fetches again (or the produce times out).
SLOW_ISR = {"replica.lag.time.max.ms": "60000", "default.replication.factor": "3"}


def fetchers(app: MiniKafka, broker_id: int) -> Any:
    return app.brokers[broker_id].replica_manager.fetcher_manager


async def produce_acks_all(app: MiniKafka, topic: str, value: bytes) -> ErrorCode:
    client: ProduceClient = await raw_to_leader(app, topic, 0)
    try:
        error, _ = await client.produce(topic, 0, value, acks=-1, timeout_ms=20000)
        return error
    finally:
        await client.close()


async def a_replicated_topic(app: MiniKafka, topic: str) -> tuple[int, list[int]]:
    """Create ``topic`` (3 replicas); its leader and followers once all are in sync."""
    app.cluster.create_topic(topic, 1, 3, app.config.default_topic_configs())
    assert await produce_acks_all(app, topic, b"warm-up") is ErrorCode.none
    state = app.cluster.partition_state(topic, 0)
    assert state is not None
    return state.leader, [r for r in state.replicas if r != state.leader]


async def test_clear_resumes_a_paused_follower_so_acks_all_completes() -> None:
    async with control_cluster(brokers=3, **SLOW_ISR) as (app, http):
        leader, (follower, _) = await a_replicated_topic(app, "held")
        await http.ok("POST", f"/brokers/{follower}/replication", {"action": "pause"})
        produce = asyncio.ensure_future(produce_acks_all(app, "held", b"waits"))
        purgatory = app.brokers[leader].purgatories.produce
        await wait_until(lambda: purgatory.num_delayed() == 1, "the produce to park")
        assert not produce.done()  # parked in the Produce purgatory for the paused follower
        cleared = await http.ok("DELETE", "/faults")
        assert cleared["replication"] == {}
        # Without the clear it would answer REQUEST_TIMED_OUT after 20 s.
        assert await produce is ErrorCode.none
        assert not fetchers(app, follower).is_paused(("held", 0))


async def test_clear_and_resume_undo_a_replication_delay() -> None:
    async with control_cluster(brokers=3, **SLOW_ISR) as (app, http):
        _, (follower, other) = await a_replicated_topic(app, "slow")
        tp = ("slow", 0)
        body = {"action": "delay", "delay_ms": 200}
        await http.ok("POST", f"/brokers/{follower}/replication", body)
        await http.ok("POST", f"/brokers/{other}/replication", body)
        assert fetchers(app, follower).delay_ms(tp) == 200
        faults = await http.ok("GET", "/faults")
        assert faults["replication"] == {
            str(follower): {"paused": False, "delay_ms": 200},
            str(other): {"paused": False, "delay_ms": 200},
        }
        # resume-replication undoes a delay, not only a pause
        await http.ok("POST", f"/brokers/{follower}/replication", {"action": "resume"})
        assert fetchers(app, follower).delay_ms(tp) == 0
        # clear of one broker, then of all
        await http.ok("DELETE", f"/faults/{other}")
        assert fetchers(app, other).delay_ms(tp) == 0
        assert (await http.ok("GET", "/faults"))["replication"] == {}
        assert await produce_acks_all(app, "slow", b"fast again") is ErrorCode.none


async def test_replication_faults_outlive_a_restart_until_cleared() -> None:
    async with control_cluster(brokers=3, **SLOW_ISR) as (app, http):
        _, (follower, _) = await a_replicated_topic(app, "kept")
        await http.ok("POST", f"/brokers/{follower}/replication", {"action": "pause"})
        await http.ok("POST", f"/brokers/{follower}/stop")
        await http.ok("POST", f"/brokers/{follower}/start")
        assert fetchers(app, follower).replication_paused
        await http.ok("DELETE", "/faults")
        assert not fetchers(app, follower).replication_paused
        # A stopped broker can be paused too: it takes effect when it starts.
        await http.ok("POST", f"/brokers/{follower}/stop")
        await http.ok("POST", f"/brokers/{follower}/replication", {"action": "pause"})
        await http.ok("POST", f"/brokers/{follower}/start")
        assert fetchers(app, follower).replication_paused


async def status(http: Http) -> dict[str, Any]:
    answer: dict[str, Any] = await http.ok("GET", "/status")
    return answer


async def test_status_names_every_problem_and_is_ok_only_when_healed() -> None:
    async with control_cluster(brokers=3, **SLOW_ISR) as (app, http):
        await a_replicated_topic(app, "orders")
        healthy = await status(http)
        assert (healthy["status"], healthy["problems"]) == ("ok", [])
        assert [b["alive"] for b in healthy["brokers"]] == [True, True, True]
        (partition,) = healthy["topics"]["orders"]
        assert sorted(partition["isr"]) == [0, 1, 2] and partition["leader"] in (0, 1, 2)
        assert (await http.ok("GET", "/health"))["status"] == "ok"

        await http.ok("POST", "/brokers/1/stop")
        await http.ok("POST", "/brokers/2/replication", {"action": "delay", "delay_ms": 50})
        await http.ok("POST", "/brokers/0/latency", {"ms": 5})
        await http.ok(
            "POST", "/faults", {"broker": 0, "api_key": "Fetch", "error_code": 6, "count": 2}
        )
        broken = await status(http)
        assert broken["status"] == "degraded"
        assert (await http.ok("GET", "/health"))["status"] == "degraded"
        problems = broken["problems"]
        assert "broker 1 is stopped" in problems
        assert "replication of broker 2 is delayed 50 ms per fetch" in problems
        assert "broker 0 answers 5 ms late" in problems
        assert "broker 0 fails its next 2 Fetch requests with NOT_LEADER_OR_FOLLOWER" in problems
        assert any("partitions under-replicated: orders-0" in p for p in problems)
        by_id = {b["id"]: b for b in broker_list(broken)}
        assert by_id[1]["alive"] is False and by_id[1]["leader_of"] == 0
        assert by_id[2]["replication"] == "delayed 50 ms"
        assert by_id[0]["latency_ms"] == 5
        (partition,) = broken["topics"]["orders"]
        assert 1 not in partition["isr"] and partition["leader"] != 1
        assert broken["faults"]["replication"] == {"2": {"paused": False, "delay_ms": 50}}

        await http.ok("DELETE", "/faults")
        after_clear = await status(http)
        assert after_clear["problems"][0] == "broker 1 is stopped"  # clear starts nothing
        await http.ok("POST", "/brokers/1/start")

        async def ok_again() -> bool:
            return (await status(http))["status"] == "ok"

        await wait_until(ok_again, "the restarted broker to rejoin every ISR", **POLL)

        for broker_id in (0, 1, 2):
            await http.ok("POST", f"/brokers/{broker_id}/stop")
        down = await status(http)
        assert down["status"] == "down"


def broker_list(answer: dict[str, Any]) -> list[dict[str, Any]]:
    brokers: list[dict[str, Any]] = answer["brokers"]
    return brokers


async def test_the_purgatory_page_is_indented_and_names_partitions_as_kafka() -> None:
    async with control_cluster() as (app, http):
        app.cluster.create_topic("idle", 1, 1, app.config.default_topic_configs())
        consumer = AIOKafkaConsumer(
            "idle", bootstrap_servers=app.bootstrap, fetch_max_wait_ms=10_000
        )
        await consumer.start()
        getting = asyncio.ensure_future(consumer.getone())
        try:

            async def page() -> str:
                async with http.session.get("/purgatory") as response:
                    return await response.text()

            async def parked() -> bool:
                return '"idle-0"' in await page()

            await wait_until(parked, "a parked fetch on idle-0", **POLL)
            text = await page()
            assert text.startswith("{\n  ")  # indented, not one 4 KB line
            assert "('idle', 0)" not in text
            json.loads(text)
        finally:
            getting.cancel()
            await consumer.stop()


def test_fault_help_points_at_make_runs_port() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "minikafka", "fault", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    assert "9990" in result.stdout and "9000" not in result.stdout
