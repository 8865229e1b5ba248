"""The checkers of the KIP-848 members and the share consumers, over their events.

Each returns a `Finding` (name, held, detail); `invariants.check_all` makes them Verdicts.
A broken one's detail is the smallest piece of history that shows it: the events of that
partition or offset, in time order.

**Intervals, and why they cannot accuse a correct broker.** A holder's interval is what the
client can *prove* it held, never more: it starts when the answer that gave the partition
(or record) arrived and ends at the first of

- the moment it gave it up (revoked it, sent its acknowledgement, left, was killed, its
  connection closed: Kafka 4.1 releases a closed connection's share sessions);
- the end of its lease: a heartbeat answered without an error was received no earlier than
  it was sent, so the coordinator cannot have expired the member before that send plus a
  session timeout (`lease_end`; Kafka restarts session timers on a coordinator's load);
- for a record, the fetch's send time plus the acquisition lock timeout (the broker took the
  lock after the fetch left).

So two intervals that overlap mean two holders at once by the broker's own rules. For
share records, a pair is compared only when both fetches were answered by the same broker
over connections that show it did not restart in between (the later holder's connection
was already open when the earlier acquired): a new leader rightly forgets the locks of the
old one, since acquisitions are not persisted (KIP-932).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from simulation.clients.client_history import (
    ACCEPT,
    GAP,
    REJECT,
    Acknowledgement,
    Acquisition,
    GroupEvents,
    Owned,
    Partition,
    ProtocolHistory,
    ShareEvents,
    lease_end,
)
from simulation.faults.clock_skew import MAX_DRIFT

__all__ = ["Finding", "check_protocol_clients"]

#: The error an acknowledgement is noted with when its answer never came.
UNKNOWN_OUTCOME = "network_exception"

#: The errors an acknowledgement is refused with before anything changes (the broker checks
#: a partition's batches whole first): it certainly settled nothing. Any other error may
#: come after its state write reached the share coordinator -- applied there, its answer
#: lost and the persister's retry fenced by a newer leader epoch (seed 118 of the
#: all-faults campaign at f72ac68: NOT_LEADER_OR_FOLLOWER for an ACCEPT the next leader
#: read back as done) -- so, like a lost answer, it may have settled the record; when it
#: did not, the record is delivered again (Kafka's acknowledgements are at least once).
REFUSED_BEFORE_WRITE = frozenset(
    {
        "invalid_record_state",
        "invalid_request",
        "invalid_share_session_epoch",
        "share_session_not_found",
        "share_session_limit_reached",
        "unknown_member_id",
        "fenced_member_epoch",
        "group_authorization_failed",
        "topic_authorization_failed",
        "unknown_topic_id",
    }
)

MAX_EVENTS = 10
#: Timers fire on a timing wheel's tick, a little before their deadline: a session or a
#: lock is taken to end this much earlier than the bounds above say.
TIMER_SLACK_S = 0.01


def _early(span_s: float) -> float:
    """How much earlier than ``span_s`` a broker's timer may fire: the wheel's tick, and a
    skewed clock's drift (a lock or session timed by a clock running 5% fast ends 5%
    early in real time, as Kafka's would on a drifting monotonic clock: campaign seed 6)."""
    return TIMER_SLACK_S + span_s * MAX_DRIFT


@dataclass(frozen=True, slots=True)
class Finding:
    name: str
    held: bool
    detail: str


def check_protocol_clients(
    history: ProtocolHistory,
    aborted_values: set[bytes],
    final_records: Mapping[str, Sequence[tuple[int, int, bytes]]],
) -> list[Finding]:
    share = history.share
    return [
        one_owner_at_a_time(history.groups),
        one_holder_at_a_time(share),
        within_delivery_limit(share),
        never_accepted_twice(share),
        read_committed_share_never_sees_aborted(share, aborted_values),
        every_record_settled(share, final_records),
    ]


def _events(lines: Iterable[str]) -> str:
    shown = list(lines)
    more = f" (+{len(shown) - MAX_EVENTS} more)" if len(shown) > MAX_EVENTS else ""
    return "; ".join(shown[:MAX_EVENTS]) + more


# -- KIP-848 ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Tenure:
    member: str
    name: str
    epoch: int
    start_s: float
    end_s: float


def _tenures(groups: GroupEvents) -> dict[tuple[str, Partition], list[_Tenure]]:
    """Per (group, partition): each member's provable ownership intervals."""
    found: dict[tuple[str, Partition], list[_Tenure]] = {}
    holding: dict[tuple[str, Partition], Owned] = {}  # (member, partition) -> since
    for event in groups.owned:
        now = set(event.partitions)
        for (member, tp), since in list(holding.items()):
            if member == event.member and tp not in now:
                del holding[(member, tp)]
                found.setdefault((event.group, tp), []).append(_tenure(groups, since, event.at_s))
        for tp in now:
            holding.setdefault((event.member, tp), event)
    for (_, tp), since in holding.items():
        found.setdefault((since.group, tp), []).append(_tenure(groups, since, math.inf))
    return found


def _tenure(groups: GroupEvents, since: Owned, until_s: float) -> _Tenure:
    lease = lease_end(
        groups.heartbeats_ok.get(since.member, []), since.at_s, groups.session_timeout_s
    )
    end = min(until_s, lease - _early(groups.session_timeout_s))
    return _Tenure(since.member, since.name, since.epoch, since.at_s, end)


def one_owner_at_a_time(groups: GroupEvents) -> Finding:
    """No partition owned by two members at one member epoch, nor by two at one time."""
    owners: dict[tuple[str, Partition, int], set[str]] = {}
    for event in groups.owned:
        for tp in event.partitions:
            owners.setdefault((event.group, tp, event.epoch), set()).add(event.member)
    twice = sorted(k for k, members in owners.items() if len(members) > 1)
    overlaps: list[tuple[tuple[str, Partition], _Tenure, _Tenure]] = []
    tenures = _tenures(groups)
    for key, spans in sorted(tenures.items()):
        spans.sort(key=lambda t: t.start_s)
        for i, a in enumerate(spans):
            for b in spans[i + 1 :]:
                if b.start_s >= a.end_s:
                    continue
                if b.member != a.member and b.start_s < a.end_s:
                    overlaps.append((key, a, b))
    held = not twice and not overlaps
    detail = (
        f"{len(groups.owned)} reconciliations, {sum(map(len, tenures.values()))} tenures, "
        f"{len(twice)} owned twice at one epoch, {len(overlaps)} overlapping"
    )
    if twice:
        group, tp, epoch = twice[0]
        detail += f" (first: {tp} at epoch {epoch}: " + _owner_events(groups, group, tp) + ")"
    elif overlaps:
        (group, tp), a, b = overlaps[0]
        detail += (
            f" (first: {tp}: {a.name} held it {a.start_s:.3f}-{a.end_s:.3f}s at epoch "
            f"{a.epoch}, {b.name} from {b.start_s:.3f}s at epoch {b.epoch}: "
            + _owner_events(groups, group, tp, (a.member, b.member), (a.start_s, b.start_s))
            + ")"
        )
    return Finding("KIP-848: one owner per partition at a time", held, detail)


def _owner_events(
    groups: GroupEvents,
    group: str,
    tp: Partition,
    members: tuple[str, ...] | None = None,
    around: tuple[float, float] | None = None,
) -> str:
    """The reconciliations that gave or took ``tp`` (of ``members``, near ``around``)."""
    lines = []
    previous: dict[str, bool] = {}
    for e in groups.owned:
        if e.group != group or (members is not None and e.member not in members):
            continue
        has = tp in e.partitions
        near = around is None or around[0] - 60 <= e.at_s <= around[1] + 60
        if has != previous.get(e.member, False) and near:
            lines.append(e.describe())
        previous[e.member] = has
    return _events(lines)


# -- share groups -----------------------------------------------------------------------

_Key = tuple[str, str, int, int]  # group, topic, partition, offset


def _key(event: Acquisition | Acknowledgement) -> _Key:
    return (event.group, event.topic, event.partition, event.offset)


def _offset_events(share: ShareEvents, key: _Key) -> str:
    events: list[tuple[float, str]] = [
        (a.received_s, a.describe()) for a in share.acquisitions if _key(a) == key
    ]
    events += [(k.sent_s, k.describe()) for k in share.acknowledgements if _key(k) == key]
    return f"{key[0]} {key[1]}-{key[2]}@{key[3]}: " + _events(line for _, line in sorted(events))


def _hold_end(
    share: ShareEvents, a: Acquisition, acks: Mapping[tuple[str, _Key], list[float]]
) -> float:
    end = a.sent_s + a.lock_s - _early(a.lock_s)
    for sent in acks.get((a.member, _key(a)), []):
        if sent >= a.received_s:
            end = min(end, sent)
            break
    end = min(
        end,
        lease_end(share.heartbeats_ok.get(a.member, []), a.received_s, share.session_timeout_s)
        - _early(share.session_timeout_s),
    )
    closed = share.closed.get(a.connection)
    if closed is not None and closed >= a.received_s:
        end = min(end, closed)
    gone = share.gone.get(a.member)
    if gone is not None and gone >= a.received_s:
        end = min(end, gone)
    return end


def _one_leadership(a: Acquisition, b: Acquisition) -> bool:
    """No leader change of the partition between ``a``'s fetch leaving and ``b``'s answer
    (or no epochs were noted). Kafka keeps a share partition's acquisitions in memory only:
    a leader that loses the partition and wins it back loads the durable state, in which
    the records ``a`` holds are AVAILABLE again (KIP-932: an in-flight acquisition does not
    survive a leader change), so giving them again -- even to ``a``'s member, even with the
    same delivery count -- is Kafka's behaviour, not a second holder."""
    return a.sent_epoch < 0 or a.sent_epoch == b.received_epoch


def one_holder_at_a_time(share: ShareEvents) -> Finding:
    acks: dict[tuple[str, _Key], list[float]] = {}
    for k in share.acknowledgements:
        acks.setdefault((k.member, _key(k)), []).append(k.sent_s)
    by_key: dict[_Key, list[Acquisition]] = {}
    for a in share.acquisitions:
        by_key.setdefault(_key(a), []).append(a)
    clashes: list[_Key] = []
    for key, acquired in by_key.items():
        acquired.sort(key=lambda a: a.received_s)
        for i, a in enumerate(acquired):
            end = _hold_end(share, a, acks)
            for b in acquired[i + 1 :]:
                if b.received_s >= end:
                    break
                opened = share.opened.get(b.connection, math.inf)
                if b.broker == a.broker and opened <= a.received_s and _one_leadership(a, b):
                    clashes.append(key)
                    break
    detail = f"{len(share.acquisitions)} acquisitions, {len(clashes)} held by two at once"
    if clashes:
        detail += " (first: " + _offset_events(share, min(clashes)) + ")"
    return Finding("share: no record acquired by two members at once", not clashes, detail)


def within_delivery_limit(share: ShareEvents) -> Finding:
    past = sorted(_key(a) for a in share.acquisitions if a.delivery_count > share.delivery_limit)
    detail = (
        f"limit {share.delivery_limit}, "
        f"{sum(1 for a in share.acquisitions if a.delivery_count > 1)} redeliveries, "
        f"{len(past)} past the limit"
    )
    if past:
        detail += " (first: " + _offset_events(share, past[0]) + ")"
    return Finding("share: no record delivered past its delivery limit", not past, detail)


def never_accepted_twice(share: ShareEvents) -> Finding:
    accepted = Counter(_key(k) for k in share.acknowledgements if k.ok and k.kind == ACCEPT)
    twice = sorted(k for k, n in accepted.items() if n > 1)
    detail = f"{len(accepted)} accepted, {len(twice)} accepted twice"
    if twice:
        detail += " (first: " + _offset_events(share, twice[0]) + ")"
    return Finding("share: no record ACCEPTed twice", not twice, detail)


def read_committed_share_never_sees_aborted(share: ShareEvents, aborted: set[bytes]) -> Finding:
    seen = sorted(
        _key(a)
        for a in share.acquisitions
        if a.group in share.read_committed and a.value is not None and a.value in aborted
    )
    delivered = sum(1 for a in share.acquisitions if a.group in share.read_committed)
    detail = f"{delivered} delivered read_committed, {len(seen)} aborted among them"
    if seen:
        detail += " (first: " + _offset_events(share, seen[0]) + ")"
    return Finding("share: read_committed never delivers aborted records", not seen, detail)


def every_record_settled(
    share: ShareEvents, final_records: Mapping[str, Sequence[tuple[int, int, bytes]]]
) -> Finding:
    """Once the faults heal and a drainer has taken what was left, every committed record
    of a share group's topic was ACCEPTed, REJECTed or delivered up to the limit (then
    archived)."""
    # An acknowledgement whose answer was lost (the connection broke), or that failed on
    # its state write, may have been applied: if it was not, the record was given to
    # someone again (a drainer at last).
    settled = {
        _key(k)
        for k in share.acknowledgements
        if k.kind in (ACCEPT, REJECT, GAP) and (k.ok or k.error not in REFUSED_BEFORE_WRITE)
    }
    settled |= {_key(a) for a in share.acquisitions if a.delivery_count >= share.delivery_limit}
    unsettled: list[_Key] = []
    committed = 0
    for group, topic in sorted(share.reads.items()):
        for partition, offset, _ in final_records.get(topic, []):
            committed += 1
            if (group, topic, partition, offset) not in settled:
                unsettled.append((group, topic, partition, offset))
    detail = f"{committed} committed records, {len(unsettled)} never settled"
    if unsettled:
        detail += " (first: " + _offset_events(share, unsettled[0]) + ")"
    return Finding("share: every committed record settled", not unsettled, detail)
