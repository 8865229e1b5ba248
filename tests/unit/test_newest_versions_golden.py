"""Golden bytes of the by-topic-id versions, assembled by hand from Kafka's message
definitions (``OffsetCommitRequest.json`` v10, ``OffsetFetchResponse.json`` v10,
``ProduceResponse.json`` v13, ``ListConfigResourcesRequest.json`` v1), so that what
the raw client sends and the broker answers is Kafka's wire format, not only kio's
round trip: the id replaces the name (16 bytes, no length), every struct ends with an
empty tagged-field section.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from protocol.builders import request_builder, response_builder
from protocol.codec import decode_request, parse_request_header
from protocol.fast_writers import encode

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
ID_BYTES = bytes.fromhex("00112233445566778899aabbccddeeff")
NO_TAGS = b"\x00"


def test_offset_commit_v10_request() -> None:
    b = request_builder(8, 10)
    body = b.OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=5,
        member_id="m",
        group_instance_id=None,
        topics=(
            b.OffsetCommitRequestTopic(
                topic_id=TOPIC_ID,
                partitions=(
                    b.OffsetCommitRequestPartition(
                        partition_index=1,
                        committed_offset=42,
                        committed_leader_epoch=3,
                        committed_metadata=None,
                    ),
                ),
            ),
        ),
    )
    golden = (
        b"\x02g"  # GroupId: compact string "g"
        + (5).to_bytes(4, "big")  # GenerationIdOrMemberEpoch
        + b"\x02m"  # MemberId
        + b"\x00"  # GroupInstanceId: null
        + b"\x02"  # Topics: 1
        + ID_BYTES  # TopicId (v10+; Name is 0-9)
        + b"\x02"  # Partitions: 1
        + (1).to_bytes(4, "big")  # PartitionIndex
        + (42).to_bytes(8, "big")  # CommittedOffset
        + (3).to_bytes(4, "big")  # CommittedLeaderEpoch
        + b"\x00"  # CommittedMetadata: null
        + NO_TAGS  # partition
        + NO_TAGS  # topic
        + NO_TAGS  # request
    )
    assert encode(body) == golden
    frame = (8).to_bytes(2, "big") + (10).to_bytes(2, "big") + (9).to_bytes(4, "big")
    frame += b"\xff\xff" + NO_TAGS + golden  # header v2: no client id, no tags
    header, offset = parse_request_header(frame)
    assert decode_request(header, frame, offset) == body


def test_offset_fetch_v10_response() -> None:
    b = response_builder(9, 10)
    body = b.OffsetFetchResponse(
        throttle_time=0,
        groups=(
            b.OffsetFetchResponseGroup(
                group_id="g",
                topics=(
                    b.OffsetFetchResponseTopics(
                        topic_id=TOPIC_ID,
                        partitions=(
                            b.OffsetFetchResponsePartitions(
                                partition_index=0,
                                committed_offset=-1,
                                committed_leader_epoch=-1,
                                metadata="",
                                error_code=ErrorCode.unknown_topic_id,
                            ),
                        ),
                    ),
                ),
                error_code=ErrorCode.none,
            ),
        ),
    )
    golden = (
        (0).to_bytes(4, "big")  # ThrottleTimeMs
        + b"\x02"  # Groups: 1
        + b"\x02g"  # GroupId
        + b"\x02"  # Topics: 1
        + ID_BYTES  # TopicId
        + b"\x02"  # Partitions: 1
        + (0).to_bytes(4, "big")  # PartitionIndex
        + (-1).to_bytes(8, "big", signed=True)  # CommittedOffset
        + (-1).to_bytes(4, "big", signed=True)  # CommittedLeaderEpoch
        + b"\x01"  # Metadata: ""
        + (100).to_bytes(2, "big")  # ErrorCode: UNKNOWN_TOPIC_ID
        + NO_TAGS
        + NO_TAGS
        + (0).to_bytes(2, "big")  # group ErrorCode
        + NO_TAGS
        + NO_TAGS
    )
    assert encode(body) == golden


def test_produce_v13_response() -> None:
    b = response_builder(0, 13)
    body = b.ProduceResponse(
        responses=(
            b.TopicProduceResponse(
                topic_id=TOPIC_ID,
                partition_responses=(
                    b.PartitionProduceResponse(
                        index=2,
                        error_code=ErrorCode.none,
                        base_offset=7,
                        log_append_time=None,
                        log_start_offset=0,
                        record_errors=(),
                        error_message=None,
                    ),
                ),
            ),
        ),
        throttle_time=0,
    )
    golden = (
        b"\x02"  # Responses: 1
        + ID_BYTES  # TopicId (v13+; Name is 0-12)
        + b"\x02"  # PartitionResponses: 1
        + (2).to_bytes(4, "big")  # Index
        + (0).to_bytes(2, "big")  # ErrorCode
        + (7).to_bytes(8, "big")  # BaseOffset
        + (-1).to_bytes(8, "big", signed=True)  # LogAppendTimeMs
        + (0).to_bytes(8, "big")  # LogStartOffset
        + b"\x01"  # RecordErrors: 0
        + b"\x00"  # ErrorMessage: null
        + NO_TAGS  # partition (CurrentLeader left out: default)
        + NO_TAGS  # topic
        + (0).to_bytes(4, "big")  # ThrottleTimeMs
        + NO_TAGS  # response (NodeEndpoints left out: empty)
    )
    assert encode(body) == golden


def test_list_config_resources_v1_request() -> None:
    body = request_builder(74, 1).ListConfigResourcesRequest(resource_types=(2, 32))
    assert encode(body) == b"\x03\x02\x20" + NO_TAGS  # ResourceTypes: [2, 32]
