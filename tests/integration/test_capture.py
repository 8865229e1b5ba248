"""Capture from a real broker driven by aiokafka: one record per request, with timings."""

from __future__ import annotations

import collections
import itertools
import shutil
import warnings
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from protocol.capture import CaptureRequest, DelayedOperationEvent
from protocol.capture_files import CaptureTruncatedWarning, capture_files, read_capture
from testkit.polling import wait_until
from tests.integration.conftest import FAST_GROUPS


async def _traffic(capture_dir: Path) -> MiniKafka:
    app = MiniKafka(BrokerConfig.model_validate(FAST_GROUPS), port=0, capture_dir=capture_dir)
    await app.start()
    try:
        producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)
        await producer.start()
        for i in range(3):
            await producer.send_and_wait("cap", f"m{i}".encode(), partition=0)
        consumer = AIOKafkaConsumer(
            "cap",
            bootstrap_servers=app.bootstrap,
            group_id="cap-group",
            auto_offset_reset="earliest",
            fetch_max_wait_ms=300,
        )
        await consumer.start()
        got = 0
        while got < 3:
            batches = await consumer.getmany(timeout_ms=1000)
            got += sum(len(v) for v in batches.values())
        # Nothing more to read: the next fetches wait in the purgatory for max_wait. Two
        # expire: the consumer sent the second after it had the first one's answer, so
        # that answer (and its capture record) is written.
        fetches = app.brokers[0].purgatories["Fetch"]
        await wait_until(lambda: fetches.expired_count >= 2, "two fetches expired")
        await consumer.stop()
        await producer.stop()
    finally:
        await app.stop()
    return app


async def test_every_request_is_captured_with_its_timing(tmp_path: Path) -> None:
    await _traffic(tmp_path)
    records = list(read_capture(tmp_path))
    requests = [r for r in records if isinstance(r, CaptureRequest)]
    apis = collections.Counter(r.api_name for r in requests)
    assert apis["Produce"] == 3
    assert {"ApiVersions", "Metadata", "JoinGroup", "SyncGroup", "Fetch"} <= set(apis)

    by_connection: dict[str, list[CaptureRequest]] = collections.defaultdict(list)
    for r in requests:
        by_connection[r.connection_id].append(r)
    for rs in by_connection.values():
        rs.sort(key=lambda r: r.sequence)
        assert [r.sequence for r in rs] == list(range(len(rs)))  # none lost, none twice
        assert all(
            a.received_monotonic_us <= b.received_monotonic_us for a, b in itertools.pairwise(rs)
        )
    for r in requests:
        parts = (
            r.request_queue_time_ms
            + r.local_time_ms
            + r.remote_time_ms
            + r.response_queue_time_ms
            + r.response_send_time_ms
        )
        assert r.total_time_ms == pytest.approx(parts, abs=0.01)
        assert r.request_size == len(r.request) + 4
        assert r.response_size > 0
        assert r.error_codes or r.api_name in ("Metadata",)

    parked = [r for r in requests if r.api_name == "Fetch" and r.purgatory_outcome == "expired"]
    assert parked, "a fetch that found nothing should have waited in the purgatory"
    assert all(r.purgatory == "Fetch" and r.remote_time_ms > 100 for r in parked)
    # aiokafka's first JoinGroup is answered MEMBER_ID_REQUIRED (79).
    joins = [r for r in requests if r.api_name == "JoinGroup"]
    assert any(79 in r.error_codes for r in joins)

    events = [r for r in records if isinstance(r, DelayedOperationEvent)]
    fetch_ops = {e.operation_id: e for e in events if e.kind == "DelayedFetch"}
    expired = [e for e in events if e.kind == "DelayedFetch" and e.event == "expired"]
    assert expired and fetch_ops
    created = {e.operation_id: e for e in events if e.event == "created"}
    for e in expired:
        assert created[e.operation_id].keys and created[e.operation_id].purgatory == "Fetch"
        assert e.connection_id in by_connection  # tied to the request that parked it


async def test_capture_file_cut_mid_record_reads_up_to_the_cut(tmp_path: Path) -> None:
    await _traffic(tmp_path / "full")
    (source,) = capture_files(tmp_path / "full")
    whole = list(read_capture(source))
    data = source.read_bytes()
    cut = tmp_path / "cut"
    cut.mkdir()
    shutil.copy(source, cut / source.name)
    (cut / source.name).write_bytes(data[: len(data) * 2 // 3])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        partial = list(read_capture(cut))
    assert any(issubclass(w.category, CaptureTruncatedWarning) for w in caught)
    assert 0 < len(partial) < len(whole)
    assert partial == whole[: len(partial)]
