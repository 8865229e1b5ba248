"""Per-partition logs of record batches: in memory or on disk (Kafka's segment layout).

Offsets are assigned in one place, by the log on `append_as_leader`
(partition_log.prepare_leader_append). The log cleaner (log_cleaner.py) compacts
`cleanup.policy=compact` logs. See each module's docstring for the details.

The parts: ``PartitionLog`` (the interface) with ``MemoryLog`` and ``DiskLog`` (segments with
sparse offset and time indexes, recovery by CRC), ``retention`` (Kafka's three rules),
``LogManager`` (one broker's log dirs, AlterReplicaLogDirs' moves), ``transaction_index``
(the aborted transactions a read_committed fetch lists, Kafka's ``.txnindex`` files), and the
cleaner (``log_cleaner``, ``cleaner``, ``cleaner_batch``, ``cleanable``).
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
