"""A share partition's state writes, for unit tests on the manual clock: each write is
recorded and answered at once (``made``), or kept for the test to answer (``held``)."""

from __future__ import annotations

from broker.share.share_partition import StateWrite, WriteDone
from broker.share_coordinator.share_state_records import PersisterStateBatch

Writes = list[tuple[int, tuple[PersisterStateBatch, ...]]]


def recording(writes: Writes, held: list[WriteDone] | None = None) -> StateWrite:
    """An ``on_write`` that appends (start offset, batches) to ``writes`` and answers
    "written" at once -- or, given ``held``, leaves the answer to the test."""

    def on_write(
        start: int, batches: tuple[PersisterStateBatch, ...], done: WriteDone | None
    ) -> None:
        writes.append((start, batches))
        if done is None:
            return
        if held is None:
            done(True)
        else:
            held.append(done)

    return on_write
