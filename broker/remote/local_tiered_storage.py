"""LocalTieredStorage: the embedded remote tier, a directory (or memory) of segments.

Kafka ships a ``LocalTieredStorage`` for its own tests; this is minikafka's default
``RemoteStorageManager``. With a data directory the tier is ``<data dir>/remote-storage``,
shared by every broker of the cluster (an object store is one for all), one folder per
topic partition and one file per segment and index::

    remote-storage/<topic>-<partition>/<start offset:020d>-<segment id>.log
                                                                    .index .timeindex
                                                                    .leader_epoch_checkpoint
                                                                    .snapshot .txnindex

A file is written whole under a ``.tmp`` name and renamed, so a crash mid-copy leaves no
half segment under its real name. Without a data directory the files are kept in a dict.
How long each call takes is not this class's business (``storage_model.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

from broker.remote.remote_log_segment_metadata import RemoteLogSegmentMetadata
from broker.remote.remote_storage_manager import (
    IndexType,
    LogSegmentData,
    RemoteResourceNotFoundException,
)

REMOTE_STORAGE_DIR = "remote-storage"
_LOG_SUFFIX = "log"


class LocalTieredStorage:
    """A RemoteStorageManager over a directory, or over memory when ``root`` is None."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._memory: dict[str, bytes] = {}
        if root is not None:
            root.mkdir(parents=True, exist_ok=True)

    # -- naming ---------------------------------------------------------------------

    @staticmethod
    def _key(metadata: RemoteLogSegmentMetadata, suffix: str) -> str:
        sid = metadata.segment_id
        return f"{sid.topic}-{sid.partition}/{metadata.start_offset:020d}-{sid.id}.{suffix}"

    def _write(self, key: str, data: bytes) -> None:
        if self.root is None:
            self._memory[key] = data
            return
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def _read(self, key: str) -> bytes:
        if self.root is None:
            try:
                return self._memory[key]
            except KeyError:
                raise RemoteResourceNotFoundException(key) from None
        try:
            return (self.root / key).read_bytes()
        except FileNotFoundError:
            raise RemoteResourceNotFoundException(key) from None

    def _delete(self, key: str) -> None:
        if self.root is None:
            self._memory.pop(key, None)
        else:
            (self.root / key).unlink(missing_ok=True)

    # -- Kafka's four calls -------------------------------------------------------------

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData
    ) -> None:
        # The segment last: a segment file means its indexes are there too.
        self._write(self._key(metadata, IndexType.OFFSET), data.offset_index)
        self._write(self._key(metadata, IndexType.TIMESTAMP), data.time_index)
        self._write(self._key(metadata, IndexType.LEADER_EPOCH), data.leader_epoch_index)
        self._write(self._key(metadata, IndexType.PRODUCER_SNAPSHOT), data.producer_snapshot)
        self._write(self._key(metadata, IndexType.TRANSACTION), data.transaction_index)
        self._write(self._key(metadata, _LOG_SUFFIX), data.log_segment)

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int, end_position: int = -1
    ) -> bytes:
        data = self._read(self._key(metadata, _LOG_SUFFIX))
        return (
            data[start_position:] if end_position < 0 else data[start_position : end_position + 1]
        )

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        return self._read(self._key(metadata, index_type))

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        self._delete(self._key(metadata, _LOG_SUFFIX))
        for index_type in IndexType:
            self._delete(self._key(metadata, index_type))

    # -- sizes (DescribeLogDirs, topics describe) -----------------------------------------

    def stored_bytes(self) -> int:
        """Every byte the tier holds (segments and indexes)."""
        if self.root is None:
            return sum(len(v) for v in self._memory.values())
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())
