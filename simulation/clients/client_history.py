"""What the KIP-848 members and the share consumers saw, for their checkers.

Times are the simulated loop's (virtual seconds). Each event is appended as the client
meets it, in the single-threaded seeded order of the run, so the record is deterministic.

KIP-848 members (`GroupEvents`): every owned set a member reconciles to, with the member
epoch the coordinator gave it (`Owned`), and when each heartbeat that was answered without
an error was *sent*: a coordinator cannot have expired the member less than a session after
it received such a heartbeat, and it received it after it was sent.

Share consumers (`ShareEvents`): every record a member was given (`Acquisition`: which
fetch, on which connection, with which delivery count), every acknowledgement it sent and
how it was answered (`Acknowledgement`), when its connections opened and closed, and its
share heartbeats as above.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from simulation.clients.sasl_history import SaslEvents

Partition = tuple[str, int]
Connection = tuple[str, int]  # (the link's client id, the connection's serial)

ACK_NAMES = {0: "GAP", 1: "ACCEPT", 2: "RELEASE", 3: "REJECT"}
ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0


def no_leader_epoch(topic: str, partition: int) -> int:
    """A partition's leader epoch where the history was given no way to read it."""
    return -1


@dataclass(frozen=True, slots=True)
class Owned:
    """A KIP-848 member reconciled to ``partitions`` at ``epoch`` (``()``: it owns nothing:
    it revoked everything, was fenced, left or died)."""

    group: str
    member: str  # the member id
    name: str  # the client's name in the mix
    epoch: int
    partitions: tuple[Partition, ...]
    at_s: float
    why: str  # assigned, revoked, fenced, left, killed

    def describe(self) -> str:
        return (
            f"{self.at_s:.3f}s {self.name} epoch {self.epoch} {self.why} -> {list(self.partitions)}"
        )


@dataclass(frozen=True, slots=True)
class Acquisition:
    group: str
    member: str  # the member id (a restarted consumer is a new member)
    name: str
    topic: str
    partition: int
    offset: int
    delivery_count: int
    broker: int
    connection: Connection
    sent_s: float  # when the ShareFetch that acquired it left
    received_s: float  # when its answer arrived
    lock_s: float  # the acquisition lock timeout that answer gave
    value: bytes | None
    # the partition's leader epoch (the controller's) when the fetch left and when its answer
    # came: equal, no leader change came between, so one share partition served both
    sent_epoch: int = -1
    received_epoch: int = -1

    def describe(self) -> str:
        return (
            f"{self.received_s:.3f}s {self.name} acquired (delivery {self.delivery_count}) "
            f"from broker {self.broker} conn {self.connection[1]}, fetch sent {self.sent_s:.3f}s"
        )


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    group: str
    member: str
    name: str
    topic: str
    partition: int
    offset: int
    kind: int  # ACCEPT, RELEASE, REJECT, GAP
    sent_s: float
    ok: bool  # answered without an error for its partition
    error: str = ""  # the error it was answered with, if any

    def describe(self) -> str:
        outcome = "ok" if self.ok else self.error or "refused"
        return f"{self.sent_s:.3f}s {self.name} {ACK_NAMES[self.kind]} ({outcome})"


@dataclass
class GroupEvents:
    """KIP-848 members' reconciliations and heartbeats."""

    owned: list[Owned] = field(default_factory=list)
    heartbeats_ok: dict[str, list[float]] = field(default_factory=dict)  # member id -> sends
    session_timeout_s: float = 10.0

    def heartbeat_ok(self, member: str, sent_s: float) -> None:
        self.heartbeats_ok.setdefault(member, []).append(sent_s)


@dataclass
class ShareEvents:
    """Share consumers' acquisitions, acknowledgements, connections and heartbeats."""

    acquisitions: list[Acquisition] = field(default_factory=list)
    acknowledgements: list[Acknowledgement] = field(default_factory=list)
    opened: dict[Connection, float] = field(default_factory=dict)
    closed: dict[Connection, float] = field(default_factory=dict)
    heartbeats_ok: dict[str, list[float]] = field(default_factory=dict)
    gone: dict[str, float] = field(default_factory=dict)  # member id -> left or died
    # (group, topic) each share group reads; groups reading read_committed
    reads: dict[str, str] = field(default_factory=dict)
    read_committed: set[str] = field(default_factory=set)
    lock_duration_s: float = 10.0
    session_timeout_s: float = 10.0
    delivery_limit: int = 5
    # the controller's leader epoch of a partition now (the scenario hands it in): a share
    # partition's in-flight acquisitions die with its leader (Kafka keeps them in memory)
    leader_epoch: Callable[[str, int], int] = no_leader_epoch

    def heartbeat_ok(self, member: str, sent_s: float) -> None:
        self.heartbeats_ok.setdefault(member, []).append(sent_s)


@dataclass
class ProtocolHistory:
    """The part of `History` the protocol clients write."""

    groups: GroupEvents = field(default_factory=GroupEvents)
    share: ShareEvents = field(default_factory=ShareEvents)
    sasl: SaslEvents = field(default_factory=SaslEvents)

    def digest_update(self, h: hashlib._Hash) -> None:
        h.update(
            repr([(o.member, o.epoch, o.partitions, o.why) for o in self.groups.owned]).encode()
        )
        h.update(
            repr(
                [
                    (a.member, a.topic, a.partition, a.offset, a.delivery_count)
                    for a in self.share.acquisitions
                ]
            ).encode()
        )
        h.update(
            repr(
                [
                    (k.member, k.partition, k.offset, k.kind, k.ok)
                    for k in self.share.acknowledgements
                ]
            ).encode()
        )
        if self.sasl.topic:  # runs without the SASL clients keep their digests
            self.sasl.digest_update(h)


def lease_end(sends: list[float], start_s: float, session_s: float) -> float:
    """The latest time a member is certainly still a member, seen from ``start_s``: from
    the last heartbeat sent (and answered) at or before ``start_s``, each next one within a
    session keeps it; the first gap longer than a session may have expired it."""
    before = [s for s in sends if s <= start_s]
    if not before:
        return start_s  # nothing proves it a member after start_s
    last = before[-1]
    for s in sends[len(before) :]:
        if s - last > session_s:
            break
        last = s
    return last + session_s
