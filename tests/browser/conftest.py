"""The console's browser tests: Debian's chromium driven by Playwright's Python API.

One browser and one 3-broker cluster (the pytest plugin's, with its control endpoint
and console) per module. They skip with one line when chromium or Playwright is
missing (``make chromium`` installs the browser; never ``playwright install``, whose
download does not work here), and the accessibility checks skip when axe-core is not in
``.tools`` (``make axe``). Screenshots go to ``$MINIKAFKA_CONSOLE_SCREENSHOTS`` when set
(``docs/console`` holds the committed ones), else to a temporary directory.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from minikafka.pytest_plugin import MiniKafkaCluster, start_cluster

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

T = TypeVar("T")
CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / ".tools" / "node_modules" / "axe-core" / "axe.min.js"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium: `make chromium` installs it (the browser tests skip)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install -e '.[dev]')"
    )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniKafkaCluster]:
    running = start_cluster(
        brokers=3,
        overrides={"default.replication.factor": "3", "offsets.topic.replication.factor": "3"},
        control_port=0,
        capture_dir=tmp_path_factory.mktemp("capture"),
    )
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def console(cluster: MiniKafkaCluster) -> str:
    assert cluster.control_url is not None
    return f"{cluster.control_url}/console"


@pytest.fixture
def page(browser: Browser, console: str, cluster: MiniKafkaCluster) -> Iterator[Page]:
    """A page holding the token, entered as the ready line's address does."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.goto(f"{console}?token={cluster.control_token}")
    try:
        yield opened
    finally:
        context.close()


class ClientLoop:
    """An event loop on a thread of its own for the test's Kafka clients (aiokafka, the
    raw client): Playwright's sync API holds the test thread's loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def clients() -> Iterator[ClientLoop]:
    running = ClientLoop()
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def screenshots() -> Path:
    chosen = os.environ.get("MINIKAFKA_CONSOLE_SCREENSHOTS")
    directory = Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix="console-shots-"))
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def serious_violations(page: Page) -> list[str]:
    """axe-core's serious and critical violations on ``page``; skips without axe."""
    if not AXE.exists():
        pytest.skip("axe-core is not in .tools: `make axe` installs it (the check skips)")
    page.add_script_tag(path=str(AXE))
    found: list[Any] = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
            .filter(v => v.impact === 'serious' || v.impact === 'critical')
            .map(v => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map(
                n => n.target.join(' ')).slice(0, 3).join('; ')}`)"""
    )
    return [str(v) for v in found]
