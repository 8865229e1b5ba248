"""What a copied segment carries besides its batches, in Kafka's formats where they are small.

- offset index: per batch, 4-byte relative offset + 4-byte position (Kafka's .index entry;
  Kafka writes one entry per index.interval.bytes, we write one per batch);
- time index: per batch, 8-byte max timestamp + 4-byte relative offset (.timeindex);
- leader-epoch checkpoint: Kafka's text file (version 0, count, ``epoch start`` lines),
  the epochs that begin at or before the segment's end;
- producer snapshot: the producers' state as the copy saw it, as JSON (Kafka's snapshot is
  a binary file with a CRC; nothing outside minikafka reads ours).

A follower that starts from the remote tier (``tier_state.py``) reads the last two.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable

from broker.replica.leader_epoch_cache import EpochEntry
from broker.replica.producer_state import BatchMetadata, ProducerStateEntry
from protocol.record_batch import RecordBatchHeader

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def offset_index(base_offset: int, batches: Iterable[tuple[int, RecordBatchHeader]]) -> bytes:
    return b"".join(
        _OFFSET_ENTRY.pack(header.base_offset - base_offset, position)
        for position, header in batches
    )


def time_index(base_offset: int, batches: Iterable[tuple[int, RecordBatchHeader]]) -> bytes:
    return b"".join(
        _TIME_ENTRY.pack(header.max_timestamp, header.base_offset - base_offset)
        for _, header in batches
    )


def leader_epoch_checkpoint(entries: Iterable[EpochEntry], end_offset: int) -> bytes:
    kept = [e for e in entries if e.start_offset <= end_offset]
    lines = ["0", str(len(kept)), *(f"{e.epoch} {e.start_offset}" for e in kept)]
    return ("\n".join(lines) + "\n").encode()


def parse_leader_epoch_checkpoint(data: bytes) -> list[EpochEntry]:
    lines = data.decode().split("\n")
    count = int(lines[1])
    out = []
    for line in lines[2 : 2 + count]:
        epoch, start = line.split()
        out.append(EpochEntry(int(epoch), int(start)))
    return out


def producer_snapshot(producers: Iterable[ProducerStateEntry]) -> bytes:
    return json.dumps(
        [
            {
                "producer_id": p.producer_id,
                "producer_epoch": p.producer_epoch,
                "coordinator_epoch": p.coordinator_epoch,
                "last_timestamp": p.last_timestamp,
                "current_txn_first_offset": p.current_txn_first_offset,
                "batches": [
                    [b.last_seq, b.last_offset, b.offset_delta, b.timestamp] for b in p.batches
                ],
            }
            for p in producers
        ]
    ).encode()


def parse_producer_snapshot(data: bytes) -> list[ProducerStateEntry]:
    out = []
    for item in json.loads(data.decode() or "[]"):
        entry = ProducerStateEntry(
            int(item["producer_id"]),
            int(item["producer_epoch"]),
            int(item["coordinator_epoch"]),
            int(item["last_timestamp"]),
            item["current_txn_first_offset"],
        )
        for last_seq, last_offset, delta, ts in item["batches"]:
            entry.batches.append(BatchMetadata(last_seq, last_offset, delta, ts))
        out.append(entry)
    return out
