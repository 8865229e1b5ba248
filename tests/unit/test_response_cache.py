"""Cached ApiVersions and Metadata answers follow every change of the cluster.

The broker serves the same Metadata bytes while ``ClusterMetadata.version`` stays put;
these tests change the cluster each way a client could notice and ask again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.server.response_cache import ResponseCache
from protocol.builders import request_builder, response_builder
from protocol.codec import EncodedResponse, encode_response_body
from tests.helpers.dispatch_node import Node, dispatch_node

METADATA, API_VERSIONS = 3, 18
_NO_ID = uuid.UUID(int=0)


def _metadata(node: Node, *topics: str, auto_create: bool = False, all_topics: bool = False) -> Any:
    b = request_builder(METADATA, 12)
    request = b.MetadataRequest(
        topics=None
        if all_topics
        else tuple(b.MetadataRequestTopic(name=t, topic_id=_NO_ID) for t in topics),
        allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=False,
    )
    return node.answer(node.send(METADATA, 12, request))


def _node_with_topic() -> Node:
    node = dispatch_node()
    cluster = node.broker.services.metadata
    cluster.register_broker(1, "127.0.0.1", 9093)
    cluster.create_topic("orders", 1, 2, {})
    return node


def test_the_same_question_is_answered_from_one_encoding() -> None:
    node = _node_with_topic()
    request = request_builder(METADATA, 12).MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    first = node.send(METADATA, 12, request).response
    second = node.send(METADATA, 12, request).response
    assert isinstance(first, EncodedResponse)
    assert second is first


def test_a_new_leader_and_isr_are_answered_at_once() -> None:
    node = _node_with_topic()
    cluster = node.broker.services.metadata
    (before,) = _metadata(node, "orders").topics[0].partitions
    assert (before.leader_id, before.leader_epoch, before.isr_nodes) == (0, 0, (0, 1))
    cluster.change_partition("orders", 0, leader=1, isr=[1])
    (after,) = _metadata(node, "orders").topics[0].partitions
    assert (after.leader_id, after.leader_epoch, after.isr_nodes) == (1, 1, (1,))


def test_a_stopped_broker_leaves_the_broker_list() -> None:
    node = _node_with_topic()
    cluster = node.broker.services.metadata
    assert [b.node_id for b in _metadata(node, "orders").brokers] == [0, 1]
    cluster.mark_broker_stopped(1)
    assert [b.node_id for b in _metadata(node, "orders").brokers] == [0]


def test_created_and_deleted_topics_are_seen_by_the_next_request() -> None:
    node = _node_with_topic()
    cluster = node.broker.services.metadata
    assert [t.name for t in _metadata(node, all_topics=True).topics] == ["orders"]
    cluster.create_topic("payments", 2, 1, {})
    assert sorted(t.name for t in _metadata(node, all_topics=True).topics) == [
        "orders",
        "payments",
    ]
    cluster.delete_topic("orders")
    (gone,) = _metadata(node, "orders").topics
    assert gone.error_code == ErrorCode.unknown_topic_or_partition


def test_a_topic_created_by_the_request_itself_is_in_its_answer_and_the_next() -> None:
    node = _node_with_topic()
    (unknown,) = _metadata(node, "fresh").topics
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    (created,) = _metadata(node, "fresh", auto_create=True).topics
    assert created.error_code == ErrorCode.none and created.partitions
    (again,) = _metadata(node, "fresh").topics  # auto-create off: the topic exists now
    assert again.error_code == ErrorCode.none


def test_a_new_controller_is_answered() -> None:
    node = _node_with_topic()
    assert _metadata(node, "orders").controller_id == 0
    node.broker.services.metadata.controller_id = 1
    assert _metadata(node, "orders").controller_id == 1


def test_api_versions_is_encoded_once_per_version() -> None:
    node = dispatch_node()
    b = request_builder(API_VERSIONS, 3)
    request = b.ApiVersionsRequest(client_software_name="t", client_software_version="1")
    first = node.send(API_VERSIONS, 3, request)
    assert node.send(API_VERSIONS, 3, request).response is first.response
    answer = node.answer(first)
    assert answer.error_code == ErrorCode.none
    assert any(k.api_key == METADATA for k in answer.api_keys)


_MUTATIONS: dict[str, Callable[[ClusterMetadata], object]] = {
    "register_broker": lambda c: c.register_broker(2, "127.0.0.1", 9094),
    "mark_broker_stopped": lambda c: c.mark_broker_stopped(1),
    "controller_id": lambda c: setattr(c, "controller_id", 1),
    "create_topic": lambda c: c.create_topic("t2", 1, 1, {}),
    "delete_topic": lambda c: c.delete_topic("t"),
    "create_partitions": lambda c: c.create_partitions("t", 3),
    "update_configs": lambda c: c.update_configs("t", {"retention.ms": "1"}),
    "replace_configs": lambda c: c.replace_configs("t", {}),
    "set_broker_configs": lambda c: c.set_broker_configs("", {"log.retention.ms": "1"}),
    "change_partition": lambda c: c.change_partition("t", 0, isr=[0], notify=False),
    "partition_changed": lambda c: c.partition_changed("t"),
}


@pytest.mark.parametrize("mutation", sorted(_MUTATIONS))
def test_every_change_of_the_cluster_moves_its_version(mutation: str) -> None:
    cluster = ClusterMetadata()
    cluster.register_broker(0, "127.0.0.1", 9092)
    cluster.register_broker(1, "127.0.0.1", 9093)
    cluster.create_topic("t", 1, 2, {})
    before = cluster.version
    _MUTATIONS[mutation](cluster)
    assert cluster.version > before


def test_an_answer_built_while_the_cluster_changed_is_not_kept() -> None:
    cluster = ClusterMetadata()
    cache = ResponseCache(cluster)
    b = response_builder(API_VERSIONS, 3)
    answer = encode_response_body(
        API_VERSIONS, 3, b.ApiVersionsResponse(error_code=0, api_keys=(), throttle_time=0)
    )
    built_at = cluster.version
    cluster.register_broker(0, "127.0.0.1", 9092)
    cache.put("k", answer, built_at)
    assert cache.get("k") is None
    cache.put("k", answer, cluster.version)
    assert cache.get("k") is answer


def test_the_cache_starts_over_rather_than_grow() -> None:
    cluster = ClusterMetadata()
    cache = ResponseCache(cluster, max_entries=4)
    b = response_builder(API_VERSIONS, 3)
    answer = encode_response_body(
        API_VERSIONS, 3, b.ApiVersionsResponse(error_code=0, api_keys=(), throttle_time=0)
    )
    for key in range(10):
        cache.put(key, answer, cluster.version)
        assert len(cache) <= 4
