"""The page a campaign ends with (``campaign.md``): what held, what broke, how to replay it.

Written for the person who started the campaign and comes back to it: the counts first, then
each invariant with the seeds that broke it (the first one's replay command ready to paste),
any seed whose two runs gave two digests (``--check-determinism``), failed tasks, and the
spread of wall time and of the virtual-to-wall ratio over the seeds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from whatif.seed_runs import SeedRun

__all__ = ["campaign_page", "divergent_seeds"]


def divergent_seeds(runs: Sequence[SeedRun]) -> dict[int, list[str]]:
    """Seeds run more than once whose digests differ: seed -> the digests, in run order."""
    digests: dict[int, list[str]] = {}
    for run in runs:
        if run.error is None:
            digests.setdefault(run.task.seed, []).append(str(run.row["digest"]))
    return {seed: found for seed, found in digests.items() if len(set(found)) > 1}


def _broken_by_invariant(runs: Sequence[SeedRun]) -> dict[str, list[SeedRun]]:
    broken: dict[str, list[SeedRun]] = {}
    for run in runs:
        if run.error is not None or run.task.attempt:
            continue
        for name, verdict in run.row["invariants"].items():
            broken.setdefault(name, [])
            if not verdict["held"]:
                broken[name].append(run)
    return broken


def _spread(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"min {min(values):.1f}, median {statistics.median(values):.1f}, max {max(values):.1f}"


def campaign_page(runs: Sequence[SeedRun], command: str, master: str, wall_s: float) -> str:
    first = [r for r in runs if r.task.attempt == 0]
    done = [r for r in first if r.error is None]
    held = [r for r in done if r.held]
    failed = [r for r in runs if r.error is not None]
    lines = [
        "# Simulation campaign",
        "",
        f"`{command}` on {master}: {len(first)} seeds, {len(held)} held every invariant, "
        f"{len(done) - len(held)} broke one, {len(failed)} runs failed; {wall_s:.1f} s wall.",
        "",
        "| invariant | seeds that broke it | first | replay the first |",
        "|---|---|---|---|",
    ]
    for name, broke in _broken_by_invariant(runs).items():
        if broke:
            first_run = broke[0]
            lines.append(
                f"| {name} | {len(broke)} | {first_run.task.seed} | `{first_run.row['replay']}` |"
            )
        else:
            lines.append(f"| {name} | 0 | - | - |")
    lines.append("")
    divergent = divergent_seeds(runs)
    if any(r.task.attempt for r in runs):
        twice = len({r.task.seed for r in runs if r.task.attempt})
        which = "; ".join(f"seed {s}: {' vs '.join(d)}" for s, d in divergent.items())
        lines += [
            f"Determinism: {twice} seeds run twice, {len(divergent)} gave two digests"
            + (f" ({which})." if which else "."),
            "",
        ]
    for run in failed:
        lines.append(f"- seed {run.task.seed} run {run.task.attempt + 1} failed: {run.error}")
    walls = [float(r.row["wall_s"]) for r in done]
    ratios = [float(r.row["virtual_s"]) / w for r, w in zip(done, walls, strict=True) if w > 0]
    lines += [
        f"Wall seconds per seed: {_spread(walls)}. Virtual/wall: {_spread(ratios)}.",
        "",
        "Rows: `rows.jsonl`; every run: `campaign.json`; a broken seed's history and replay "
        "command: `failures/seed-N/`.",
        "",
    ]
    return "\n".join(lines)
