"""The share coordinator's records (ShareSnapshot, ShareUpdate) and how they add up:
Kafka's bytes round-trip, later batches win where they overlap, nothing below the start
offset is kept, and bytes that do not decode are a RecordFormatError."""

from __future__ import annotations

import uuid

import pytest

from broker.share_coordinator.share_state_records import (
    PersisterStateBatch as B,
)
from broker.share_coordinator.share_state_records import (
    RecordFormatError,
    ShareGroupOffset,
    SharePartitionKey,
    ShareUpdate,
    StateSummary,
    apply_update,
    combine_state_batches,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    encode_update,
    summary_of,
)

KEY = SharePartitionKey("g", uuid.UUID(int=7), 3)
AVAILABLE, ACKED, ARCHIVED = 0, 2, 4


def test_keys_round_trip_with_their_record_type_as_version() -> None:
    snapshot, update = encode_key(KEY, update=False), encode_key(KEY, update=True)
    assert snapshot[:2] == b"\x00\x00" and update[:2] == b"\x00\x01"
    assert decode_key(snapshot) == (KEY, False)
    assert decode_key(update) == (KEY, True)
    assert KEY.coordinator_key == f"g:{uuid.UUID(int=7)}:3"


def test_values_round_trip() -> None:
    snapshot = ShareGroupOffset(3, 1, 4, 10, (B(10, 12, ACKED, 1), B(13, 13, AVAILABLE, 2)))
    assert decode_snapshot(encode_snapshot(snapshot)) == snapshot
    update = ShareUpdate(3, -1, -1, (B(14, 20, ARCHIVED, 5),))
    assert decode_update(encode_update(update)) == update


def test_bytes_that_do_not_decode_are_refused() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00\x07\x00\x01g")
    with pytest.raises(RecordFormatError):
        decode_snapshot(b"\x00\x00\x00")
    # a batch count larger than the bytes left
    head = encode_update(ShareUpdate(0, 0, 0, ()))[:-2]
    with pytest.raises(RecordFormatError):
        decode_update(head + b"\x7f\x00")


def test_later_batches_win_where_they_overlap_and_neighbours_merge() -> None:
    current = (B(0, 9, AVAILABLE, 1),)
    combined = combine_state_batches(current, (B(3, 5, ACKED, 1),), 0)
    assert combined == (B(0, 2, AVAILABLE, 1), B(3, 5, ACKED, 1), B(6, 9, AVAILABLE, 1))
    again = combine_state_batches(combined, (B(3, 5, AVAILABLE, 1),), 0)
    assert again == (B(0, 9, AVAILABLE, 1),)


def test_nothing_below_the_start_offset_is_kept() -> None:
    combined = combine_state_batches((B(0, 4, ACKED, 1), B(5, 9, AVAILABLE, 2)), (), 7)
    assert combined == (B(7, 9, AVAILABLE, 2),)


def test_an_update_moves_what_it_names_only() -> None:
    state = ShareGroupOffset(0, 1, 2, 0, (B(0, 4, AVAILABLE, 1),))
    moved = apply_update(state, ShareUpdate(0, -1, 2, (B(2, 2, ARCHIVED, 1),)))
    assert moved == ShareGroupOffset(0, 1, 2, 2, (B(2, 2, ARCHIVED, 1), B(3, 4, AVAILABLE, 1)))
    assert apply_update(moved, ShareUpdate(0, 5, -1, ())).leader_epoch == 5


def test_a_summary_counts_the_done_offsets_past_the_start_offset() -> None:
    """Kafka 4.2's DeliveryCompleteCount: ACKNOWLEDGED and ARCHIVED offsets at or past
    the start offset (what DescribeShareGroupOffsets' lag subtracts); none without state."""
    batches = (B(3, 5, ACKED, 1), B(6, 6, AVAILABLE, 2), B(7, 8, ARCHIVED, 5), B(9, 9, 1, 1))
    summary = summary_of(ShareGroupOffset(0, 1, 2, 4, batches))
    assert summary == StateSummary(0, 1, 2, 4, (), 4)  # 4-5 and 7-8; 3 is below the start
    assert summary_of(ShareGroupOffset(0, 0, -1, -1, ())).delivery_complete_count == -1
