"""A what-if with a quota (issue 22): a capture replayed with ``--target-quotas``.

Two producers are captured (client ids ``throttled-app`` and ``free-app``, the same
traffic); the replay starts a 1-broker target whose ``producer_byte_rate`` quota on
``throttled-app`` is far below what it sends. The replay keeps the captured client ids,
so the target throttles that client's replayed Produce requests and no other: the
results carry ``throttle_time_ms > 0`` for it, 0 for the other, and so does the
target's capture (which the report's throttle table reads; the report itself is left to
its own tests, to keep this one short). States only, no timings. The quota
windows are shortened (``quota.window.num=2``) so a throttle lasts about a second.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aiokafka import AIOKafkaProducer

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from protocol.capture import CaptureRequest
from protocol.capture_files import read_capture
from tests.integration.conftest import FAST_GROUPS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")

PRODUCERS = ("throttled-app", "free-app")
VALUE = b"x" * 3000  # three sends of 3000 bytes against a quota of 1024 B/s


async def _capture(capture_dir: Path) -> None:
    app = MiniKafka(BrokerConfig.model_validate(FAST_GROUPS), port=0, capture_dir=capture_dir)
    await app.start()
    try:
        for client_id in PRODUCERS:
            producer = AIOKafkaProducer(
                bootstrap_servers=app.bootstrap, client_id=client_id, acks=1, linger_ms=0
            )
            await producer.start()
            try:
                for _ in range(3):
                    await producer.send_and_wait("metered", VALUE, partition=0)
            finally:
                await producer.stop()
    finally:
        await app.stop()


def test_replay_with_a_client_quota_throttles_that_client(
    spark: SparkSession, tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    from spark_jobs import replay

    capture_dir = tmp_path / "capture"
    asyncio.run(_capture(capture_dir))
    quotas = tmp_path / "quotas.txt"
    quotas.write_text(
        "# kafka-configs.sh --alter ... lines\n"
        "--entity-type clients --entity-name throttled-app "
        "--add-config producer_byte_rate=1024\n"
    )
    out = tmp_path / "replay-quota"
    argv = ["--capture", str(capture_dir), "--target-brokers", "1", "--out", str(out)]
    argv += ["--target-quotas", str(quotas), "--partitions", "1"]
    argv += ["--target-override", "quota.window.num=2"]
    assert replay.main(argv) == 0

    rows: list[dict[str, Any]] = pq.read_table(out).to_pylist()
    produces = [r for r in rows if r["api_name"] == "Produce"]
    assert not [r for r in produces if r["replay_error"]], "no replay errors"
    by_client = {c: [r for r in produces if r["client_id"] == c] for c in PRODUCERS}
    assert all(len(by_client[c]) == 3 for c in PRODUCERS), by_client
    # The quota's client is throttled; the other, on the same broker, is not.
    assert max(r["throttle_time_ms"] for r in by_client["throttled-app"]) > 0
    assert {r["throttle_time_ms"] for r in by_client["free-app"]} == {0}
    run = json.loads((out / "_replay.json").read_text())
    assert "quotas=quotas.txt" in run["label"]

    # The target's own record (what the report's throttle table reads): the same.
    target = [r for r in read_capture(out / "_target_capture") if isinstance(r, CaptureRequest)]
    throttled = {r.client_id for r in target if r.api_key == 0 and r.throttle_time_ms > 0}
    assert throttled == {"throttled-app"}
