"""The dispatcher's request path without a socket: exception policy, faults, latency.

A broker is built by the composition root's ``build_broker`` on a manual clock, and its
dispatcher is fed frames from the project's sans-IO client; what it answers goes back
through that client, so both sides of the wire format are the real ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers.base import ApiHandler
from broker.handlers.registry import build_registry
from broker.server.context import RequestContext
from broker.server.dispatch import CloseConnection
from protocol.builders import request_builder
from protocol.codec import EncodedResponse
from tests.helpers.dispatch_node import Node, dispatch_node

METADATA, API_VERSIONS, PRODUCE = 3, 18, 0


def _failing(handler: ApiHandler) -> ApiHandler:
    def handle(ctx: RequestContext, request: Any) -> Any:
        raise RuntimeError("a bug in the handler")

    return dataclasses.replace(handler, handle=handle)


def _parked_failing(handler: ApiHandler) -> ApiHandler:
    def handle(ctx: RequestContext, request: Any) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_exception(RuntimeError("a bug in a delayed operation"))
        return future

    return dataclasses.replace(handler, handle=handle)


@pytest.fixture
async def node() -> AsyncIterator[Node]:
    yield dispatch_node()


def _metadata_request(topic: str = "orders") -> Any:
    b = request_builder(METADATA, 9)
    return b.MetadataRequest(
        topics=(b.MetadataRequestTopic(name=topic),),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def _api_versions_request() -> Any:
    b = request_builder(API_VERSIONS, 3)
    return b.ApiVersionsRequest(client_software_name="t", client_software_version="1")


async def test_a_handler_that_raises_answers_unknown_server_error_and_keeps_the_connection() -> (
    None
):
    registry = build_registry()
    registry[METADATA] = _failing(registry[METADATA])
    node = dispatch_node(registry)
    response = node.answer(node.send(METADATA, 9, _metadata_request()))
    (topic,) = response.topics
    assert topic.error_code == ErrorCode.unknown_server_error
    assert node.closed == []
    # The same connection goes on: the next request is answered as usual.
    versions = node.answer(node.send(API_VERSIONS, 3, _api_versions_request()))
    assert versions.error_code == ErrorCode.none


async def test_a_parked_operation_that_fails_answers_unknown_server_error() -> None:
    registry = build_registry()
    registry[METADATA] = _parked_failing(registry[METADATA])
    node = dispatch_node(registry)
    in_flight = node.send(METADATA, 9, _metadata_request())
    assert in_flight.future is not None and not in_flight.ready
    response = node.answer(in_flight)
    assert response.topics[0].error_code == ErrorCode.unknown_server_error
    assert node.closed == []


async def test_an_injected_fault_answers_with_the_apis_own_error_response(node: Node) -> None:
    node.faults.add_failure(0, "Metadata", "NOT_LEADER_OR_FOLLOWER", 1)
    failed = node.answer(node.send(METADATA, 9, _metadata_request()))
    assert failed.topics[0].error_code == ErrorCode.not_leader_or_follower
    again = node.answer(node.send(METADATA, 9, _metadata_request()))
    assert again.topics[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_injected_latency_is_a_future_completed_by_the_scheduler_timer(node: Node) -> None:
    node.faults.set_latency(0, 50)
    in_flight = node.send(API_VERSIONS, 3, _api_versions_request())
    assert in_flight.future is not None and not in_flight.future.done()
    timer = node.broker.purgatories.scheduler_timer
    node.clock.advance(50)
    timer.advance_clock()
    assert not in_flight.future.done()
    node.clock.advance(1)
    timer.advance_clock()
    assert in_flight.future.done()
    assert node.answer(in_flight).error_code == ErrorCode.none


async def test_what_kafka_closes_on_is_a_close_and_nothing_runs(node: Node) -> None:
    unknown = bytearray(node.client.send(API_VERSIONS, 3, _api_versions_request()).data[4:])
    unknown[0:2] = (999).to_bytes(2, "big")
    with pytest.raises(CloseConnection, match="unknown API key 999"):
        node.dispatcher.dispatch(bytes(unknown), 0, node.connection)
    with pytest.raises(CloseConnection, match="malformed request header"):
        node.dispatcher.dispatch(b"\x00\x03", 0, node.connection)


async def test_an_unsupported_api_versions_version_gets_kafkas_v0_answer(node: Node) -> None:
    frame = bytearray(node.client.send(API_VERSIONS, 3, _api_versions_request()).data[4:])
    frame[2:4] = (99).to_bytes(2, "big")
    in_flight = node.dispatcher.dispatch(bytes(frame), 0, node.connection)
    assert in_flight.raw is not None and in_flight.ctx is None
    assert node.dispatcher.encode(in_flight) == in_flight.raw


async def test_a_response_that_cannot_be_encoded_answers_unknown_server_error(
    node: Node,
) -> None:
    in_flight = node.send(METADATA, 9, _metadata_request())
    response = in_flight.response
    if isinstance(response, EncodedResponse):  # served from the response cache
        response = response.payload
    broken_topic = dataclasses.replace(response.topics[0], name=None)  # v9: not nullable
    in_flight.response = dataclasses.replace(response, topics=(broken_topic,))
    answer = node.answer(in_flight)
    assert answer.topics[0].error_code == ErrorCode.unknown_server_error
