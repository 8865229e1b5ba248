"""Per-partition logs of record batches: in memory or on disk (Kafka's segment layout).

Offsets are assigned in one place, by the log on `append_as_leader`
(partition_log.prepare_leader_append). The log cleaner (log_cleaner.py) compacts
`cleanup.policy=compact` logs. See each module's docstring for the details.
"""

from broker.log.disk_log import DiskLog
from broker.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    LogError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from broker.log.log_config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.memory_log import MemoryLog
from broker.log.partition_log import AppendInfo, PartitionLog

__all__ = [
    "AppendInfo",
    "CorruptRecordError",
    "DiskLog",
    "InvalidRecordError",
    "LogConfig",
    "LogError",
    "LogManager",
    "MemoryLog",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "RecordTooLargeError",
    "UnexpectedAppendOffsetError",
]
