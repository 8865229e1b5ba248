"""Jepsen's aborted and precommitted reads, for read_committed consumers.

An *aborted read*: a read_committed consumer was given a record of a transaction its
producer aborted (EndTxn(abort) answered, or abandoned before its commit was asked for and
aborted by the next InitProducerId). A *precommitted read*: it was given a record of a
transaction before that transaction's commit was asked for (the read's virtual time is
before the client sent EndTxn(commit)): the last stable offset let it through early.

This subsumes invariant 6 (no ``aborted:`` value read committed), which only knows the
values the transform writes on purpose before aborting; here every record of every
aborted transaction counts, matched by offset and value.
"""

from __future__ import annotations

from simulation.checkers.observations import SHOWN, Observations, show_read, show_write
from simulation.events import Read, Txn
from simulation.history import History
from simulation.verdict import Verdict

NAME = "no aborted or precommitted read (Jepsen)"


def check(history: History, seen: Observations) -> Verdict:
    aborted: list[tuple[Read, Txn]] = []
    early: list[tuple[Read, Txn]] = []
    checked = 0
    for r in seen.reads:
        if not r.read_committed:
            continue
        txn = seen.writer.get(((r.topic, r.partition, r.offset), r.value))
        if txn is None:
            continue
        checked += 1
        if txn.outcome == "aborted":
            aborted.append((r, txn))
        elif txn.end_sent_at_s is None or r.at_s < txn.end_sent_at_s:
            early.append((r, txn))
    evidence = [_show("aborted read", r, t) for r, t in aborted[:SHOWN]]
    evidence += [_show("precommitted read", r, t) for r, t in early[: SHOWN - len(evidence)]]
    detail = (
        f"{checked} transactional records read committed, {len(aborted)} aborted, "
        f"{len(early)} precommitted"
    )
    return Verdict(NAME, not aborted and not early, detail, tuple(evidence))


def _show(kind: str, r: Read, txn: Txn) -> str:
    end = "never" if txn.end_sent_at_s is None else f"{txn.end_sent_at_s:.3f}s"
    lines = [f"{kind}: {txn.name} ({txn.outcome}; end asked for at {end})"]
    key = (r.topic, r.partition, r.offset)
    lines += [show_write(k, v, txn.name) for k, v in txn.writes if k == key]
    lines.append(show_read(r))
    return "\n".join(lines)
