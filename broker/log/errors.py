"""Errors a partition log raises; each maps to one Kafka error code.

CorruptRecordError (CORRUPT_MESSAGE) and InvalidRecordError (INVALID_RECORD) come from
protocol.record_batch and are re-exported here so handlers can import every log error
from one place.
"""

from __future__ import annotations

from protocol.record_batch import CorruptRecordError, InvalidRecordError

__all__ = [
    "CorruptRecordError",
    "InvalidRecordError",
    "LogError",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
    "UnexpectedAppendOffsetError",
]


class LogError(Exception):
    """Base of the log's own errors."""


class OffsetOutOfRangeError(LogError):
    """OFFSET_OUT_OF_RANGE: an offset below the log start or above the log end."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(LogError):
    """MESSAGE_TOO_LARGE: a batch larger than the topic's max.message.bytes."""


class UnexpectedAppendOffsetError(LogError):
    """A follower append whose first offset lies below the log end (Kafka's
    UnexpectedAppendOffsetException): the follower must truncate first."""
