"""Produce-time record timestamp bounds (KIP-937): Kafka's LogValidator.validateTimestamp.

With ``message.timestamp.type=CreateTime``, a produced record whose timestamp is more
than ``message.timestamp.before.max.ms`` before the broker's now, or more than
``message.timestamp.after.max.ms`` after it, is refused: the partition is answered
INVALID_TIMESTAMP with Kafka's error message ("One or more records have been rejected
due to invalid timestamp") and ``record_errors`` naming each such record of the first
batch that has one (its index in the batch, Kafka's text), and nothing of the request's
records for that partition is appended. Records without a timestamp (-1) pass;
LogAppendTime topics are not checked, as in Kafka (the broker stamps their batches).
Topic configs override the broker's ``log.message.timestamp.{before,after}.max.ms``;
Kafka 4's defaults are Long.MAX_VALUE before and 3600000 (one hour) after.

Now is the broker's wall clock (``ReplicaManager.wall_clock_ms``, the clock that stamps
LogAppendTime), as Kafka's ``time.milliseconds()``.

**What is checked, and what it costs.** Kafka walks every record of every batch. The
produce path here does not (``partition.py``: an uncompressed batch is not walked record
by record at all), so the check starts from what a batch's 61-byte header says: its
first record's timestamp (baseTimestamp) and its maxTimestamp. Not its minimum: a
producer may give each record any timestamp, so records after the first may be
earlier than it. Hence, per batch:

1. O(1): baseTimestamp and maxTimestamp against the bounds. When both are within them
   and ``before.max.ms`` is Long.MAX_VALUE (the default: nothing is too early short of
   timestamps some 292 million years before 1970), the batch passes without a walk --
   every record is at most maxTimestamp, so none is too late. This is the default
   configuration's whole cost.
2. Otherwise the records are walked, reading only each record's length and timestamp
   delta (``protocol.record_timestamps.records_outside_timestamps``): with a finite
   ``before.max.ms`` (the minimum is only in the records; a compressed batch is then
   inflated a second time, after the framing check's), or when the header is out of
   bounds -- to name the records, and to let the batch through when its header was
   wrong but its records are not, since Kafka judges records.

The one thing trusted is maxTimestamp: a client that writes a maxTimestamp below one of
its records' timestamps gets that record past the after bound unless the batch is
walked. Kafka recomputes maxTimestamp from the records; we keep batches as sent, the
trust the fetch path and the time index already give the header. Java clients,
librdkafka, aiokafka and kafka-python write the true maximum.

Differences from Kafka: the bounds are compared in exact integers, where Kafka computes
``now - timestamp`` in Java longs, which wrap for timestamps within ``now`` of
Long.MIN_VALUE (we refuse those as too early; Kafka lets some through when
``after.max.ms`` is Long.MAX_VALUE), and its message prints the wrapped bounds. Kafka
also refuses a client's batch that sets the LogAppendTime bit where its records carry
no timestamp ("Producer should not set timestamp type to LogAppendTime"); we do not.
Only a client's appends are checked: our group and transaction coordinators stamp
their records with the broker's monotonic clock, which a finite ``before.max.ms`` would
refuse (Kafka's stamp theirs with the wall clock and always pass).
"""

from __future__ import annotations

from protocol.record_batch import ATTR_TIMESTAMP_TYPE, NO_TIMESTAMP, RecordBatchHeader
from protocol.record_timestamps import records_outside_timestamps

#: Java's Long.MAX_VALUE: Kafka's "no bound" for both configs.
LONG_MAX = 2**63 - 1
#: Kafka's InvalidTimestampException message for the partition (ProduceResponse
#: error_message).
INVALID_TIMESTAMP_MESSAGE = "One or more records have been rejected due to invalid timestamp"

RecordErrors = tuple[tuple[int, str], ...]


def timestamp_record_errors(
    records: bytes,
    headers: list[RecordBatchHeader],
    now_ms: int,
    before_max_ms: int,
    after_max_ms: int,
    max_decompressed_bytes: int,
) -> RecordErrors:
    """``(batch index, message)`` of each record out of bounds in the first batch that
    has one; empty when every record of ``records`` (whose validated headers, in order,
    are ``headers``) is within them. For a CreateTime topic; raises what
    ``records_outside_timestamps`` raises for records that do not add up."""
    lower = now_ms - before_max_ms
    upper = now_ms + after_max_ms
    if before_max_ms >= LONG_MAX:  # the default: the headers settle it, or a walk must
        for header in headers:
            top = header.max_timestamp
            first = header.base_timestamp
            if not (lower <= top <= upper or top == NO_TIMESTAMP) or not (
                lower <= first <= upper or first == NO_TIMESTAMP
            ):
                break
        else:
            return ()
    return _walk(records, headers, lower, upper, before_max_ms, max_decompressed_bytes)


def _walk(
    records: bytes,
    headers: list[RecordBatchHeader],
    lower: int,
    upper: int,
    before_max_ms: int,
    max_decompressed_bytes: int,
) -> RecordErrors:
    """The records of each batch its header does not settle, walked for their
    timestamps; the errors of the first batch with any."""
    view = memoryview(records)
    position = 0
    for header in headers:
        start = position
        position += header.size
        top = header.max_timestamp
        if header.attributes & ATTR_TIMESTAMP_TYPE:
            # Every record's timestamp is maxTimestamp (Kafka's Record.timestamp()).
            if top == NO_TIMESTAMP or lower <= top <= upper:
                continue
        elif before_max_ms >= LONG_MAX and (top == NO_TIMESTAMP or lower <= top <= upper):
            first = header.base_timestamp
            if first == NO_TIMESTAMP or lower <= first <= upper:
                continue
        batch = view[start:position]
        outside = records_outside_timestamps(batch, lower, upper, max_decompressed_bytes, header)
        if outside:
            return tuple(
                (
                    index,
                    f"Timestamp {timestamp} of message with offset {offset} is out of "
                    f"range. The timestamp should be within [{lower}, {upper}]",
                )
                for index, offset, timestamp in outside
            )
    return ()
