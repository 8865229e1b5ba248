"""What every Jepsen checker reads of a History, gathered once: the acknowledged writes,
every read (the final read-back included, as Jepsen's final poll), the writer of each
record, what each partition's final log shows, and how far deletes reach.

The final read of ``sim-events`` is read_uncommitted (the topic has no transaction); those
of the transactional topics are read_committed, so their final logs are exactly what a
read_committed consumer could see: the "visible" records a gap is measured against.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from simulation.events import Key, Read, Txn
from simulation.history import History

#: The reader name of the final read-back.
FINAL = "final"
#: How many violations a verdict shows the evidence of.
SHOWN = 3


def _text(value: bytes) -> str:
    return value.decode("utf-8", "backslashreplace")


def show_read(r: Read) -> str:
    isolation = "rc" if r.read_committed else "ru"
    at = "      end " if math.isinf(r.at_s) else f"{r.at_s:9.3f}s"
    return (
        f"{at}  read   {r.reader} run {r.run} ({isolation}) "
        f"{r.topic}/{r.partition}@{r.offset} = {_text(r.value)}"
    )


def show_write(key: Key, value: bytes, by: str) -> str:
    return f"           write  {by} {key[0]}/{key[1]}@{key[2]} = {_text(value)}"


@dataclass
class Observations:
    #: every acknowledged write: acks=all sends and the writes of committed transactions
    acknowledged: dict[Key, tuple[bytes, str]] = field(default_factory=dict)
    reads: list[Read] = field(default_factory=list)
    #: per (topic, partition): the sorted offsets of its final (visible) log
    visible: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    #: (key, value) -> the transaction that wrote it
    writer: dict[tuple[Key, bytes], Txn] = field(default_factory=dict)
    deleted_below: dict[tuple[str, int], int] = field(default_factory=dict)
    #: one offset acknowledged to two writes: (key, (value, by), (value, by))
    claimed_twice: list[tuple[Key, tuple[bytes, str], tuple[bytes, str]]] = field(
        default_factory=list
    )

    def acknowledge(self, key: Key, value: bytes, by: str) -> None:
        before = self.acknowledged.setdefault(key, (value, by))
        if before != (value, by):
            self.claimed_twice.append((key, before, (value, by)))

    def deleted(self, key: Key) -> bool:
        return key[2] < self.deleted_below.get((key[0], key[1]), 0)

    def visible_between(self, topic: str, partition: int, low: int, high: int) -> list[int]:
        """Offsets of the final log in [low, high)."""
        offsets = self.visible.get((topic, partition), [])
        return offsets[bisect.bisect_left(offsets, low) : bisect.bisect_left(offsets, high)]


def observe(history: History) -> Observations:
    events = history.events
    seen = Observations(deleted_below=events.deleted_below())
    for key, value in history.acked_all.items():
        seen.acknowledge(key, value, "acks=all")
    for txn in events.txns:
        for key, value in txn.writes:
            seen.writer[(key, value)] = txn
            if txn.outcome == "committed":
                seen.acknowledge(key, value, txn.name)
    seen.reads = list(events.reads)
    end = math.inf  # after every client stopped: later than anything they did
    run = events.run_of(FINAL) + 1
    for topic, records in sorted(history.final_records.items()):
        committed = history.final_isolation.get(topic, False)
        for partition, offset, value in records:
            seen.reads.append(Read(FINAL, run, topic, partition, offset, value, end, committed))
            seen.visible.setdefault((topic, partition), []).append(offset)
    for offsets in seen.visible.values():
        offsets.sort()
    return seen
