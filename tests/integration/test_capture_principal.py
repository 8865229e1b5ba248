"""The capture records who sent each request and on which listener (issue 22): a SASL
PLAIN producer is ``User:alice`` on SASL_PLAINTEXT, a plaintext one ``User:ANONYMOUS``."""

from __future__ import annotations

from pathlib import Path

from aiokafka import AIOKafkaProducer

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from protocol.capture import CaptureRequest
from protocol.capture_files import read_capture
from tests.integration.conftest import FAST_GROUPS

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


async def test_capture_records_principal_and_listener(tmp_path: Path) -> None:
    config = BrokerConfig.model_validate(
        {
            **FAST_GROUPS,
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                f'{PLAIN} required user_alice="alice-secret";'
            ),
        }
    )
    capture_dir = tmp_path / "capture"
    app = MiniKafka(config, port=0, capture_dir=capture_dir)
    await app.start()
    try:
        secure = AIOKafkaProducer(
            bootstrap_servers=app.listener_bootstrap("SASL_PLAINTEXT"),
            client_id="alice-app",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password="alice-secret",
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
    requests = [r for r in read_capture(capture_dir) if isinstance(r, CaptureRequest)]
    seen = {(r.client_id, r.principal, r.listener_name) for r in requests if r.api_key == 0}
    assert seen == {
        ("alice-app", "User:alice", "SASL_PLAINTEXT"),
        ("anon-app", "User:ANONYMOUS", "PLAINTEXT"),
    }
