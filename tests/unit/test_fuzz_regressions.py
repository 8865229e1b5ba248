"""Handler failures ``bench/hostile/fuzz_bench.py`` found, each replayed through the dispatcher.

A handler that raises is answered UNKNOWN_SERVER_ERROR with a traceback in the log (the
dispatcher's exception policy); each test here sends the request that did it and expects
Kafka's answer instead. The broker is the composition root's (``dispatch_node``), on the
manual clock; the group coordinator's load runs when the test says.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.coordinator.coordinator_loader import ManualLoadScheduler
from protocol.builders import request_builder
from tests.helpers.dispatch_node import Node, dispatch_node

CONSUMER_GROUP_HEARTBEAT = 68
TOPIC = "t"


@pytest.fixture
async def node() -> AsyncIterator[Node]:
    """Broker 0, leading a loaded ``__consumer_offsets`` and a topic ``t``."""
    scheduler = ManualLoadScheduler()
    node = dispatch_node(load_scheduler=lambda: scheduler)
    services = node.dispatcher.services
    await services.replica_manager.start()
    await services.coordinators.group.start()
    services.metadata.create_topic(TOPIC, 1, 1, {})
    services.coordinators.group_metadata_manager.ensure_offsets_topic()
    scheduler.run_all()
    yield node
    await services.coordinators.group.stop()
    await services.replica_manager.stop()


def send(node: Node, api_key: int, version: int, message: str, **fields: Any) -> Any:
    body = getattr(request_builder(api_key, version), message)(**fields)
    return node.answer(node.send(api_key, version, body))


async def test_consumer_group_heartbeat_v0_has_no_regex_field(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    # SubscribedTopicRegex came with v1: the handler read it from a v0 request
    # (AttributeError, answered UNKNOWN_SERVER_ERROR).
    caplog.set_level(logging.ERROR)
    answer = send(
        node,
        CONSUMER_GROUP_HEARTBEAT,
        0,
        "ConsumerGroupHeartbeatRequest",
        group_id="g",
        member_id="",  # v0: the broker gives the member its id
        member_epoch=0,
        rebalance_timeout=30_000,
        subscribed_topic_names=(TOPIC,),
        server_assignor=None,
        topic_partitions=(),
    )
    assert answer.error_code is ErrorCode.none, answer
    assert answer.member_id and answer.member_epoch >= 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
