"""Kafka 4.4's dead-letter queue for share groups (KIP-1191), with confluent-kafka 2.16.

One cluster: at ``share.version`` 1 (a new cluster's) a group with a DLQ topic configured
rejects records and nothing reaches the DLQ; after ``minikafka features upgrade --feature
share.version=2`` a second group rejects some records, lets others exhaust their
deliveries and accepts the rest, and the DLQ topic holds exactly the rejected and the
exhausted ones, with Kafka's headers and (``copy.record.enable``) their values. A plain
consumer reads the DLQ topic as a user would. Tests wait for states, never for times.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import uuid
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, TopicPartition

from broker.app import MiniKafka
from broker.observability.metrics import render_prometheus
from minikafka.cli import main as cli_main
from testkit.polling import wait_until
from tests.integration.conftest import running_cluster
from tests.integration.test_share_groups_kafka43 import (
    WAIT,
    Member,
    _produce,
    _set_group_configs,
    _share_partition,
)

pytestmark = pytest.mark.asyncio

_QUIET = {"log_level": 3}
DLQ = "dlq.orders"


def _upgrade_share_version(bootstrap: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli_main(
            ["features", "upgrade", "--feature", "share.version=2", "--bootstrap-server", bootstrap]
        )
    return code, out.getvalue()


def _dlq_records(bootstrap: str, count: int) -> list[Any]:
    """The DLQ topic's records, read from the start by a plain consumer."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"dlq-reader-{uuid.uuid4().hex[:6]}", **_QUIET}
    )
    consumer.assign([TopicPartition(DLQ, 0, 0)])
    records: list[Any] = []
    try:
        for _ in range(200):
            records.extend(m for m in consumer.consume(count, 0.1) if m.error() is None)
            if len(records) >= count:
                break
    finally:
        consumer.close()
    return records


def _end_offset(app: MiniKafka, topic: str) -> int:
    partition = app.brokers[0].services.replica_manager.online_partition((topic, 0))
    return -1 if partition is None else partition.high_watermark


def _decide(value: bytes, _count: int) -> Any:
    """r0, r1 rejected; r2, r3 released until their deliveries run out; the rest accepted."""
    if value in (b"r0", b"r1"):
        return AcknowledgeType.REJECT
    if value in (b"r2", b"r3"):
        return AcknowledgeType.RELEASE
    return AcknowledgeType.ACCEPT


async def _consume_all(app: MiniKafka, group: str, topic: str, values: list[bytes]) -> None:
    await asyncio.to_thread(_produce, app.bootstrap, topic, values)
    async with Member(app.bootstrap, group, topic, decide=_decide):
        await wait_until(
            lambda: (
                (sp := _share_partition(app, group, topic)) is not None
                and sp.start_offset == len(values)
            ),
            "every record accepted or archived",
            **WAIT,
        )


async def test_rejected_and_exhausted_records_reach_the_dlq_only_at_share_version_2() -> None:
    async with running_cluster() as app:
        app.cluster.create_topic("orders-v1", 1, 1, {})
        app.cluster.create_topic("orders", 1, 1, {})
        app.cluster.create_topic(DLQ, 1, 1, {"errors.deadletterqueue.group.enable": "true"})
        dlq_configs = {
            "errors.deadletterqueue.topic.name": DLQ,
            "errors.deadletterqueue.copy.record.enable": "true",
            "share.delivery.count.limit": "2",
        }
        values = [b"r%d" % i for i in range(6)]

        # share.version 1: the same group configs write nothing to the DLQ
        old = f"v1-{uuid.uuid4().hex[:6]}"
        await asyncio.to_thread(_set_group_configs, app.bootstrap, old, dlq_configs)
        await _consume_all(app, old, "orders-v1", values)
        assert _end_offset(app, DLQ) == 0

        code, out = await asyncio.to_thread(_upgrade_share_version, app.bootstrap)
        assert (code, out) == (0, "share.version was upgraded to 2.\n")

        group = f"v2-{uuid.uuid4().hex[:6]}"
        await asyncio.to_thread(_set_group_configs, app.bootstrap, group, dlq_configs)
        await _consume_all(app, group, "orders", values)
        records = await asyncio.to_thread(_dlq_records, app.bootstrap, 4)
        # the writes end before the records are archived: exactly these four, once each
        assert _end_offset(app, DLQ) == 4
        metrics = render_prometheus(lambda: app.brokers, {}).decode()

    seen = {m.value(): dict(m.headers() or []) for m in records}
    assert sorted(seen) == [b"r0", b"r1", b"r2", b"r3"]
    assert seen[b"r0"] == {
        "__dlq.errors.topic": b"orders",
        "__dlq.errors.partition": b"0",
        "__dlq.errors.offset": b"0",
        "__dlq.errors.group": group.encode(),
        "__dlq.errors.delivery.count": b"1",
        "__dlq.errors.message": b"Offset rejected by client.",
    }
    assert seen[b"r3"]["__dlq.errors.offset"] == b"3"
    assert seen[b"r3"]["__dlq.errors.delivery.count"] == b"2"
    assert seen[b"r3"]["__dlq.errors.message"] == b"Offset delivery count exceeded the threshold."
    count = "kafka_server_sharegroupmetrics_deadletterqueuerecordcount_total"
    assert f'{count}{{broker="0",group="{group}"}} 4.0' in metrics
