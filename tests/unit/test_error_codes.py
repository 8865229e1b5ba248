"""The error-code extractor the capture and the replay share."""

from __future__ import annotations

from protocol.builders import response_builder
from protocol.error_codes import error_codes, error_codes_walker


def test_produce_response_codes_in_schema_order() -> None:
    b = response_builder(0, 9)
    partition = b.PartitionProduceResponse
    response = b.ProduceResponse(
        responses=(
            b.TopicProduceResponse(
                name="t",
                partition_responses=(
                    partition(
                        index=0,
                        error_code=0,
                        base_offset=0,
                        log_append_time=None,
                        log_start_offset=0,
                        record_errors=(),
                        error_message=None,
                    ),
                    partition(
                        index=1,
                        error_code=6,
                        base_offset=-1,
                        log_append_time=None,
                        log_start_offset=-1,
                        record_errors=(),
                        error_message=None,
                    ),
                ),
            ),
        ),
        throttle_time=0,
    )
    assert error_codes(response) == [0, 6]


def test_top_level_code_comes_first_and_codes_are_plain_ints() -> None:
    b = response_builder(12, 4)
    codes = error_codes(b.HeartbeatResponse(throttle_time=0, error_code=27))
    assert codes == [27] and type(codes[0]) is int


def test_none_and_classes_without_codes() -> None:
    assert error_codes(None) == []
    b = response_builder(3, 4)  # Metadata v4: codes only in topics and partitions
    response = b.MetadataResponse(
        throttle_time=0, brokers=(), cluster_id=None, controller_id=0, topics=()
    )
    assert error_codes(response) == []
    assert error_codes_walker(type(response)) is not None
