"""The invariants a simulated run must keep, checked on its History (Jepsen-style).

Each is a promise Kafka makes to the clients of the workload mix:

1. no record an acks=all producer was told is written is lost (it is at that offset, with
   that value, in the final read) -- with ``--tiered``, on the tiered topic too: read from
   offset 0 after local deletion, failovers and healed remote faults;
2. no record of the idempotent producer is written twice;
3. a partition's high watermark never moves back as one consumer sees it;
4. a group's committed offset for a partition never moves back;
5. in one generation of a group, at most one member owns a partition;
6. a read_committed consumer never reads a record of an aborted transaction;
7. the consume-transform-produce output holds each input below the transform's committed
   offsets exactly once, and nothing else;
8. no dirty read: every record a consumer was given is in the final log at that offset with
   that value (Kafka gives consumers only what the in-sync replicas have: a record read and
   later truncated was read above the high watermark), and no two consumers were given two
   values at one offset.

Records below an offset a DeleteRecords asked for (`events.Delete`) may be gone: 1, 7 and
8 leave them out. Then come Jepsen's checkers (`simulation.checkers`), which judge the same
run more finely (and say which invariant each subsumes), the KIP-848 members' and share
consumers' own (`simulation.clients.checks`: one owner per partition at a time, one holder
per share record at a time, the delivery limit, no double ACCEPT, no aborted record to
read_committed, every record settled), the streams group's (`streams_invariants`) and the
SASL clients' (`simulation.clients.sasl_checks`: nothing written while WRITE was revoked,
the forbidden topic never served, no session for a wrong password, every acknowledged write
read back).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from simulation.checkers import check_jepsen
from simulation.clients.checks import check_protocol_clients
from simulation.clients.sasl_checks import check_sasl_clients
from simulation.history import History
from simulation.streams_invariants import check_streams
from simulation.verdict import Verdict
from simulation.workload import EVENTS, OUTPUT, TRANSFORM_GROUP

__all__ = ["Verdict", "check_all"]


def check_all(history: History) -> list[Verdict]:
    """The eight invariants, then Jepsen's checkers (`simulation.checkers`)."""
    return [
        _no_acknowledged_record_lost(history),
        _no_duplicate_from_idempotent_producer(history),
        _high_watermarks_never_move_back(history),
        _new_leader_keeps_its_high_watermark(history),
        _committed_offsets_never_move_back(history),
        _one_owner_per_generation(history),
        _read_committed_never_sees_aborted(history),
        _transform_exactly_once(history),
        _no_dirty_read(history),
        *check_jepsen(history),
        *(
            Verdict(f.name, f.held, f.detail)
            for f in check_protocol_clients(
                history.protocol, history.aborted_values, history.final_records
            )
        ),
        *check_streams(history),
        *(
            Verdict(f.name, f.held, f.detail)
            for f in check_sasl_clients(history.protocol.sasl, history.final_records, history.reads)
        ),
    ]


def _no_acknowledged_record_lost(history: History) -> Verdict:
    final = {
        (topic, p, o): v
        for topic, records in history.final_records.items()
        if topic != OUTPUT
        for p, o, v in records
    }
    deleted = history.events.deleted_below()
    lost = [
        k
        for k, v in history.acked_all.items()
        if final.get(k) != v and k[2] >= deleted.get(k[:2], 0)
    ]
    detail = f"{len(history.acked_all)} acknowledged, {len(lost)} lost"
    if lost:
        detail += f" (first: {sorted(lost)[0]})"
    return Verdict("no acknowledged record lost", not lost, detail)


def _no_duplicate_from_idempotent_producer(history: History) -> Verdict:
    counts = Counter(v for _, _, v in history.final_records.get(EVENTS, []) if v.startswith(b"a-"))
    twice = sorted(v for v, n in counts.items() if n > 1)
    detail = f"{len(counts)} distinct, {len(twice)} written twice"
    if twice:
        detail += f" (first: {twice[0]!r})"
    return Verdict("no duplicate from the idempotent producer", not twice, detail)


def _high_watermarks_never_move_back(history: History) -> Verdict:
    """A partition's high watermark, as one consumer sees it, never moves back under one
    leader: Kafka's leader only ever raises it. A new leader starts from the high watermark
    it last heard of as a follower (one fetch behind, or more if it lagged) and Kafka 4
    raises it only once the ISR is back to ``min.insync.replicas`` (KIP-966), so across a
    leader change a consumer may see it lower for a while; nothing below it is lost (the
    dirty-read and lost-write checks say so). A step back counts as a leader change's when
    the leader epoch when it was seen is above the epoch before the higher value was first
    seen (that value's answer may have left before the epoch moved)."""
    back: list[tuple[Any, int, int]] = []
    failovers = 0
    for key, seen in history.high_watermarks.items():
        for j in range(1, len(seen)):
            high, low = seen[j - 1][0], seen[j][0]
            if low >= high:
                continue
            first = j - 1
            while first > 0 and seen[first - 1][0] == high:
                first -= 1
            if seen[j][1] > seen[max(first - 1, 0)][1]:
                failovers += 1
            else:
                back.append((key, high, low))
    count = sum(len(s) for s in history.high_watermarks.values())
    detail = f"{count} observed, {len(back)} back"
    if failovers:
        detail += f" ({failovers} lower after a leader change: allowed)"
    if back:
        detail += f" (first: {back[0][0]} {back[0][1]} -> {back[0][2]})"
    return Verdict("high watermark never moves back", not back, detail)


def _new_leader_keeps_its_high_watermark(history: History) -> Verdict:
    """A broker that becomes a partition's leader starts from the high watermark it had as a
    follower, as its log bounds it (Kafka's ``makeLeader``): read from the simulated
    brokers, since a client cannot tell a forgotten high watermark from one a fetch
    behind (`simulation.broker_probes`)."""
    lower = [s for s in history.leader_starts if s.after < s.before]
    detail = f"{len(history.leader_starts)} leader starts, {len(lower)} below their own"
    if lower:
        s = lower[0]
        detail += (
            f" (first: broker {s.broker} {s.topic}-{s.partition} at leader epoch "
            f"{s.leader_epoch}: {s.before} -> {s.after})"
        )
    return Verdict("a new leader keeps its high watermark", not lower, detail)


def _committed_offsets_never_move_back(history: History) -> Verdict:
    """A commit sent after another was acknowledged never commits a lower offset.

    Only acknowledged commits count, ordered by real time: a commit takes effect between
    its send and its answer, so two whose spans overlap (an answer held on a clogged link
    arrives after a later commit's) have no order to check."""
    back: list[tuple[Any, int, int]] = []
    for key, offsets in history.commits.items():
        spans = history.commit_spans.get(key, [])
        step = _first_step_back(list(zip(offsets, spans, strict=True)))
        if step is not None:
            back.append((key, *step))
    count = sum(len(s) for s in history.commits.values())
    detail = f"{count} commits, {len(back)} back"
    if back:
        detail += f" (first: {back[0][0]} {back[0][1]} -> {back[0][2]})"
    return Verdict("committed offsets never move back", not back, detail)


def _first_step_back(
    commits: list[tuple[int, tuple[float, float]]],
) -> tuple[int, int] | None:
    """(before, after) for the first commit, in send order, whose offset is below that of
    a commit acknowledged before it was sent; None if there is none."""
    by_ack = sorted(commits, key=lambda c: c[1][1])
    highest = -1
    i = 0
    for offset, (sent, _) in sorted(commits, key=lambda c: c[1][0]):
        while i < len(by_ack) and by_ack[i][1][1] < sent:
            highest = max(highest, by_ack[i][0])
            i += 1
        if offset < highest:
            return highest, offset
    return None


def _one_owner_per_generation(history: History) -> Verdict:
    owners: dict[tuple[str, int, tuple[str, int]], set[str]] = {}
    for a in history.assignments:
        for partition in a.partitions:
            owners.setdefault((a.group, a.generation, partition), set()).add(a.member)
    shared = sorted(k for k, members in owners.items() if len(members) > 1)
    generations = len({(a.group, a.generation) for a in history.assignments})
    detail = f"{generations} generations, {len(shared)} partitions owned twice"
    if shared:
        detail += f" (first: {shared[0]})"
    return Verdict("one owner per partition per generation", not shared, detail)


def _read_committed_never_sees_aborted(history: History) -> Verdict:
    final = [v for _, _, v in history.final_records.get(OUTPUT, [])]
    seen = [v for v in history.read_committed_values + final if v in history.aborted_values]
    detail = f"{len(history.aborted_values)} aborted records, {len(seen)} read committed"
    return Verdict("read_committed never reads aborted data", not seen, detail)


def _transform_exactly_once(history: History) -> Verdict:
    outputs = Counter(v for _, _, v in history.final_records.get(OUTPUT, []))
    expected = {
        b"out:%d:%d" % (p, o)
        for p, o, _ in history.final_records.get(EVENTS, [])
        if o < history.final_committed.get((TRANSFORM_GROUP, EVENTS, p), 0)
    }
    missing = expected - set(outputs)
    twice = [v for v, n in outputs.items() if n > 1]
    # an input DeleteRecords took is not in the final log, but its output is
    deleted = history.events.deleted_below()
    extra = {v for v in set(outputs) - expected if not _of_deleted_input(v, deleted)}
    held = not missing and not twice and not extra
    detail = (
        f"{len(expected)} inputs, {len(missing)} missing, {len(twice)} twice, {len(extra)} extra"
    )
    return Verdict("transform output exactly once", held, detail)


def _of_deleted_input(output: bytes, deleted: dict[tuple[str, int], int]) -> bool:
    """Whether ``out:<partition>:<offset>`` names an input a DeleteRecords took (anything
    else in the output, an aborted transaction's ``aborted:...`` leaked, names none)."""
    parts = output.split(b":")
    if len(parts) != 3 or parts[0] != b"out":
        return False
    return int(parts[2]) < deleted.get((EVENTS, int(parts[1])), 0)


def _no_dirty_read(history: History) -> Verdict:
    final = {
        (topic, p, o): v for topic, records in history.final_records.items() for p, o, v in records
    }
    # The final read of OUTPUT is read_committed: only EVENTS' final log is the whole log.
    deleted = history.events.deleted_below()
    checked = {
        k: v for k, v in history.reads.items() if k[0] == EVENTS and k[2] >= deleted.get(k[:2], 0)
    }
    gone = sorted(k for k, v in checked.items() if final.get(k) != v)
    detail = (
        f"{len(checked)} read, {len(gone)} not in the final log, "
        f"{len(history.read_divergence)} read two ways"
    )
    if gone:
        detail += f" (first: {gone[0]})"
    elif history.read_divergence:
        detail += f" (first: {history.read_divergence[0][1]})"
    return Verdict("no dirty read", not gone and not history.read_divergence, detail)
