"""Kafka 4.4's decoder limits: an array of more than 1,000,000 elements and a tagged-field
section of more than 10,000 fields are refused before kio allocates anything, even when
the frame does hold that many bytes; at the limit, a body still decodes. A refused
request is malformed: the dispatcher closes the connection, as Kafka does.
"""

from __future__ import annotations

import pytest

from broker.server.dispatch import CloseConnection
from protocol.api_registry import request_class
from protocol.body_guards import MAX_ARRAY_ELEMENTS, MAX_TAGGED_FIELDS, check_body
from protocol.codec import decode_request, parse_request_header
from protocol.errors import MalformedRequest
from protocol.varint import uvarint
from tests.helpers.dispatch_node import Node, dispatch_node

LIST_CONFIG_RESOURCES = 74
TOPIC = 2


def resource_types_body(count: int, claimed: int | None = None) -> bytes:
    """ListConfigResources v1: ``count`` int8 resource types under a compact count of
    ``claimed`` (default ``count``), then an empty tagged-field section."""
    claimed = count if claimed is None else claimed
    return uvarint(claimed + 1) + bytes([TOPIC]) * count + b"\x00"


def tagged_body(fields: int) -> bytes:
    """ListConfigResources v1 with no resource types and ``fields`` empty tagged fields
    of unknown tags."""
    tags = b"".join(uvarint(100 + i) + b"\x00" for i in range(fields))
    return b"\x01" + uvarint(fields) + tags


def frame(body: bytes, header_tags: bytes = b"\x00") -> bytes:
    """Header v2 of ListConfigResources v1 (no client id), then ``body``."""
    return (
        LIST_CONFIG_RESOURCES.to_bytes(2, "big")
        + (1).to_bytes(2, "big")
        + (7).to_bytes(4, "big")
        + b"\xff\xff"
        + header_tags
        + body
    )


CLS = request_class(LIST_CONFIG_RESOURCES, 1)


def test_an_array_at_the_limit_decodes() -> None:
    header, offset = parse_request_header(frame(resource_types_body(MAX_ARRAY_ELEMENTS)))
    request = decode_request(header, frame(resource_types_body(MAX_ARRAY_ELEMENTS)), offset)
    assert len(request.resource_types) == MAX_ARRAY_ELEMENTS


def test_an_array_over_the_limit_is_refused_though_the_bytes_are_there() -> None:
    body = resource_types_body(MAX_ARRAY_ELEMENTS + 1)
    assert check_body(CLS, body, 0) == (
        "array ListConfigResourcesRequest.resource_types of 1000001 elements "
        "is over the limit of 1000000"
    )


@pytest.mark.parametrize("claimed", [2**31 - 1, 2**32 - 2])
def test_a_count_of_billions_in_a_few_bytes_is_refused_by_the_limit(claimed: int) -> None:
    problem = check_body(CLS, resource_types_body(0, claimed), 0)
    assert problem is not None and "over the limit of 1000000" in problem


def test_tagged_fields_at_the_limit_pass_and_over_it_are_refused() -> None:
    assert check_body(CLS, tagged_body(MAX_TAGGED_FIELDS), 0) is None
    assert check_body(CLS, tagged_body(MAX_TAGGED_FIELDS + 1), 0) == (
        "10001 tagged fields in a struct are over the limit of 10000"
    )


def test_a_header_with_too_many_tagged_fields_is_malformed() -> None:
    tags = uvarint(MAX_TAGGED_FIELDS + 1) + b"".join(
        uvarint(i) + b"\x00" for i in range(MAX_TAGGED_FIELDS + 1)
    )
    with pytest.raises(MalformedRequest, match="in the header are over the limit"):
        parse_request_header(frame(resource_types_body(0), header_tags=tags))


@pytest.fixture
def node() -> Node:
    return dispatch_node()


async def test_the_dispatcher_closes_the_connection_on_a_body_over_the_limit(
    node: Node,
) -> None:
    with pytest.raises(CloseConnection):
        node.dispatcher.dispatch(frame(resource_types_body(0, 2**31 - 1)), 0, node.connection)
