"""Creates, finds, loads, moves and deletes the partition logs of one broker.

With a data directory, each partition is a DiskLog in `<log dir>/<topic>-<partition>/`
(Kafka's naming; topic names may contain '-', the partition is after the last one).
Without one, logs are MemoryLogs and vanish with the process.

A broker may have several log directories (Kafka's ``log.dirs``): the data directory
first, then ``extra_dirs``. A new partition goes to the directory holding the fewest
partitions (Kafka's LogManager.nextLogDirs), or to the one AlterReplicaLogDirs asked
for before the partition existed (``preferred_log_dirs``). ``move`` moves a log to
another of them: Kafka builds a future replica (`<name>.<uuid>-future` in the
destination) that a ReplicaAlterLogDirsThread fills by fetching, then swaps it in; here
the closed log's files are copied into the future directory, which is renamed into
place, the old directory deleted and the log reopened — done at once on the loop (the
copy blocks it for as long as it takes), so no future replica is ever seen half way.

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
from collections.abc import Mapping, Sequence
from pathlib import Path

from broker.ids import IdSource
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


_FUTURE_SUFFIX = "-future"


class LogManager:
    def __init__(
        self,
        data_dir: Path | None,
        default_config: LogConfig | None = None,
        extra_dirs: Sequence[Path] = (),
        ids: IdSource | None = None,
    ) -> None:
        self.data_dir = data_dir
        # The tags of -future and -delete directories (Kafka: a random uuid).
        self._ids = ids or IdSource.system()
        self.default_config = default_config or LogConfig()
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        #: Kafka's log.dirs for this broker: the data dir first (none in memory mode)
        self.log_dirs: list[Path] = []
        if data_dir is not None:
            for directory in (data_dir, *extra_dirs):
                if directory not in self.log_dirs:
                    directory.mkdir(parents=True, exist_ok=True)
                    self.log_dirs.append(directory)
        #: the log dir of each open disk log
        self._log_dir_of: dict[tuple[str, int], Path] = {}
        #: when the log flusher last flushed each log (`flush_dirty_logs`)
        self._last_flush_ms: dict[tuple[str, int], int] = {}
        #: AlterReplicaLogDirs for a partition not hosted yet: where it will be created
        self.preferred_log_dirs: dict[tuple[str, int], Path] = {}

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir holding the partition's log (None: memory, or no such log)."""
        return self._log_dir_of.get((topic, partition))

    def find_log_dir(self, path: str) -> Path | None:
        """One of this broker's log dirs, named as DescribeLogDirs shows it (resolved)."""
        for directory in self.log_dirs:
            if str(directory.resolve()) == path or str(directory) == path:
                return directory
        return None

    def _next_log_dir(self, key: tuple[str, int]) -> Path:
        preferred = self.preferred_log_dirs.pop(key, None)
        if preferred is not None:
            return preferred
        counts = {d: 0 for d in self.log_dirs}
        for directory in self._log_dir_of.values():
            counts[directory] = counts.get(directory, 0) + 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def partition_dir(self, topic: str, partition: int) -> Path | None:
        if self.data_dir is None:
            return None
        key = (topic, partition)
        directory = self._log_dir_of.get(key) or self._next_log_dir(key)
        return directory / partition_dir_name(topic, partition)

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
        if directory is not None:
            self._log_dir_of[key] = directory.parent
        return plog

    def load_all(
        self, configs: Mapping[str, LogConfig] | None = None
    ) -> dict[tuple[str, int], PartitionLog]:
        """Open every partition directory under the data dir (at broker start).

        `configs` maps topic -> LogConfig; topics not in it get the default config.
        Returns all logs now open (memory mode: the ones created so far).
        """
        for log_dir in self.log_dirs:
            for path in sorted(log_dir.iterdir()):
                if not path.is_dir():
                    continue
                if path.name.endswith((_DELETE_SUFFIX, _FUTURE_SUFFIX)):
                    # a deletion, or a move cut short: the source is still in place
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                parsed = parse_partition_dir_name(path.name)
                if parsed is None or parsed in self.logs:
                    continue  # (a partition in two dirs: the first one wins)
                topic, _ = parsed
                cfg = (configs or {}).get(topic, self.default_config)
                self.logs[parsed] = DiskLog(path, cfg)
                self._log_dir_of[parsed] = log_dir
        return dict(self.logs)

    def move(self, topic: str, partition: int, destination: Path) -> DiskLog | None:
        """Move the partition's disk log into ``destination`` (one of the log dirs) and
        return it reopened there: copy into a future dir, rename, delete the old one.
        None when it is there already."""
        key = (topic, partition)
        source_dir = self._log_dir_of[key]
        old = self.logs[key]
        if source_dir == destination:
            return None
        name = partition_dir_name(topic, partition)
        future = destination / f"{name}.{self._ids.hex()}{_FUTURE_SUFFIX}"
        old.close()
        shutil.copytree(source_dir / name, future)
        future.rename(destination / name)
        self._log_dir_of[key] = destination
        doomed = source_dir / f"{name}.{self._ids.hex()}{_DELETE_SUFFIX}"
        (source_dir / name).rename(doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        moved = DiskLog(destination / name, old.config)
        self.logs[key] = moved
        return moved

    def delete(self, topic: str, partition: int) -> bool:
        """DeleteTopics: close the log and remove its data. True if it existed."""
        plog = self.logs.pop((topic, partition), None)
        if plog is not None:
            plog.close()
        log_dir = self._log_dir_of.pop((topic, partition), None)
        directory = None if log_dir is None else log_dir / partition_dir_name(topic, partition)
        if directory is None or not directory.exists():
            return plog is not None
        doomed = directory.with_name(f"{directory.name}.{self._ids.hex()}{_DELETE_SUFFIX}")
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

    def flush_dirty_logs(self, now_ms: int) -> int:
        """Kafka's log flusher (``kafka-log-flusher``, every log.flush.scheduler.interval.ms):
        flush each log whose last flush is at least its ``flush.ms`` old; returns how many.
        A log is first seen as just flushed (Kafka's lastFlushTime starts at its creation)."""
        flushed = 0
        for key, plog in self.logs.items():
            last = self._last_flush_ms.setdefault(key, now_ms)
            if now_ms - last >= plog.config.flush_ms:
                plog.flush()
                self._last_flush_ms[key] = now_ms
                flushed += 1
        return flushed

    def flush_all(self) -> None:
        for plog in self.logs.values():
            plog.flush()

    def close_all(self) -> None:
        for plog in self.logs.values():
            plog.close()
