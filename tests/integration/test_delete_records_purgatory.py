"""DeleteRecords waits in the leader's DeleteRecords purgatory for every follower.

Three brokers in this test's event loop, an RF 3 topic, one follower's replication
paused with the fault control the control endpoint uses. confluent-kafka's AdminClient
sends the DeleteRecords (in a thread: it blocks) and the test waits for states: the
request parked, the other follower trimmed, then the paused one after it resumes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, DeletedRecords
from kio.schema.errors import ErrorCode
from prometheus_client.parser import text_string_to_metric_families

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.server.purgatories import PurgatoryName
from protocol.capture import CaptureRequest, DelayedOperationEvent
from protocol.capture_files import read_capture
from testkit.polling import wait_until
from tests.helpers.cluster import leader_of, raw_to_leader
from tests.integration.conftest import FAST_GROUPS

pytestmark = pytest.mark.asyncio

TOPIC = "trimmed"
DELETE_RECORDS = 21
LONG = 1200  # polls of 50 ms: a minute, for a loaded machine


def delete_records(bootstrap: str, offset: int, operation_timeout_s: float) -> DeletedRecords:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records(
        [CKTopicPartition(TOPIC, 0, offset)],
        operation_timeout=operation_timeout_s,
        request_timeout=operation_timeout_s + 60,
    )
    [future] = futures.values()
    result: DeletedRecords = future.result(timeout=operation_timeout_s + 90)
    return result


def log_starts(app: MiniKafka) -> dict[int, int]:
    return {
        b.broker_id: b.replica_manager.partitions[(TOPIC, 0)].log_start_offset for b in app.brokers
    }


async def test_delete_records_parks_until_the_paused_follower_follows_or_times_out(
    tmp_path: Path,
) -> None:
    config = BrokerConfig.model_validate(FAST_GROUPS)
    app = MiniKafka(config, brokers=3, port=0, control_port=0, capture_dir=tmp_path)
    await app.start()
    try:
        await _park_then_resume_then_time_out(app)
    finally:
        await app.stop()
    records = list(read_capture(tmp_path))
    deletes = [r for r in records if isinstance(r, CaptureRequest) and r.api_key == DELETE_RECORDS]
    assert {(r.purgatory, r.purgatory_outcome) for r in deletes} == {
        ("DeleteRecords", "completed"),
        ("DeleteRecords", "expired"),
    }
    events = [r for r in records if isinstance(r, DelayedOperationEvent)]
    assert {e.event for e in events if e.kind == "DelayedDeleteRecords"} == {
        "created",
        "completed",
        "expired",
    }


async def _park_then_resume_then_time_out(app: MiniKafka) -> None:
    app.cluster.create_topic(TOPIC, 1, 3, {})
    leader_id = leader_of(app, TOPIC)
    leader = app.brokers[leader_id]
    paused, other = (b for b in app.brokers if b.broker_id != leader_id)
    raw = await raw_to_leader(app, TOPIC, 0)
    try:
        for i in range(10):
            assert await raw.produce(TOPIC, 0, f"r{i}".encode()) == (ErrorCode.none, i)
    finally:
        await raw.close()
    purgatory = leader.purgatories[PurgatoryName.DELETE_RECORDS]
    paused.replica_manager.fetcher_manager.pause_replication()

    deleting = asyncio.create_task(asyncio.to_thread(delete_records, app.bootstrap, 4, 120))
    await wait_until(lambda: purgatory.num_delayed() == 1, "parked", attempts=LONG)
    await wait_until(lambda: log_starts(app)[other.broker_id] == 4, "trim", attempts=LONG)
    assert not deleting.done()
    assert log_starts(app) == {leader_id: 4, other.broker_id: 4, paused.broker_id: 0}
    await _shown_by_the_control_endpoint(app, leader_id)

    paused.replica_manager.fetcher_manager.resume_replication()
    result = await asyncio.wait_for(deleting, 120)
    assert result.low_watermark == 4
    assert set(log_starts(app).values()) == {4}
    assert purgatory.num_delayed() == 0

    # Paused again: the request's own timeout answers REQUEST_TIMED_OUT.
    paused.replica_manager.fetcher_manager.pause_replication()
    with pytest.raises(KafkaException) as raised:
        await asyncio.to_thread(delete_records, app.bootstrap, 7, 0.5)
    assert raised.value.args[0].code() == KafkaError.REQUEST_TIMED_OUT
    assert log_starts(app)[leader_id] == 7
    assert log_starts(app)[paused.broker_id] == 4
    assert purgatory.expired_count == 1


async def _shown_by_the_control_endpoint(app: MiniKafka, leader_id: int) -> None:
    """``/purgatory`` lists the parked operation, ``/metrics`` counts it."""
    assert app.control_url is not None
    async with aiohttp.ClientSession(app.control_url) as http:
        async with http.get(f"/purgatory?broker={leader_id}") as resp:
            [view] = (await resp.json())["brokers"]
        shown = view["purgatories"]["DeleteRecords"]
        assert shown["num_delayed_operations"] == 1
        [operation] = shown["operations"]
        assert operation["kind"] == "DelayedDeleteRecords"
        async with http.get("/metrics") as resp:
            text = await resp.text()
        delayed = {
            (sample.labels["delayedOperation"], sample.labels["broker"]): sample.value
            for family in text_string_to_metric_families(text)
            if family.name == "kafka_server_delayedoperationpurgatory_numdelayedoperations"
            for sample in family.samples
        }
        assert delayed[("DeleteRecords", str(leader_id))] == 1
