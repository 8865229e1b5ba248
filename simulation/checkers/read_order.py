"""Jepsen's gaps and inversions in what each consumer saw.

Within one consumer's run of polls (no seek, no rebalance between them: `EventLog.new_run`)
a partition's offsets must rise, and by exactly the records the consumer could see: none
of the final log's records may lie between two consecutive reads (a *gap*: the consumer
skipped a record it should have been given), nor between a run's known start (a seek) and
its first read. An offset at or below the previous one is an *inversion*. What "could see"
means is the final log of the topic read as the consumer reads it: for read_committed,
without the transaction markers and the aborted records; records below a DeleteRecords'
offset are not in it either, so a jump over deleted records is no gap. (No simulated topic
is compacted; a compacted one would need its cleaned offsets left out the same way.)
"""

from __future__ import annotations

import itertools

from simulation.checkers.observations import FINAL, SHOWN, Observations, show_read
from simulation.events import Read
from simulation.history import History
from simulation.verdict import Verdict

NAME = "no gap or inversion in a consumer's run (Jepsen)"


def check(history: History, seen: Observations) -> Verdict:
    runs: dict[tuple[str, int, str, int], list[Read]] = {}
    for r in seen.reads:
        if r.reader != FINAL and (r.topic, r.partition) in seen.visible:
            runs.setdefault((r.reader, r.run, r.topic, r.partition), []).append(r)
    gaps: list[str] = []
    inversions: list[str] = []
    for (reader, run, topic, partition), reads in runs.items():
        start = history.events.run_starts.get((reader, run), {}).get((topic, partition))
        if start is not None:
            skipped = seen.visible_between(topic, partition, start, reads[0].offset)
            if skipped:
                gaps.append(_gap(f"{reader} run {run} seeked to {start}", skipped, reads[0]))
        for before, after in itertools.pairwise(reads):
            if after.offset <= before.offset:
                inversions.append("\n".join(["inversion", show_read(before), show_read(after)]))
                continue
            skipped = seen.visible_between(topic, partition, before.offset + 1, after.offset)
            if skipped:
                gaps.append(_gap(show_read(before).strip(), skipped, after))
    detail = f"{len(runs)} runs, {len(gaps)} gaps, {len(inversions)} inversions"
    evidence = (gaps[:SHOWN] + inversions[:SHOWN])[:SHOWN]
    return Verdict(NAME, not gaps and not inversions, detail, tuple(evidence))


def _gap(before: str, skipped: list[int], after: Read) -> str:
    shown = ", ".join(str(o) for o in skipped[:5]) + (" ..." if len(skipped) > 5 else "")
    return "\n".join(
        [
            f"gap: {len(skipped)} visible record(s) skipped ({after.topic}/{after.partition}"
            f" offsets {shown})",
            f"           {before}",
            show_read(after),
        ]
    )
