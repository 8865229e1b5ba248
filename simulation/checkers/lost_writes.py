"""Jepsen's lost writes, per partition: an acknowledged write at or below the highest offset
anyone read (the final read-back included) that nobody read -- at its offset with its
value: a read of another value there does not count. Records below an offset a
DeleteRecords asked for are not lost, answered or not.

With the final read-back among the reads this subsumes invariant 1 (every acknowledged
record in the final log) for every topic, not only ``sim-events``; invariant 1 stays, as
the simpler statement of the same promise.
"""

from __future__ import annotations

from simulation.checkers.observations import SHOWN, Observations, show_read, show_write
from simulation.events import Key
from simulation.history import History
from simulation.verdict import Verdict

NAME = "no lost write (Jepsen)"


def check(history: History, seen: Observations) -> Verdict:
    highest: dict[tuple[str, int], int] = {}
    read: set[tuple[Key, bytes]] = set()
    for r in seen.reads:
        tp = (r.topic, r.partition)
        highest[tp] = max(highest.get(tp, -1), r.offset)
        read.add(((r.topic, r.partition, r.offset), r.value))
    lost = sorted(
        key
        for key, (value, _) in seen.acknowledged.items()
        if key[2] <= highest.get((key[0], key[1]), -1)
        and (key, value) not in read
        and not seen.deleted(key)
    )
    detail = f"{len(seen.acknowledged)} acknowledged, {len(lost)} lost"
    if lost:
        detail += f" (first: {lost[0]})"
    return Verdict(NAME, not lost, detail, tuple(_evidence(history, seen, k) for k in lost[:SHOWN]))


def _evidence(history: History, seen: Observations, key: Key) -> str:
    """The write, the nearest reads of that partition on either side, any delete on it."""
    value, by = seen.acknowledged[key]
    same = [r for r in seen.reads if (r.topic, r.partition) == key[:2]]
    below = max((r for r in same if r.offset < key[2]), key=lambda r: r.offset, default=None)
    above = min((r for r in same if r.offset > key[2]), key=lambda r: r.offset, default=None)
    there = [r for r in same if r.offset == key[2]][:1]
    lines = [f"lost {key[0]}/{key[1]}@{key[2]}", show_write(key, value, by)]
    lines += [show_read(r) for r in (below, *there, above) if r is not None]
    lines += [
        f"{d.at_s:9.3f}s  delete {d.topic}/{d.partition} below {d.offset}"
        for d in history.events.deletes
        if (d.topic, d.partition) == key[:2]
    ]
    return "\n".join(lines)
