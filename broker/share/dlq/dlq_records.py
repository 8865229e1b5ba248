"""The records a share group's dead-letter queue gets: Kafka's ``ShareGroupDLQRecordHelper``.

One DLQ record per source offset, uncompressed, timestamped with the broker's wall clock
at the write (CreateTime: retention ages it from when it was dead-lettered), in the DLQ
partition ``source partition % DLQ partitions``. Its headers, after the source record's
own (copied only with ``errors.deadletterqueue.copy.record.enable``, as its key and
value):

- ``__dlq.errors.topic`` — the source topic's name;
- ``__dlq.errors.partition``, ``__dlq.errors.offset`` — the source partition and offset;
- ``__dlq.errors.group`` — the share group;
- ``__dlq.errors.delivery.count`` — the offset's delivery count, when known;
- ``__dlq.errors.message`` — why: "Offset rejected by client." (a REJECT) or "Offset
  delivery count exceeded the threshold." (the delivery count limit).

Numbers are their decimal text in UTF-8, as Java's ``toString``. A range whose records
do not fit one batch of the DLQ topic's ``max.message.bytes`` is split into several, in
order; a single record larger than that is sent alone and refused by the leader, as
Kafka's is.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from protocol.record_batch import BATCH_HEADER_SIZE, Record
from protocol.record_builder import build_record_batch

HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"

#: Kafka's ``ShareGroupDLQManager.CLIENT_REJECT`` and ``DELIVERY_COUNT_EXCEEDED``.
CLIENT_REJECT = "Offset rejected by client."
DELIVERY_COUNT_EXCEEDED = "Offset delivery count exceeded the threshold."

# what one record adds to a batch beyond its key, value and header bytes (varints)
_RECORD_OVERHEAD = 24
_HEADER_OVERHEAD = 10

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class DLQRecordParameter:
    """Kafka's ``ShareGroupDLQRecordParameter``: a run of source offsets to dead-letter,
    with the delivery count they share and the reason."""

    group_id: str
    topic: str
    topic_id: uuid.UUID
    partition: int
    first_offset: int
    last_offset: int
    delivery_count: int | None
    cause: str | None

    @property
    def count(self) -> int:
        return self.last_offset - self.first_offset + 1


def dlq_headers(param: DLQRecordParameter, offset: int, original: Headers | None = None) -> Headers:
    """The headers of the DLQ record of ``offset``: the source's own, then Kafka's six."""
    headers: Headers = list(original or ())
    headers.append((HEADER_TOPIC, param.topic.encode()))
    headers.append((HEADER_PARTITION, str(param.partition).encode()))
    headers.append((HEADER_OFFSET, str(offset).encode()))
    headers.append((HEADER_GROUP, param.group_id.encode()))
    if param.delivery_count is not None:
        headers.append((HEADER_DELIVERY_COUNT, str(param.delivery_count).encode()))
    if param.cause is not None:
        headers.append((HEADER_MESSAGE, param.cause.encode()))
    return headers


def inferred_cause(delivery_count: int, delivery_count_limit: int) -> str:
    """The cause of an offset loaded ARCHIVING (the cause is not persisted): at the
    delivery count limit it was exhausted, else rejected (as Kafka infers it)."""
    if delivery_count >= delivery_count_limit:
        return DELIVERY_COUNT_EXCEEDED
    return CLIENT_REJECT


def dlq_runs(pending: list[tuple[int, int, str]]) -> list[tuple[int, int, int, str]]:
    """(offset, delivery count, cause) of offsets to dead-letter, as runs (first, last,
    delivery count, cause) of consecutive offsets that share both: one write each."""
    runs: list[tuple[int, int, int, str]] = []
    for offset, count, cause in sorted(pending):
        if runs:
            first, last, run_count, run_cause = runs[-1]
            if offset == last + 1 and count == run_count and cause == run_cause:
                runs[-1] = (first, offset, count, cause)
                continue
        runs.append((offset, offset, count, cause))
    return runs


def destination_partition(source_partition: int, dlq_partitions: int) -> int:
    """Kafka's ``dlqDestinationPartition``."""
    return source_partition % dlq_partitions


def build_dlq_batches(
    param: DLQRecordParameter,
    source: Mapping[int, Record],
    now_ms: int,
    max_message_bytes: int,
) -> list[tuple[int, int, bytes]]:
    """The DLQ batches of ``param``'s offsets, in order, each (first source offset, last
    source offset, batch bytes). ``source`` holds the source records to copy (empty: the
    group does not copy them, or they could not be read: headers only)."""
    batches: list[tuple[int, int, bytes]] = []
    records: list[tuple[bytes | None, bytes | None, Headers]] = []
    first = param.first_offset
    size = BATCH_HEADER_SIZE
    for offset in range(param.first_offset, param.last_offset + 1):
        record = source.get(offset)
        key = value = None
        original: Headers | None = None
        if record is not None:
            key, value, original = record.key, record.value, list(record.headers)
        headers = dlq_headers(param, offset, original)
        record_size = _RECORD_OVERHEAD + len(key or b"") + len(value or b"")
        record_size += sum(_HEADER_OVERHEAD + len(k) + len(v or b"") for k, v in headers)
        if records and size + record_size > max_message_bytes:
            batches.append((first, offset - 1, build_record_batch(records, timestamp_ms=now_ms)))
            records, first, size = [], offset, BATCH_HEADER_SIZE
        records.append((key, value, headers))
        size += record_size
    batches.append((first, param.last_offset, build_record_batch(records, timestamp_ms=now_ms)))
    return batches
