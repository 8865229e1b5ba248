"""The control endpoint refuses what a web page could send it (issue 34).

A page open in the developer's browser can POST ``text/plain`` to 127.0.0.1 without a
CORS preflight, and a DNS-rebinding page can read answers under its own name: state
changes need the ready line's token and a JSON body, the Origin must be the endpoint's
own and the Host must name it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.control.token_file import TOKEN_ENV

EVIL = "http://evil.example"


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[MiniKafka, aiohttp.ClientSession]]:
    app = MiniKafka(BrokerConfig.model_validate({}), brokers=2, port=0, control_port=0)
    await app.start()
    try:
        assert app.control_url is not None
        async with aiohttp.ClientSession(app.control_url) as session:
            yield app, session
    finally:
        await app.stop()


async def _post(
    session: aiohttp.ClientSession, path: str, data: str, **headers: str
) -> tuple[int, Any]:
    async with session.post(path, data=data, headers=headers) as resp:
        return resp.status, await resp.json()


def _alive(app: MiniKafka, broker_id: int) -> bool:
    return app.cluster.brokers[broker_id].alive


async def test_the_issues_cross_origin_text_plain_post_is_refused(
    endpoint: tuple[MiniKafka, aiohttp.ClientSession],
) -> None:
    """``curl -X POST -H 'Content-Type: text/plain' -H 'Origin: http://evil.example'
    .../brokers/1/stop`` stopped the broker; now it is refused, token or not."""
    app, session = endpoint
    status, answer = await _post(
        session, "/brokers/1/stop", "", **{"Content-Type": "text/plain", "Origin": EVIL}
    )
    assert status == 403 and "cross-origin" in answer["error"]
    auth = {"Authorization": f"Bearer {app.control_token}"}
    for headers in (
        {"Content-Type": "text/plain", "Origin": EVIL, **auth},
        {"Content-Type": "application/json", "Origin": EVIL, **auth},
    ):
        status, _ = await _post(session, "/brokers/1/stop", "{}", **headers)
        assert status == 403
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        status, answer = await _post(
            session, "/brokers/1/stop", "{}", **{"Content-Type": content_type, **auth}
        )
        assert status == 415 and "application/json" in answer["error"]
    assert _alive(app, 1)


async def test_a_mutation_needs_the_token_and_is_done_with_it(
    endpoint: tuple[MiniKafka, aiohttp.ClientSession],
) -> None:
    app, session = endpoint
    json_type = {"Content-Type": "application/json"}
    status, answer = await _post(session, "/brokers/1/stop", "{}", **json_type)
    assert status == 401 and "token" in answer["error"]
    status, _ = await _post(
        session, "/brokers/1/stop", "{}", **json_type, Authorization="Bearer wrong"
    )
    assert status == 403
    async with session.delete("/faults") as resp:
        assert resp.status == 401
    assert _alive(app, 1)

    same_origin = {"Origin": app.control_url or ""}
    status, answer = await _post(
        session,
        "/brokers/1/stop",
        "{}",
        **json_type,
        **same_origin,
        **{"X-MiniKafka-Token": app.control_token},
    )
    assert (status, answer) == (200, {"broker": 1, "alive": False})
    assert not _alive(app, 1)
    status, answer = await _post(
        session, "/brokers/1/start", "", **json_type, Authorization=f"Bearer {app.control_token}"
    )
    assert (status, answer) == (200, {"broker": 1, "alive": True})


async def test_a_rebinding_host_cannot_read(
    endpoint: tuple[MiniKafka, aiohttp.ClientSession],
) -> None:
    _, session = endpoint
    async with session.get("/cluster", headers={"Host": "evil.example"}) as resp:
        assert resp.status == 403
        assert "DNS rebinding" in (await resp.json())["error"]
    for host in ("localhost", "127.0.0.1"):
        async with session.get("/health", headers={"Host": host}) as resp:
            assert resp.status == 200


def test_serve_beyond_loopback_without_a_token_is_refused() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "minikafka",
            "serve",
            "--port",
            "0",
            "--control-port",
            "0",
            "--control-host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if k != TOKEN_ENV},
    )
    assert result.returncode == 2
    assert "--control-token" in result.stderr and "loopback" in result.stderr


def test_the_pytest_plugins_control_client_sends_the_token() -> None:
    from minikafka.pytest_plugin import start_cluster

    cluster = start_cluster(brokers=2, control_port=0)
    try:
        assert cluster.control.stop_broker(1) == {"broker": 1, "alive": False}
        assert cluster.control.start_broker(1) == {"broker": 1, "alive": True}
    finally:
        cluster.stop()
