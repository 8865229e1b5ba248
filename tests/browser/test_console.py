"""The console in a real browser (issue 34's "Done when"), against a real 3-broker
cluster and real clients: what a user sees, waited for as states, never for times.

The tests run in order on one cluster; the last one stops and starts broker 1.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from minikafka.pytest_plugin import MiniKafkaCluster
from testkit.raw_client import RawClient
from testkit.requests import FETCH, FETCH_V, fetch_fields
from tests.browser.conftest import ClientLoop, serious_violations

pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
from playwright.sync_api import Browser, Page, expect

WAIT_MS = 20_000
CLI = (sys.executable, "-m", "minikafka")
PAGES = {
    "overview": "/",
    "topics": "/topics",
    "topic": "/topics/orders",
    "records": "/topics/orders/0/records",
    "groups": "/groups",
    "purgatory": "/purgatory",
    "quotas": "/quotas",
    "acls": "/acls",
    "capture": "/capture",
}


def _shot(page: Page, directory: Path, name: str) -> None:
    page.screenshot(path=str(directory / f"{name}.png"), full_page=True)


def _produce(
    clients: ClientLoop, bootstrap: str, topic: str, count: int, partition: int = 0
) -> None:
    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(count):
                await producer.send_and_wait(
                    topic,
                    key=f"order-{i}".encode(),
                    value=b'{"item": "tea", "n": %d}' % i,
                    headers=[("source", b"browser-test"), ("seq", str(i).encode())],
                    partition=partition,
                )
        finally:
            await producer.stop()

    clients.run(produce())


def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    result = subprocess.run(
        [*CLI, "topics", "create", name, "--partitions", str(partitions), "--bootstrap", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_overview_shows_three_brokers(page: Page, console: str, screenshots: Path) -> None:
    rows = page.locator("#brokers tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator("#brokers td.state")).to_have_text(["up", "up", "up"])
    expect(page.locator("#cluster-status")).to_have_text("ok")


def test_a_topic_created_with_the_cli_appears(
    page: Page, console: str, cluster: MiniKafkaCluster
) -> None:
    page.goto(f"{console}/topics")
    expect(page.locator("#live-status")).to_contain_text("Live")
    _create_topic(cluster.bootstrap_servers, "orders", 3)
    # No reload: the live update brings it.
    expect(page.locator('tr[data-topic="orders"]')).to_be_visible(timeout=WAIT_MS)
    page.get_by_role("link", name="orders").click()
    expect(page.locator("#partitions tbody tr")).to_have_count(3)
    expect(page.locator("#configs")).to_contain_text("cleanup.policy")


def test_the_record_browser_shows_keys_and_headers(
    page: Page, console: str, cluster: MiniKafkaCluster, clients: ClientLoop
) -> None:
    _produce(clients, cluster.bootstrap_servers, "orders", 5)
    page.goto(f"{console}/topics/orders/0/records")
    record = page.locator('#records tr[data-offset="3"]')
    expect(record.locator("td.key")).to_have_text("order-3", timeout=WAIT_MS)
    expect(record.locator("td.headers")).to_contain_text("source=browser-test")
    expect(record.locator("td.value")).to_contain_text('"n": 3')
    page.get_by_label("Show values as").select_option("hex")
    page.get_by_role("button", name="Read").click()
    expect(record.locator("td.key")).to_have_text("6f 72 64 65 72 2d 33")


def test_a_long_poll_fetch_waits_in_the_fetch_purgatory_until_a_record_arrives(
    page: Page, console: str, cluster: MiniKafkaCluster, clients: ClientLoop
) -> None:
    cluster.create_topic("longpoll", 1, replication_factor=1)  # no follower fetches on it

    def leader_address() -> tuple[str, int]:
        leader = cluster.app.cluster.topics["longpoll"].partitions[0].leader
        endpoint = cluster.app.cluster.brokers[leader]
        return endpoint.host, endpoint.port

    host, port = cluster.call(leader_address)
    raw = clients.run(RawClient.connect(host, port))
    try:
        raw.send(FETCH, FETCH_V, "FetchRequest", **fetch_fields("longpoll", 0, 60_000))
        clients.run(raw.drain())
        page.goto(f"{console}/purgatory")
        parked = page.locator('table.operations[data-purgatory="Fetch"] tr', has_text="longpoll-0")
        expect(parked).to_have_count(1, timeout=WAIT_MS)
        expect(parked.locator("td.deadline")).to_contain_text(" ms")
        _produce(clients, cluster.bootstrap_servers, "longpoll", 1)
        expect(parked).to_have_count(0, timeout=WAIT_MS)
        response = clients.run(raw.response())
        assert response.body.responses[0].partitions[0].high_watermark == 1
    finally:
        clients.run(raw.close())


def test_a_groups_lag_falls_as_its_consumer_reads(
    page: Page, console: str, cluster: MiniKafkaCluster, clients: ClientLoop
) -> None:
    cluster.create_topic("lagged", 1)
    _produce(clients, cluster.bootstrap_servers, "lagged", 20)
    tp = TopicPartition("lagged", 0)

    async def make() -> AIOKafkaConsumer:
        made = AIOKafkaConsumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id="readers",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await made.start()
        made.assign([tp])
        return made

    consumer = clients.run(make())

    async def read_up_to(offset: int) -> None:
        while await consumer.position(tp) < offset:
            await consumer.getmany(
                tp, timeout_ms=1000, max_records=offset - await consumer.position(tp)
            )
        await consumer.commit({tp: offset})

    try:
        page.goto(f"{console}/groups")
        clients.run(read_up_to(5))
        group = page.locator('section[data-group="readers"]')
        expect(group.locator("p span.lag")).to_have_text("15", timeout=WAIT_MS)
        clients.run(read_up_to(20))
        expect(group.locator("p span.lag")).to_have_text("0", timeout=WAIT_MS)
    finally:
        clients.run(consumer.stop())


@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_is_accessible_and_has_a_screenshot(
    page: Page, console: str, screenshots: Path, name: str
) -> None:
    page.goto(f"{console}{PAGES[name]}")
    expect(page.locator("#live-status")).to_contain_text("Live")
    _shot(page, screenshots, name)
    assert serious_violations(page) == []


def test_a_mutation_without_the_token_is_refused_and_so_is_a_cross_origin_post(
    browser: Browser, console: str, cluster: MiniKafkaCluster
) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{console}/")  # no ?token: no cookie, no token in the page
        page.get_by_role("button", name="Stop broker 2").click()
        expect(page.locator("#fault-status")).to_contain_text("Refused (401)")
        context.route(
            "http://evil.example/**",
            lambda route: route.fulfill(
                body="<html><body>evil</body></html>", content_type="text/html"
            ),
        )
        page.goto("http://evil.example/")
        page.evaluate(
            """async (url) => { try { await fetch(url, {method: 'POST', mode: 'no-cors',
                headers: {'Content-Type': 'text/plain'}, body: ''}); } catch (e) {} }""",
            f"{cluster.control_url}/brokers/2/stop",
        )
    finally:
        context.close()
    assert cluster.call(lambda: cluster.app.cluster.brokers[2].alive)


def test_stopping_broker_1_moves_its_leaders_and_shrinks_the_isr_then_start_brings_it_back(
    page: Page, console: str, cluster: MiniKafkaCluster, screenshots: Path
) -> None:
    cluster.create_topic("spread", 3)
    page.goto(f"{console}/")
    page.get_by_role("button", name="Stop broker 1").click()
    expect(page.locator("#fault-status")).to_contain_text("done")
    expect(page.locator('tr[data-broker="1"] td.state')).to_have_text("down", timeout=WAIT_MS)
    expect(page.locator("#cluster-status")).to_have_text("degraded")
    _shot(page, screenshots, "broker-stopped")
    page.goto(f"{console}/topics/spread")
    expect(page.locator("#partitions td.leader")).not_to_contain_text(["1", "1", "1"])
    for isr in page.locator("#partitions td.isr").all():
        expect(isr).not_to_contain_text("1")
    page.goto(f"{console}/")
    page.get_by_role("button", name="Start broker 1").click()
    expect(page.locator('tr[data-broker="1"] td.state')).to_have_text("up", timeout=WAIT_MS)
    page.goto(f"{console}/topics/spread")
    page.wait_for_function(
        """() => [...document.querySelectorAll('#partitions td.isr')]
            .every(td => td.textContent.split(',').length === 3)""",
        timeout=30_000,
    )
