"""One seed's run as a Spark task: the seed's own command in a child process, read back.

The task runs ``python -m minikafka simulate --seed N ... --row FILE`` -- the command a user
replays the seed with, as that command's own child (`simulation.command.run_pinned`) -- so
the run gets the pinned hash seed and address-space layout that command gives it, whatever
the Python worker it was forked from. The row and a broken run's history come back to the
driver in the task's result (`SeedRun`), so no worker needs the driver's filesystem.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulation.command import run_pinned

__all__ = ["SEED_TIMEOUT_S", "SeedRun", "SeedTask", "run_seed_task"]

#: A seed that has not ended in this long is stopped and reported as a failed task.
SEED_TIMEOUT_S = 3600.0


@dataclass(frozen=True, slots=True)
class SeedTask:
    """One run of one seed: the simulate options shared by the campaign, and which run."""

    seed: int
    options: tuple[str, ...]
    attempt: int = 0


@dataclass(slots=True)
class SeedRun:
    """What a task sent back: the row, a broken run's history (JSON text), or an error."""

    task: SeedTask
    row: dict[str, Any] = field(default_factory=dict)
    history: str | None = None
    error: str | None = None

    @property
    def held(self) -> bool:
        return self.error is None and bool(self.row.get("held"))


def run_seed_task(task: SeedTask) -> SeedRun:
    """In a Spark task: the seed's own command in a child process; its row read back."""
    with tempfile.TemporaryDirectory(prefix="minikafka-seed-") as tmp:
        row_path = Path(tmp) / "row.json"
        argv = ["simulate", "--seed", str(task.seed), *task.options, "--row", str(row_path)]
        try:
            done = run_pinned(argv, capture_output=True, text=True, timeout=SEED_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return SeedRun(task, error=f"no end after {SEED_TIMEOUT_S:.0f} s")
        if not row_path.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return SeedRun(task, error=f"exit {done.returncode}: {tail[0][:300]}")
        row = json.loads(row_path.read_text(encoding="utf-8"))
        history_path = row_path.with_name(row_path.name + ".history.json")
        history = history_path.read_text(encoding="utf-8") if history_path.exists() else None
        return SeedRun(task, row=row, history=history)
