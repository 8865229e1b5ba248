"""Version-agnostic builders: one handler body for every version of an API."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest

from protocol import (
    KIO_VERSIONS,
    ErrorCode,
    FrameDecoder,
    UnsupportedApiKey,
    UnsupportedVersion,
    decode_response,
    encode_response,
    request_builder,
    response_builder,
)

TOPIC_ID = uuid.UUID(int=0x1234)


def _produce_response(api_version: int) -> Any:
    """What a Produce handler writes: the newest shape, once, for every version."""
    b = response_builder(0, api_version)
    partition = b.PartitionProduceResponse(
        index=2,
        error_code=0,
        base_offset=41,
        log_append_time=-1,
        log_start_offset=0,
        record_errors=(),
        error_message=None,
        current_leader=None,  # tagged in v10+: None means "not sent"
        no_such_field=1,  # not in any version: dropped
    )
    return b.ProduceResponse(
        responses=(
            # v13 names topics by id (KIP-516), earlier versions by name: pass both.
            b.TopicProduceResponse(name="t", topic_id=TOPIC_ID, partition_responses=(partition,)),
        ),
        throttle_time=5,
    )


@pytest.mark.parametrize("api_version", range(KIO_VERSIONS[0].min_version, 14))
def test_one_body_fits_every_produce_version(api_version: int) -> None:
    payload = _produce_response(api_version)
    assert type(payload).__version__ == api_version
    (frame,) = FrameDecoder().feed(encode_response(0, api_version, 3, payload))
    _, decoded = decode_response(0, api_version, frame)
    (topic,) = decoded.responses  # type: ignore[union-attr]
    (partition,) = topic.partition_responses
    assert (partition.index, partition.base_offset) == (2, 41)
    assert partition.error_code is ErrorCode.none
    assert decoded.throttle_time == datetime.timedelta(milliseconds=5)  # type: ignore[union-attr]


def test_fields_the_version_lacks_are_dropped() -> None:
    b = response_builder(0, 3)  # Produce v3: no log_start_offset (v5), record_errors (v8)
    partition = b.PartitionProduceResponse(
        index=0, error_code=0, base_offset=1, log_append_time=-1, log_start_offset=7
    )
    names = {f.name for f in dataclasses.fields(partition)}
    assert "log_start_offset" not in names
    assert "record_errors" not in names


def test_missing_fields_take_schema_defaults() -> None:
    b = response_builder(0, 9)
    partition = b.PartitionProduceResponse(index=0, error_code=0, base_offset=1, record_errors=())
    assert partition.log_start_offset == -1  # Kafka's default in ProduceResponse.json
    assert partition.log_append_time is None
    assert partition.error_message is None


def test_none_for_a_tagged_field_means_absent() -> None:
    b = response_builder(0, 10)
    partition = b.PartitionProduceResponse(
        index=0, error_code=0, base_offset=1, record_errors=(), current_leader=None
    )
    assert partition.current_leader == b.LeaderIdAndEpoch()  # the schema default
    leader = b.LeaderIdAndEpoch(leader_id=3, leader_epoch=9)
    partition = b.PartitionProduceResponse(
        index=0, error_code=0, base_offset=1, record_errors=(), current_leader=leader
    )
    assert partition.current_leader is leader


def test_missing_required_field_names_class_and_field() -> None:
    b = response_builder(0, 9)
    with pytest.raises(TypeError, match=r"PartitionProduceResponse.*base_offset"):
        b.PartitionProduceResponse(index=0, error_code=0, record_errors=())


def test_ints_are_converted_to_kio_types() -> None:
    b = response_builder(0, 9)
    partition = b.PartitionProduceResponse(
        index=0, error_code=6, base_offset=1, record_errors=(), log_append_time=1_000
    )
    assert partition.error_code is ErrorCode.not_leader_or_follower
    assert partition.log_append_time == datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.UTC)
    response = b.ProduceResponse(responses=(), throttle_time=250)
    assert response.throttle_time == datetime.timedelta(milliseconds=250)
    fetch = request_builder(1, 12).FetchRequest(
        max_wait=500, min_bytes=1, topics=(), forgotten_topics_data=()
    )
    assert fetch.max_wait == datetime.timedelta(milliseconds=500)


def test_typed_values_pass_through_unchanged() -> None:
    b = response_builder(0, 9)
    delay = datetime.timedelta(milliseconds=3)
    response = b.ProduceResponse(responses=(), throttle_time=delay)
    assert response.throttle_time is delay
    partition = b.PartitionProduceResponse(
        index=0, error_code=ErrorCode.none, base_offset=1, record_errors=()
    )
    assert partition.error_code is ErrorCode.none


def test_builders_and_factories_are_cached() -> None:
    assert response_builder(0, 9) is response_builder(0, 9)
    assert request_builder(0, 9) is request_builder(0, 9)
    assert response_builder(0, 9) is not request_builder(0, 9)
    b = response_builder(0, 9)
    assert b.ProduceResponse is b.ProduceResponse


def test_request_builder_builds_requests() -> None:
    b = request_builder(3, 12)
    assert b.payload_class.__name__ == "MetadataRequest"
    request = b.MetadataRequest(
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
        include_cluster_authorized_operations=True,  # gone since v11: dropped
    )
    assert request.topics is None
    assert "MetadataRequestTopic" in b.class_names


def test_unknown_class_name() -> None:
    with pytest.raises(AttributeError, match="PartitionProduceResponse"):
        response_builder(0, 9).NoSuchThing  # noqa: B018


def test_unsupported_api_or_version() -> None:
    with pytest.raises(UnsupportedVersion):
        response_builder(0, 2)
    with pytest.raises(UnsupportedApiKey):
        request_builder(9999, 0)
