"""The all-or-nothing check a ShareFetch/ShareAcknowledge's acknowledgement batches pass
before any share partition state changes (``SharePartition.acknowledge``), with Kafka's
errors. It reads the in-flight records and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kio.schema.errors import ErrorCode

from broker.share.in_flight_state import (
    AcknowledgementBatch,
    AcknowledgeType,
    InFlightRecord,
    RecordState,
)

__all__ = ["check_acknowledgements"]


def check_acknowledgements(
    in_flight: Mapping[int, InFlightRecord],
    start_offset: int,
    end_offset: int,
    member_id: str,
    batches: Iterable[AcknowledgementBatch],
    allow_renew: bool,
) -> tuple[ErrorCode, str | None] | None:
    """None when every batch may be applied; else Kafka's error and message: INVALID_REQUEST
    for a malformed batch or one past the acquired offsets, INVALID_RECORD_STATE for offsets
    not in flight, not ACQUIRED (an acknowledgement whose state write is out included) or
    acquired by another member."""
    highest = AcknowledgeType.RENEW if allow_renew else AcknowledgeType.REJECT
    for batch in batches:
        first, last, types = batch.first_offset, batch.last_offset, batch.acknowledge_types
        if first < 0 or last < first:
            return ErrorCode.invalid_request, "Invalid acknowledgement batch offsets"
        if len(types) != 1 and len(types) != last - first + 1:
            return ErrorCode.invalid_request, "Invalid acknowledge types for the batch"
        if any(t < 0 or t > highest for t in types):
            return ErrorCode.invalid_request, f"Invalid acknowledge type: {list(types)}"
        if first < start_offset or first >= end_offset:
            if first >= end_offset and end_offset > start_offset:
                return (
                    ErrorCode.invalid_request,
                    "Batch record not found. The first offset in request is past acquired records.",
                )
            return (
                ErrorCode.invalid_record_state,
                "Batch record not found. The request batch offsets are not found in the cache.",
            )
        if last >= end_offset:
            return (
                ErrorCode.invalid_request,
                "Batch record not found. The last offset in request is past acquired records.",
            )
        for offset in range(first, last + 1):
            record = in_flight.get(offset)
            if record is None or record.state is not RecordState.ACQUIRED:
                return (
                    ErrorCode.invalid_record_state,
                    "The batch cannot be acknowledged. The batch is not in the acquired state.",
                )
            if record.member_id != member_id:
                return ErrorCode.invalid_record_state, "Member is not the owner of offset"
    return None
