"""An invariant's verdict on a run (its own module: every checker module returns them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str
    held: bool
    detail: str
