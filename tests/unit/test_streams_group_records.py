"""Streams group records (KIP-1071) in ``__consumer_offsets``: golden bytes per record
type (``tests/data/streams_group_records.json``), round trips, and two values checked
byte by byte against Kafka 4.2's schemas (so the golden file is not just what our code
wrote)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from broker.group.streams.streams_group_records import (
    decode_streams_group_record,
    encode_streams_group_record,
    is_streams_group_key,
)
from tests.unit.streams_group_record_cases import CASES

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "streams_group_records.json"


def _golden() -> dict[str, list[str | None]]:
    data: dict[str, list[str | None]] = json.loads(GOLDEN.read_text())
    return data


def test_every_case_has_golden_bytes() -> None:
    assert set(_golden()) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_encodes_to_the_golden_bytes_and_back(name: str) -> None:
    key, value = encode_streams_group_record(CASES[name])
    assert [key.hex(), None if value is None else value.hex()] == _golden()[name]
    assert is_streams_group_key(key)
    assert decode_streams_group_record(key, value) == CASES[name]


def _compact(text: str) -> bytes:
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def test_the_metadata_value_is_kafkas_with_its_tagged_fields() -> None:
    # StreamsGroupMetadataValue v0: Epoch int32, MetadataHash int64, then the tagged
    # fields: ValidatedTopologyEpoch (tag 0, int32) and LastAssignmentConfigs (tag 1).
    _, value = encode_streams_group_record(CASES["metadata_validated"])
    configs = bytes([2]) + _compact("num.standby.replicas") + _compact("1") + b"\x00"
    expected = (
        struct.pack(">hiq", 0, 7, -1234567890123)
        + bytes([2])  # two tagged fields
        + bytes([0, 4])
        + struct.pack(">i", 1)
        + bytes([1, len(configs)])
        + configs
    )
    assert value == expected
    _, bare = encode_streams_group_record(CASES["metadata_not_validated"])
    # -1 is the tagged field's default: not written; an empty config list is
    assert bare == struct.pack(">hiq", 0, 7, -1234567890123) + bytes([1, 1, 1, 1])


def test_a_member_without_endpoint_writes_kafkas_null_struct_marker() -> None:
    key, value = encode_streams_group_record(CASES["member_metadata_no_endpoint"])
    assert key == struct.pack(">hh", 19, 3) + b"app" + struct.pack(">h", 2) + b"m2"
    expected = (
        struct.pack(">h", 0)
        + b"\x00\x00"  # InstanceId, RackId: null
        + b"\x01\x01"  # ClientId, ClientHost: ""
        + struct.pack(">ii", -1, -1)  # RebalanceTimeoutMs, TopologyEpoch
        + _compact("p")  # ProcessId
        + b"\xff"  # UserEndpoint: null (int8 -1)
        + b"\x01"  # ClientTags: []
        + b"\x00"  # no tagged fields
    )
    assert value == expected
