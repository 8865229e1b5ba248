"""Creates, finds, loads and deletes the partition logs of one broker.

With a data directory, each partition is a DiskLog in `<data_dir>/<topic>-<partition>/`
(Kafka's naming; topic names may contain '-', the partition is after the last one).
Without one, logs are MemoryLogs and vanish with the process.

Topic configs and topic ids are not stored here: the metadata layer persists them and
passes each log its LogConfig (load_all takes them per topic; `log.config` may be
replaced later for AlterConfigs).

Deleting a partition first renames its directory to `<name>.<id>-delete` (as Kafka
does), then removes it; a directory left with that suffix by a crash is removed on
the next load.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

from broker.log.disk_log import DiskLog
from broker.log.log_config import LogConfig
from broker.log.memory_log import MemoryLog
from broker.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

_DELETE_SUFFIX = "-delete"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) from `<topic>-<partition>`, or None for anything else."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


class LogManager:
    def __init__(self, data_dir: Path | None, default_config: LogConfig | None = None) -> None:
        self.data_dir = data_dir
        self.default_config = default_config or LogConfig()
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        if data_dir is not None:
            data_dir.mkdir(parents=True, exist_ok=True)

    def partition_dir(self, topic: str, partition: int) -> Path | None:
        if self.data_dir is None:
            return None
        return self.data_dir / partition_dir_name(topic, partition)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def get_or_create(
        self, topic: str, partition: int, config: LogConfig | None = None
    ) -> PartitionLog:
        """The partition's log, opening (and recovering) or creating it if needed."""
        key = (topic, partition)
        existing = self.logs.get(key)
        if existing is not None:
            return existing
        cfg = config or self.default_config
        directory = self.partition_dir(topic, partition)
        plog: PartitionLog = MemoryLog(cfg) if directory is None else DiskLog(directory, cfg)
        self.logs[key] = plog
        return plog

    def load_all(
        self, configs: Mapping[str, LogConfig] | None = None
    ) -> dict[tuple[str, int], PartitionLog]:
        """Open every partition directory under the data dir (at broker start).

        `configs` maps topic -> LogConfig; topics not in it get the default config.
        Returns all logs now open (memory mode: the ones created so far).
        """
        if self.data_dir is None:
            return dict(self.logs)
        for path in sorted(self.data_dir.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith(_DELETE_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            parsed = parse_partition_dir_name(path.name)
            if parsed is None:
                continue
            topic, _ = parsed
            cfg = (configs or {}).get(topic, self.default_config)
            if parsed not in self.logs:
                self.logs[parsed] = DiskLog(path, cfg)
        return dict(self.logs)

    def delete(self, topic: str, partition: int) -> bool:
        """DeleteTopics: close the log and remove its data. True if it existed."""
        plog = self.logs.pop((topic, partition), None)
        if plog is not None:
            plog.close()
        directory = self.partition_dir(topic, partition)
        if directory is None or not directory.exists():
            return plog is not None
        doomed = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{_DELETE_SUFFIX}")
        directory.rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def apply_retention(
        self, now_ms: int, high_watermarks: Mapping[tuple[str, int], int] | None = None
    ) -> int:
        """Run retention over every log; returns bytes deleted in total."""
        total = 0
        for key, plog in self.logs.items():
            hw = high_watermarks.get(key) if high_watermarks is not None else None
            total += plog.apply_retention(now_ms, high_watermark=hw)
        return total

    def flush_all(self) -> None:
        for plog in self.logs.values():
            plog.flush()

    def close_all(self) -> None:
        for plog in self.logs.values():
            plog.close()
