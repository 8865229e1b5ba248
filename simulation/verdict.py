"""`Verdict`: one invariant's or checker's answer on a run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str
    held: bool
    detail: str
    #: The smallest pieces of history that show the first violations (one string each,
    #: lines of events); empty when the verdict held.
    evidence: tuple[str, ...] = ()
