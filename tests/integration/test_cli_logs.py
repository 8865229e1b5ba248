"""Output a person reads: one log line per broker state change, partitions named
``topic-0`` everywhere (capture files included), JSON that is indented but compact."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer

from broker.app import MiniKafka
from broker.cluster.controller import BrokerChange, partition_list
from broker.config.broker_config import BrokerConfig
from broker.control.pretty import dumps
from broker.server.watch_keys import watch_key_name
from protocol.capture import DelayedOperationEvent
from protocol.capture_files import read_capture
from testkit.polling import wait_until
from tests.integration.conftest import FAST_GROUPS, running_cluster
from tests.integration.test_control import POLL


def _lines(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= level]


async def test_a_broker_stop_and_start_is_a_few_lines_not_one_per_partition(
    caplog: pytest.LogCaptureFixture,
) -> None:
    overrides = {"default.replication.factor": "3", "offsets.topic.num.partitions": "20"}
    async with running_cluster(brokers=3, **overrides) as app:
        app.cluster.create_topic("orders", 6, 3, app.config.default_topic_configs())
        app.cluster.create_topic("__consumer_offsets", 20, 3, {})

        async def in_sync() -> bool:
            return all(len(s.isr) == 3 for t in app.cluster.topics.values() for s in t.partitions)

        await wait_until(in_sync, "every ISR full", **POLL)
        caplog.clear()
        with caplog.at_level(logging.INFO):
            await app.stop_broker(1)
            await wait_until(
                lambda: any("Broker 1 is down" in line for line in _lines(caplog)),
                "the broker-down line",
            )
            stop_lines = _lines(caplog)
            caplog.clear()
            await app.start_broker(1)
            await wait_until(in_sync, "broker 1 back in every ISR", **POLL)
            await wait_until(
                lambda: any(line.startswith("Expanding ISR: broker 1") for line in _lines(caplog)),
                "the ISR-expansion line",
            )
            start_lines = _lines(caplog)
    (down,) = [line for line in stop_lines if "Broker 1 is down" in line]
    assert "leadership of 9 partitions moved" in down
    assert "orders-1" in down and "('orders'" not in down
    assert len(stop_lines) <= 3, stop_lines  # not ~26 lines for 26 partitions
    assert any("Broker 1 is up" in line for line in start_lines)
    expanded = [line for line in start_lines if line.startswith("Expanding ISR: broker 1")]
    assert expanded
    assert len(start_lines) <= 8, start_lines


def test_a_summary_line_names_a_few_partitions_users_first() -> None:
    names = [f"__consumer_offsets-{i}" for i in range(10)] + ["orders-10", "orders-2"]
    assert partition_list(names, shown=3) == "orders-2, orders-10, __consumer_offsets-0, +9 more"
    change = BrokerChange(2, leaders_moved={"a-0": 0, "a-1": 1, "b-0": -1}, isr_shrunk=["c-0"])
    assert change.summary("is down") == (
        "Broker 2 is down: leadership of 3 partitions moved "
        "(offline, 1 to broker 0, 1 to broker 1: a-0, a-1, b-0); left the ISR of 1 more partitions"
    )


def test_watch_keys_are_named_as_kafka_names_partitions() -> None:
    assert watch_key_name(("orders", 3)) == "orders-3"
    assert watch_key_name("join-billing") == "join-billing"
    assert watch_key_name(("a", True)) == "('a', True)"


def test_pretty_json_is_indented_with_short_values_on_one_line() -> None:
    value = {"brokers": [{"id": i, "isr": [0, 1, 2]} for i in range(2)], "empty": []}
    text = dumps(value, width=40)
    assert json.loads(text) == value
    assert text.splitlines()[:3] == ["{", '  "brokers": [', '    {"id": 0, "isr": [0, 1, 2]},']


async def test_capture_names_partitions_topic_dash_index(tmp_path: Path) -> None:
    config = BrokerConfig.model_validate(FAST_GROUPS)
    app = MiniKafka(config, port=0, capture_dir=tmp_path)
    await app.start()
    try:
        app.cluster.create_topic("workload", 1, 1, config.default_topic_configs())
        consumer = AIOKafkaConsumer(
            "workload", bootstrap_servers=app.bootstrap, fetch_max_wait_ms=100
        )
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=600)  # a fetch or two park and expire
        finally:
            await consumer.stop()
    finally:
        await app.stop()
    keys = {
        key
        for record in read_capture(tmp_path)
        if isinstance(record, DelayedOperationEvent)
        for key in record.keys
    }
    assert "workload-0" in keys
    assert not any(key.startswith("(") for key in keys)
