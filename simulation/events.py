"""The event log Jepsen's checkers read: every record read (by whom, in which run of polls,
when), every transaction (what it read, what it wrote where, how it ended and when its end
was asked for), every DeleteRecords asked for, every throttle a client honoured.

`History` keeps one (``history.events``); the clients write it as they go, the checkers of
`simulation.checkers` read it at the end. A *run* is one consumer's stretch of polls with
no seek and no rebalance between them: within it each partition's offsets must rise by one
over the records the consumer could see (Jepsen's gap and inversion checks). A run may
say where it starts (a seek); one started by a rebalance does not know (aiokafka resumes at
the committed offset without telling).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Key = tuple[str, int, int]  # (topic, partition, offset)
Outcome = Literal["committed", "aborted", "unknown", "open"]


@dataclass(slots=True)
class Read:
    reader: str
    run: int
    topic: str
    partition: int
    offset: int
    value: bytes
    at_s: float
    read_committed: bool


@dataclass(slots=True)
class Txn:
    """One transaction of a transactional client, as the client saw it."""

    name: str  # "<transactional id>#<n>", unique in a run
    reads: list[Key] = field(default_factory=list)
    writes: list[tuple[Key, bytes]] = field(default_factory=list)
    outcome: Outcome = "open"
    #: Virtual time at which EndTxn (commit) was first asked for: a read_committed read of
    #: one of its records before then is a precommitted read.
    end_sent_at_s: float | None = None


@dataclass(slots=True)
class Delete:
    """A DeleteRecords asked for: records below ``offset`` may go (answered or not)."""

    topic: str
    partition: int
    offset: int
    at_s: float
    low_watermark: int | None  # the answer's, None when no answer came


@dataclass
class EventLog:
    reads: list[Read] = field(default_factory=list)
    txns: list[Txn] = field(default_factory=list)
    deletes: list[Delete] = field(default_factory=list)
    #: (client, total ms) of throttle_time a client waited out
    throttled_ms: dict[str, int] = field(default_factory=dict)
    #: per reader: its current run and where each partition of it started (when known)
    _runs: dict[str, int] = field(default_factory=dict)
    run_starts: dict[tuple[str, int], dict[tuple[str, int], int]] = field(default_factory=dict)

    def run_of(self, reader: str) -> int:
        return self._runs.get(reader, 0)

    def new_run(self, reader: str, starts: dict[tuple[str, int], int] | None = None) -> None:
        """The reader seeked or was reassigned: its next reads start a new run."""
        run = self._runs.get(reader, 0) + 1
        self._runs[reader] = run
        if starts:
            self.run_starts[(reader, run)] = dict(starts)

    def read(
        self,
        reader: str,
        key: Key,
        value: bytes,
        at_s: float,
        *,
        read_committed: bool,
    ) -> None:
        self.reads.append(
            Read(reader, self.run_of(reader), key[0], key[1], key[2], value, at_s, read_committed)
        )

    def begin(self, name: str) -> Txn:
        txn = Txn(name)
        self.txns.append(txn)
        return txn

    def throttled(self, client: str, ms: int) -> None:
        self.throttled_ms[client] = self.throttled_ms.get(client, 0) + ms

    def deleted_below(self) -> dict[tuple[str, int], int]:
        """Per partition, the highest offset a DeleteRecords asked to delete below: records
        under it may be gone whether the answer came or not."""
        bounds: dict[tuple[str, int], int] = {}
        for d in self.deletes:
            key = (d.topic, d.partition)
            bounds[key] = max(bounds.get(key, 0), d.offset)
        return bounds

    def digest_items(self) -> list[object]:
        """What of the log enters the run's digest: transactions and deletes (reads are
        checked, as `History.reads` are, not hashed)."""
        return [
            [(t.name, t.outcome, t.writes, t.reads) for t in self.txns],
            [(d.topic, d.partition, d.offset, d.low_watermark) for d in self.deletes],
            sorted(self.throttled_ms.items()),
        ]
