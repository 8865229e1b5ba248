"""A Fetch through the dispatcher, answered at once or parked, on the manual clock.

The broker is built by ``build_broker`` (``tests/helpers/dispatch_node.py``); its replica
manager is started so that it hosts the topic, and time moves only when a test advances
the clock and the Fetch timer, as the reaper would. What a parked fetch holds lives as
long as its ``max_wait``, and with thousands parked every object counts (each one is
walked by the garbage collector): the per-request objects have no ``__dict__``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.replica.delayed_fetch import DelayedFetch
from broker.server.purgatories import PurgatoryName, PurgatoryOutcome
from protocol.builders import request_builder
from protocol.record_builder import build_record_batch
from testkit.requests import fetch_fields
from tests.helpers.dispatch_node import Node, dispatch_node

FETCH, PRODUCE = 1, 0
TOPIC = "parked"
MAX_WAIT_MS = 2_000


@pytest.fixture
async def node() -> AsyncIterator[Node]:
    node = dispatch_node()
    manager = node.dispatcher.services.replica_manager
    await manager.start()
    node.dispatcher.services.metadata.create_topic(TOPIC, 1, 1, {})
    yield node
    await manager.stop()


def _fetch(offset: int, max_wait_ms: int = MAX_WAIT_MS) -> Any:
    return request_builder(FETCH, 12).FetchRequest(
        **fetch_fields(TOPIC, offset, max_wait_ms, version=12)
    )


def _expire(node: Node, ms: int) -> None:
    node.clock.advance(ms)
    node.broker.purgatories.timers[PurgatoryName.FETCH].advance_clock()


def _append_one(node: Node) -> None:
    manager = node.dispatcher.services.replica_manager
    result = manager.append_to_leader(
        (TOPIC, 0), build_record_batch([(None, b"v", ())], timestamp_ms=0), 1
    )
    assert result.error is ErrorCode.none


async def test_a_fetch_with_data_is_answered_at_once_without_a_future(node: Node) -> None:
    _append_one(node)
    in_flight = node.send(FETCH, 12, _fetch(0))
    assert in_flight.ready and in_flight.future is None
    (topic,) = node.answer(in_flight).responses
    (partition,) = topic.partitions
    assert partition.error_code == ErrorCode.none and partition.records


async def test_a_parked_fetch_expires_at_max_wait_and_answers_empty(node: Node) -> None:
    in_flight = node.send(FETCH, 12, _fetch(0))
    future = in_flight.future
    assert future is not None and not future.done()
    assert in_flight.ctx is not None and in_flight.ctx.timing.purgatory is PurgatoryName.FETCH
    _expire(node, MAX_WAIT_MS - 1)
    assert not future.done()
    _expire(node, 1)
    assert future.done()
    assert in_flight.ctx.timing.purgatory_outcome is PurgatoryOutcome.EXPIRED
    (topic,) = node.answer(in_flight).responses
    (partition,) = topic.partitions
    assert partition.error_code == ErrorCode.none and not partition.records
    assert partition.high_watermark == 0


async def test_a_parked_fetch_completes_when_data_arrives(node: Node) -> None:
    in_flight = node.send(FETCH, 12, _fetch(0))
    assert in_flight.future is not None
    _append_one(node)
    assert in_flight.future.done()
    assert in_flight.ctx is not None
    assert in_flight.ctx.timing.purgatory_outcome is PurgatoryOutcome.COMPLETED
    (topic,) = node.answer(in_flight).responses
    assert topic.partitions[0].records


async def test_a_parked_fetch_whose_connection_went_expires_quietly(node: Node) -> None:
    in_flight = node.send(FETCH, 12, _fetch(0))
    assert in_flight.future is not None
    in_flight.future.cancel()  # what the connection does when its client goes
    _expire(node, MAX_WAIT_MS)
    assert in_flight.future.cancelled()
    assert node.broker.purgatories.timers[PurgatoryName.FETCH].size() == 0


async def test_what_a_parked_fetch_holds_has_no_instance_dict(node: Node) -> None:
    in_flight = node.send(FETCH, 12, _fetch(0))
    purgatory = node.broker.purgatories.fetch
    (operation,) = purgatory.delayed_operations()
    assert isinstance(operation, DelayedFetch)
    entry = operation._timer_task_entry
    ctx = in_flight.ctx
    assert ctx is not None
    held = [
        operation,
        operation._params,
        *operation._statuses,
        operation._respond,  # the handler's answer: no closure
        entry,
        ctx,
        ctx.timing,
    ]
    for obj in held:
        assert not hasattr(obj, "__dict__"), type(obj).__name__
    assert operation.watch_keys == ((TOPIC, 0),)
    _expire(node, MAX_WAIT_MS)
    assert in_flight.future is not None and in_flight.future.done()
    await asyncio.sleep(0)


async def test_a_topic_named_by_the_zero_id_is_unknown(node: Node) -> None:
    """Fetch v13+ names topics by id; the all-zero id names none (Kafka: UNKNOWN_TOPIC_ID)."""
    b = request_builder(FETCH, 13)
    fields = fetch_fields(TOPIC, 0, MAX_WAIT_MS, version=12)  # topics replaced below
    fields["topics"] = (
        b.FetchTopic(
            topic_id=uuid.UUID(int=0),
            partitions=(
                b.FetchPartition(
                    partition=0,
                    current_leader_epoch=-1,
                    fetch_offset=0,
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=1 << 20,
                ),
            ),
        ),
    )
    (topic,) = node.answer(node.send(FETCH, 13, b.FetchRequest(**fields))).responses
    assert [p.error_code for p in topic.partitions] == [ErrorCode.unknown_topic_id]
