"""One simulated run as data: the row a campaign keeps per seed, and a broken run's history.

``minikafka simulate --seed N --row FILE`` writes the row as JSON (and, when an invariant
broke, the whole history beside it as ``FILE.history.json``), so a campaign's Spark task can
run the very command a user replays a seed with, in its own process with the hash seed and
address-space layout that command pins, and read back what happened.

The row: seed, digest, whether every invariant held, each invariant's verdict and detail,
virtual and wall seconds, the faults applied, and the command that replays the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulation.history import History

if TYPE_CHECKING:
    from simulation.scenario import SimulationResult

__all__ = ["history_document", "row_of", "write_row"]


def row_of(result: SimulationResult, replay: str) -> dict[str, Any]:
    """The JSON row of a run."""
    return {
        "seed": result.seed,
        "digest": result.digest,
        "held": result.held,
        "invariants": {
            v.name: {"held": v.held, "detail": v.detail, "evidence": list(v.evidence)}
            for v in result.verdicts
        },
        "virtual_s": round(result.virtual_s, 3),
        "wall_s": round(result.wall_s, 3),
        "faults": list(result.history.faults),
        "replay": replay,
    }


def _text(value: bytes) -> str:
    return value.decode("utf-8", "backslashreplace")


def history_document(history: History) -> dict[str, Any]:
    """Everything the clients saw, as JSON: what a broken seed's reader starts from."""
    return {
        "faults": list(history.faults),
        "acked_all": [
            {"topic": t, "partition": p, "offset": o, "value": _text(v)}
            for (t, p, o), v in sorted(history.acked_all.items())
        ],
        "acked_one": history.acked_one,
        "send_failures": dict(sorted(history.send_failures.items())),
        "client_errors": dict(sorted(history.client_errors.items())),
        "transactions": dict(sorted(history.transactions.items())),
        "high_watermarks": [
            {"consumer": c, "topic": t, "partition": p, "seen": seen}
            for (c, t, p), seen in sorted(history.high_watermarks.items())
        ],
        "commits": [
            {"group": g, "topic": t, "partition": p, "offsets": offsets}
            for (g, t, p), offsets in sorted(history.commits.items())
        ],
        "assignments": [
            {
                "group": a.group,
                "generation": a.generation,
                "member": a.member,
                "partitions": [list(tp) for tp in a.partitions],
            }
            for a in history.assignments
        ],
        "aborted_values": sorted(_text(v) for v in history.aborted_values),
        "read_committed_values": [_text(v) for v in history.read_committed_values],
        "final_records": {
            topic: [[p, o, _text(v)] for p, o, v in records]
            for topic, records in sorted(history.final_records.items())
        },
        "transactions_log": [
            {
                "name": t.name,
                "outcome": t.outcome,
                "end_sent_at_s": t.end_sent_at_s,
                "reads": [list(k) for k in t.reads],
                "writes": [[*k, _text(v)] for k, v in t.writes],
            }
            for t in history.events.txns
        ],
        "deletes": [
            {"topic": d.topic, "partition": d.partition, "offset": d.offset, "at_s": d.at_s}
            for d in history.events.deletes
        ],
        "final_committed": [
            {"group": g, "topic": t, "partition": p, "offset": o}
            for (g, t, p), o in sorted(history.final_committed.items())
        ],
        "streams": [
            {
                "member": a.member,
                "at_s": a.at_s,
                "event": a.event,
                "member_epoch": a.member_epoch,
                **{kind: [f"{s}_{p}" for s, p in getattr(a, kind)] for kind in _TASK_KINDS},
            }
            for a in history.streams
        ],
        "streams_final": {
            member: {
                "active": [f"{s}_{p}" for s, p in active],
                "standby": [f"{s}_{p}" for s, p in standby],
            }
            for member, (active, standby) in sorted(history.streams_final.items())
        },
    }


_TASK_KINDS = ("active", "standby", "warmup")


def write_row(path: Path, result: SimulationResult, replay: str) -> None:
    """The row at ``path``; a broken run's history beside it (``<path>.history.json``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(row_of(result, replay)) + "\n", encoding="utf-8")
    if not result.held:
        history = path.with_name(path.name + ".history.json")
        history.write_text(json.dumps(history_document(result.history)) + "\n", encoding="utf-8")
