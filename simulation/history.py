"""What the simulated clients saw, kept for the invariants and the digest.

Every observation is appended in the order the (single-threaded, seeded) simulation made it,
so a history is itself deterministic: the digest of a run hashes it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from simulation.clients.client_history import ProtocolHistory, no_leader_epoch
from simulation.events import EventLog

Partition = tuple[str, int]


@dataclass(slots=True)
class Assignment:
    """A group member told it owns ``partitions`` in ``generation``."""

    group: str
    generation: int
    member: str
    partitions: tuple[Partition, ...]


Task = tuple[str, int]  # a streams task: (subtopology id, partition)


@dataclass(frozen=True, slots=True)
class StreamsAssignment:
    """What a streams group member holds from ``at_s`` on, as it reconciled it.

    ``event`` says why it changed: ``heartbeat`` (an answer moved its epoch or its tasks;
    ``member_epoch`` is the target assignment epoch it answers), ``fenced`` (the broker
    fenced it: everything dropped), ``left`` (it is leaving: its tasks closed before the
    leave heartbeat, as Kafka Streams closes them), ``died`` (its process stopped)."""

    member: str
    at_s: float
    event: str
    member_epoch: int
    active: tuple[Task, ...]
    standby: tuple[Task, ...]
    warmup: tuple[Task, ...]


@dataclass(frozen=True, slots=True)
class LeaderStart:
    """A broker became a partition's leader (`simulation.broker_probes`): its high watermark
    before (bounded by its log) and after ``make_leader``."""

    topic: str
    partition: int
    broker: int
    leader_epoch: int
    before: int
    after: int


@dataclass
class History:
    # (topic, partition, offset) -> value, for every record an acks=all producer was told is in
    acked_all: dict[tuple[str, int, int], bytes] = field(default_factory=dict)
    acked_one: int = 0
    send_failures: Counter[str] = field(default_factory=Counter)
    # per (consumer, topic, partition): every high watermark a fetch answered, in order, with
    # the partition's leader epoch (the controller's) when the consumer saw it
    high_watermarks: dict[tuple[str, str, int], list[tuple[int, int]]] = field(default_factory=dict)
    # per (group, topic, partition): every offset a commit was acknowledged for, in order
    commits: dict[tuple[str, str, int], list[int]] = field(default_factory=dict)
    # beside ``commits``, each commit's (sent, acknowledged) virtual times (out of the digest):
    # a commit takes effect somewhere between the two, so order is only known across spans
    commit_spans: dict[tuple[str, str, int], list[tuple[float, float]]] = field(
        default_factory=dict
    )
    assignments: list[Assignment] = field(default_factory=list)
    # values written in transactions the producer aborted (they must never be read committed)
    aborted_values: set[bytes] = field(default_factory=set)
    # values a read_committed consumer saw while the run went on
    read_committed_values: list[bytes] = field(default_factory=list)
    # (topic, partition, offset) -> the value the first consumer to read it saw; a later
    # read of another value at that offset goes to ``read_divergence`` (reader, key, value)
    reads: dict[tuple[str, int, int], bytes] = field(default_factory=dict)
    read_divergence: list[tuple[str, tuple[str, int, int], bytes]] = field(default_factory=list)
    transactions: Counter[str] = field(default_factory=Counter)
    faults: list[str] = field(default_factory=list)
    client_errors: Counter[str] = field(default_factory=Counter)
    # filled at the end: every record of each topic, (partition, offset, value), and the
    # offsets the transform's group committed last
    final_records: dict[str, list[tuple[int, int, bytes]]] = field(default_factory=dict)
    final_committed: dict[tuple[str, str, int], int] = field(default_factory=dict)
    # the controller's leader epoch of a partition now, handed in by the scenario (the
    # checks judge a high watermark that moved back, or a share record given twice, by
    # whether the partition changed leader between)
    leader_epoch: Callable[[str, int], int] = no_leader_epoch
    #: per topic of ``final_records``: whether its final read was read_committed
    final_isolation: dict[str, bool] = field(default_factory=dict)
    #: reads, transactions, deletes and throttles, for Jepsen's checkers (`events`)
    events: EventLog = field(default_factory=EventLog)
    # what the KIP-848 members and the share consumers saw (`simulation.clients`)
    protocol: ProtocolHistory = field(default_factory=ProtocolHistory)
    # the streams group: every member's reconciled assignments in order; the tasks of its
    # topology; and, once the faults healed, each live member's (active, standby) when the
    # group converged -- or at the deadline, if it never did
    streams: list[StreamsAssignment] = field(default_factory=list)
    streams_tasks: tuple[Task, ...] = ()
    streams_final: dict[str, tuple[tuple[Task, ...], tuple[Task, ...]]] = field(
        default_factory=dict
    )
    # every leader start on a simulated broker (`simulation.broker_probes`; not digested)
    leader_starts: list[LeaderStart] = field(default_factory=list)

    def high_watermark(self, consumer: str, topic: str, partition: int, value: int) -> None:
        seen = self.high_watermarks.setdefault((consumer, topic, partition), [])
        observed = (value, self.leader_epoch(topic, partition))
        if not seen or seen[-1] != observed:
            seen.append(observed)

    def read(self, reader: str, topic: str, partition: int, offset: int, value: bytes) -> None:
        """A consumer was given ``value`` at this offset (kept out of the digest: checked)."""
        key = (topic, partition, offset)
        first = self.reads.setdefault(key, value)
        if first != value:
            self.read_divergence.append((reader, key, value))

    def committed(
        self, group: str, topic: str, partition: int, offset: int, span: tuple[float, float]
    ) -> None:
        """A commit of ``offset`` was acknowledged; ``span`` is when it was sent and when
        its answer came."""
        self.commits.setdefault((group, topic, partition), []).append(offset)
        self.commit_spans.setdefault((group, topic, partition), []).append(span)

    def digest(self, virtual_end_s: float, messages: int) -> str:
        """A hash of everything observed: the same seed must give the same digest."""
        h = hashlib.sha256()
        for key in sorted(self.acked_all):
            h.update(repr((key, self.acked_all[key])).encode())
        for topic in sorted(self.final_records):
            h.update(repr((topic, self.final_records[topic])).encode())
        for name in ("send_failures", "transactions", "client_errors"):
            h.update(repr(sorted(getattr(self, name).items())).encode())
        h.update(
            repr(
                [(a.group, a.generation, a.member, a.partitions) for a in self.assignments]
            ).encode()
        )
        h.update(repr(sorted(self.commits.items())).encode())
        h.update(repr(self.streams).encode())
        h.update(repr(sorted(self.streams_final.items())).encode())
        h.update(repr(self.faults).encode())
        h.update(repr(self.events.digest_items()).encode())
        self.protocol.digest_update(h)
        h.update(b"t=%.9f messages=%d" % (virtual_end_s, messages))
        return h.hexdigest()[:16]
