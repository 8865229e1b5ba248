"""The report's and the comparison's tables, from the aggregates of ``fidelity``.

Each side (captured, replayed; or each what-if variant) gets a group of columns; the
sides after the baseline also get their ratio to it (and, on the comparison, the
difference in ms). A ratio more than ``TOLERANCE`` away from 1 is marked on the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from spark_jobs.fidelity import BREAKDOWN
from spark_jobs.render import Column, Table
from spark_jobs.schema import PURGATORY_KIND

__all__ = [
    "TOLERANCE",
    "breakdown_table",
    "delayed_operations_table",
    "fidelity_table",
    "lag_table",
    "side_counts_table",
]

#: A replayed percentile within 10% of the captured one reads as faithful.
TOLERANCE: Final = 0.10
_QS: Final = (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"))


def fidelity_table(
    name: str,
    title: str,
    pivoted: list[dict[str, Any]],
    sides: Sequence[str],
    *,
    key_label: str,
    note: str = "",
    differences: bool = False,
    parked: bool = True,
    client_side: str | None = None,
    reference: Sequence[str] = (),
) -> Table:
    """One row per key; per side: n, p50, p99, p99.9 (ms); per side after the first
    (but the ``reference`` sides, shown as they are): ratios to the first (and
    differences in ms when ``differences``); per side: expiry rate and, when
    ``parked``, requests parked and their time parked p50."""
    base, rest = sides[0], [s for s in sides[1:] if s not in reference]
    columns = [Column("key", key_label)]
    groups: list[tuple[str, int]] = [("", 1)]
    if key_label == "purgatory":
        columns.append(Column("kind", "operation"))
        groups = [("", 2)]
    for side in sides:  # each side's latency, its ratios to the baseline right after it
        columns += [Column(f"{side}__count", "n")]
        columns += [Column(f"{side}__{q}", label) for q, label in _QS]
        groups.append((f"{side} latency (ms)", 4))
        if side not in rest:
            continue
        columns += [Column(f"{side}__r_{q}", f"{label} ratio") for q, label in _QS]
        groups.append((f"{side} / {base}", 3))
        if differences:
            columns += [Column(f"{side}__d_{q}", f"{label} diff") for q, label in _QS[:2]]
            groups.append((f"{side} - {base} (ms)", 2))
    for side in sides:
        columns.append(Column(f"{side}__expiry_rate", "expiry rate", side))
    groups.append(("purgatory expiry", len(sides)))
    if parked:
        for side in sides:
            columns += [
                Column(f"{side}__parked", "parked", side),
                Column(f"{side}__parked_p50", "parked p50", side),
            ]
        groups.append(("parked in a purgatory (n, ms)", 2 * len(sides)))
    if client_side is not None:
        columns.append(Column(f"{client_side}__client_p50", "send->response p50", client_side))
        groups.append(("seen by the replay client", 1))
    rows = []
    for entry in pivoted:
        row: dict[str, Any] = {"key": entry["key"]}
        if key_label == "purgatory":
            row["kind"] = PURGATORY_KIND.get(str(entry["key"]), "")
        for side in sides:
            stats = entry["sides"].get(side) or {}
            for field in ("count", "p50", "p99", "p999", "expiry_rate", "parked", "parked_p50"):
                row[f"{side}__{field}"] = stats.get(field)
            row[f"{side}__client_p50"] = stats.get("client_p50")
        baseline = entry["sides"].get(base) or {}
        for side in rest:
            stats = entry["sides"].get(side) or {}
            for q, _ in _QS:
                value = (entry["ratios"].get(side) or {}).get(q)
                row[f"{side}__r_{q}"] = value
                if value is not None:
                    off = abs(value - 1.0) > TOLERANCE
                    row[f"{side}__r_{q}__class"] = "off" if off else "ok"
                if differences and stats.get(q) is not None and baseline.get(q) is not None:
                    row[f"{side}__d_{q}"] = round(stats[q] - baseline[q], 3)
        rows.append(row)
    rows.sort(key=lambda r: -max(int(r.get(f"{s}__count") or 0) for s in sides))
    return Table(name, title, columns, rows, note=note, groups=groups)


def breakdown_table(stats: list[dict[str, Any]], sides: Sequence[str]) -> Table:
    """Kafka's breakdown per API and side: the mean of each part and of the total."""
    labels = {
        "request_queue_ms": "request queue",
        "local_ms": "local",
        "remote_ms": "remote (parked)",
        "response_queue_ms": "response queue",
        "send_ms": "send",
    }
    columns = [Column("api_name", "API"), Column("side", "side"), Column("count", "n")]
    columns += [Column(f"mean_{c}", labels[c], "mean ms") for c in BREAKDOWN]
    columns.append(Column("mean_total_ms", "sum of the parts", "mean ms"))
    order = {side: i for i, side in enumerate(sides)}
    rows = []
    for s in sorted(stats, key=lambda r: (str(r["key"]), order.get(r["side"], 99))):
        if s.get(f"mean_{BREAKDOWN[0]}") is None:
            continue
        row = {"api_name": s["key"], "side": s["side"], "count": s["count"]}
        parts = [s.get(f"mean_{c}") or 0.0 for c in BREAKDOWN]
        row.update({f"mean_{c}": s.get(f"mean_{c}") for c in BREAKDOWN})
        row["mean_total_ms"] = round(sum(parts), 3)
        rows.append(row)
    return Table(
        "breakdown",
        "Kafka's timing breakdown per API (mean ms)",
        columns,
        rows,
        note="Means, so that the parts add up to the mean total time. Remote time is the "
        "time parked in a purgatory.",
    )


def delayed_operations_table(rows: list[dict[str, Any]], note: str) -> Table:
    columns = [
        Column("kind", "operation"),
        Column("traffic", "traffic"),
        Column("side", "side"),
        Column("created", "created"),
        Column("completed", "completed"),
        Column("expired", "expired"),
        Column("expiry_rate", "expiry rate"),
        Column("p50_wait_ms", "parked p50", "ms"),
        Column("p99_wait_ms", "parked p99", "ms"),
        Column("max_wait_ms", "parked max", "ms"),
    ]
    return Table(
        "delayed_operations", "Delayed operations (purgatory events)", columns, rows, note=note
    )


def lag_table(rows: list[dict[str, Any]]) -> Table:
    columns = [
        Column("scope", "API"),
        Column("count", "n"),
        Column("p50", "p50", "ms"),
        Column("p99", "p99", "ms"),
        Column("max", "max", "ms"),
    ]
    return Table(
        "schedule_lag",
        "Replay schedule lag: actual - planned send (ms)",
        columns,
        rows,
        note="How late the replay sent each client request: waiting for the answers its "
        "client had when it was captured shows here.",
    )


def side_counts_table(name: str, title: str, rows: list[dict[str, Any]], note: str = "") -> Table:
    """Counts per API and reason (skips, errors)."""
    columns = [Column("api_name", "API"), Column("reason", "reason"), Column("count", "n")]
    return Table(name, title, columns, rows, note=note)
