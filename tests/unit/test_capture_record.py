"""The capture record: JSON round trip, base64 request bytes, discriminator, validation."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from protocol.capture import (
    CAPTURE_FORMAT_VERSION,
    DELAYED_OPERATION_KINDS,
    PURGATORY_OF_KIND,
    CaptureFileHeader,
    DelayedOperationEvent,
    kafka_connection_id,
    parse_file_record,
)
from tests.helpers.captures import make_event, make_request


def test_request_round_trips_through_json_with_arbitrary_bytes() -> None:
    record = make_request()
    line = record.model_dump_json()
    assert parse_file_record(line) == record


def test_request_bytes_are_standard_base64_in_json() -> None:
    # Standard alphabet ("+/") with padding, so jq's @base64d and Spark's unbase64 read it.
    doc = json.loads(make_request(request=b"\xfb\xff").model_dump_json())
    assert doc["request"] == "+/8="


def test_discriminator_picks_the_record_type() -> None:
    event = make_event()
    header = CaptureFileHeader(broker_id=2, created_unix_us=1, file_index=0)
    assert isinstance(parse_file_record(event.model_dump_json()), DelayedOperationEvent)
    parsed_header = parse_file_record(header.model_dump_json())
    assert isinstance(parsed_header, CaptureFileHeader)
    assert parsed_header.format_version == CAPTURE_FORMAT_VERSION
    with pytest.raises(ValidationError):
        parse_file_record('{"type": "nonsense", "broker_id": 1}')


def test_purgatory_names_are_kafkas() -> None:
    with pytest.raises(ValidationError):
        make_request(purgatory="DelayedProduce")  # a kind, not a purgatory name
    with pytest.raises(ValidationError):
        make_request(purgatory_outcome="timeout")
    assert make_request(purgatory=None, purgatory_outcome=None).purgatory is None


def test_every_delayed_operation_kind_has_a_purgatory() -> None:
    assert set(PURGATORY_OF_KIND) == set(DELAYED_OPERATION_KINDS)
    assert PURGATORY_OF_KIND["DelayedJoin"] == PURGATORY_OF_KIND["DelayedSync"] == "Rebalance"
    with pytest.raises(ValidationError):
        make_event(kind="DelayedRebalance")


def test_reader_ignores_fields_added_by_a_newer_writer() -> None:
    doc = json.loads(make_request().model_dump_json())
    doc["some_future_field"] = 1
    assert parse_file_record(json.dumps(doc)) == make_request()


def test_bad_base64_is_rejected() -> None:
    doc = json.loads(make_request().model_dump_json())
    doc["request"] = "not base64!"
    with pytest.raises(ValidationError):
        parse_file_record(json.dumps(doc))


def test_records_are_immutable() -> None:
    record = make_request()
    with pytest.raises(ValidationError):
        record.sequence = 5  # type: ignore[misc]


def test_kafka_connection_id_format() -> None:
    assert (
        kafka_connection_id("127.0.0.1", 9092, "10.1.2.3", 51234, 3)
        == "127.0.0.1:9092-10.1.2.3:51234-3"
    )
