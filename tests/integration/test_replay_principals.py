"""The replay keeps client ids and principals (issue 22), against real brokers, no Spark.

A capture of two producers — ``alice-app`` over SASL_PLAINTEXT as ``User:alice``,
``anon-app`` over PLAINTEXT — is replayed (``replay_rows``, the executor side, in a
thread beside the brokers' event loop) against a target with both listeners. Given
``alice``'s password the replay authenticates her connections (PLAIN or SCRAM) before
their first request; the target's own capture shows each request with its captured
client id and principal. Without users every connection goes over PLAINTEXT.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from protocol.capture import CaptureRequest
from protocol.capture_files import read_capture
from spark_jobs.replay_client import REPLAY_COLUMNS, ReplaySchedule, replay_rows
from tests.integration.conftest import FAST_GROUPS

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
PASSWORD = "alice-secret"


def _secure_app(capture_dir: Path) -> MiniKafka:
    config = BrokerConfig.model_validate(
        {
            **FAST_GROUPS,
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                f'{PLAIN} required user_alice="{PASSWORD}";'
            ),
        }
    )
    app = MiniKafka(config, port=0, capture_dir=capture_dir)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        app.scram_credentials.add_scram(
            f"{mechanism}=[name=alice,password={PASSWORD}]", lambda n: b"s" * n
        )
    return app


async def _capture(capture_dir: Path) -> None:
    app = _secure_app(capture_dir)
    await app.start()
    try:
        secure = AIOKafkaProducer(
            bootstrap_servers=app.listener_bootstrap("SASL_PLAINTEXT"),
            client_id="alice-app",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password=PASSWORD,
        )
        plain = AIOKafkaProducer(bootstrap_servers=app.bootstrap, client_id="anon-app")
        for producer in (secure, plain):
            await producer.start()
            try:
                await producer.send_and_wait("who", b"v", partition=0)
            finally:
                await producer.stop()
    finally:
        await app.stop()


def _rows(capture_dir: Path) -> list[dict[str, Any]]:
    requests = [r for r in read_capture(capture_dir) if isinstance(r, CaptureRequest)]
    # What the replay's Spark side hands a task: each connection's requests together,
    # in sequence order; the SASL exchange itself is the replay's own step, not replayed.
    requests = [r for r in requests if r.api_key not in (17, 36)]
    requests.sort(key=lambda r: (r.broker_id, r.connection_id, r.sequence))
    return [{name: getattr(r, name) for name in REPLAY_COLUMNS} for r in requests]


def _address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


async def _replay(
    tmp_path: Path, users: dict[str, str], mechanism: str
) -> tuple[list[Any], list[CaptureRequest]]:
    rows = _rows(tmp_path / "capture")
    target_dir = tmp_path / "target"
    target = _secure_app(target_dir)
    await target.start()
    try:
        schedule = ReplaySchedule(
            addresses={0: _address(target.bootstrap)},
            start_unix_s=time.time(),
            first_received_us=min(r["received_unix_us"] for r in rows),
            speed=100.0,
            users=users,
            sasl_addresses={0: _address(target.listener_bootstrap("SASL_PLAINTEXT"))},
            sasl_mechanism=mechanism,
        )
        results = await asyncio.to_thread(lambda: list(replay_rows(rows, schedule)))
    finally:
        await target.stop()
    replayed = [r for r in read_capture(target_dir) if isinstance(r, CaptureRequest)]
    return results, replayed


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_replay_sends_as_the_captured_user(tmp_path: Path, mechanism: str) -> None:
    await _capture(tmp_path / "capture")
    results, replayed = await _replay(tmp_path, {"alice": PASSWORD}, mechanism)
    assert not [r for r in results if r.replay_error], results
    produced = {(r.client_id, r.principal) for r in results if r.api_name == "Produce"}
    assert produced == {("alice-app", "User:alice"), ("anon-app", None)}
    seen = {(r.client_id, r.principal, r.listener_name) for r in replayed if r.api_key == 0}
    assert seen == {
        ("alice-app", "User:alice", "SASL_PLAINTEXT"),
        ("anon-app", "User:ANONYMOUS", "PLAINTEXT"),
    }


async def test_without_users_every_connection_replays_over_plaintext(tmp_path: Path) -> None:
    await _capture(tmp_path / "capture")
    results, replayed = await _replay(tmp_path, {}, "PLAIN")
    assert not [r for r in results if r.replay_error], results
    seen = {(r.client_id, r.principal, r.listener_name) for r in replayed if r.api_key == 0}
    # The client ids are the captured ones either way: the header is replayed as captured.
    assert seen == {
        ("alice-app", "User:ANONYMOUS", "PLAINTEXT"),
        ("anon-app", "User:ANONYMOUS", "PLAINTEXT"),
    }


async def test_a_wrong_password_fails_that_users_requests_only(tmp_path: Path) -> None:
    await _capture(tmp_path / "capture")
    results, _ = await _replay(tmp_path, {"alice": "wrong"}, "SCRAM-SHA-256")
    failed = {r.client_id for r in results if r.replay_error}
    assert failed == {"alice-app"}
