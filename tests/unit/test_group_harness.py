"""Shared test harness for broker/group (no tests here).

A coordinator on a manual clock with real purgatories and timers: tests move time with
``h.advance(ms)``, which steps the clock 1 ms at a time and lets the timers run what
expired, so "completes at 6000 ms" means exactly that.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.group import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    InMemoryGroupLog,
    JoinGroupResult,
    SyncGroupResult,
)
from purgatory import DelayedOperationPurgatory, ManualClock, SystemTimer

E = ErrorCode
PROTOCOLS = [("range", b"range-meta"), ("roundrobin", b"rr-meta")]


@dataclass
class Box:
    """Collects what a response callback was called with."""

    calls: list[Any] = field(default_factory=list)

    def __call__(self, value: Any) -> None:
        self.calls.append(value)

    @property
    def done(self) -> bool:
        return bool(self.calls)

    @property
    def result(self) -> Any:
        assert len(self.calls) == 1, f"expected exactly one response, got {self.calls}"
        return self.calls[0]


class Harness:
    def __init__(self, log: InMemoryGroupLog | None = None, **config: Any) -> None:
        self.clock = ManualClock(0)
        self.timers = [
            SystemTimer(self.clock, name="heartbeat"),
            SystemTimer(self.clock, name="rebalance"),
        ]
        self.heartbeat: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory(
            "Heartbeat", self.timers[0]
        )
        self.rebalance: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory(
            "Rebalance", self.timers[1]
        )
        self.log = log if log is not None else InMemoryGroupLog()
        counter = itertools.count(1)
        self.coord = GroupCoordinator(
            self.clock,
            self.heartbeat,
            self.rebalance,
            config=GroupConfig(**config),
            group_log=self.log,
            uuid_factory=lambda: f"uuid{next(counter)}",
        )

    # ---------------------------------------------------------------- time
    def advance(self, ms: int, step: int = 1) -> None:
        remaining = ms
        while remaining > 0:
            d = min(step, remaining)
            self.clock.advance(d)
            remaining -= d
            for timer in self.timers:
                timer.advance_clock()

    def advance_until(self, predicate: Any, limit_ms: int = 100_000) -> int:
        """Step 1 ms at a time until ``predicate()``; returns the clock then."""
        start = self.clock.now_ms()
        while not predicate():
            assert self.clock.now_ms() - start < limit_ms, "condition never became true"
            self.advance(1)
        return self.clock.now_ms()

    # ---------------------------------------------------------------- APIs
    def join(
        self,
        member_id: str = "",
        group: str = "g",
        instance: str | None = None,
        require_known: bool = False,
        protocols: list[tuple[str, bytes]] | None = None,
        session_ms: int = 10_000,
        rebalance_ms: int = 10_000,
        client_id: str = "client",
        protocol_type: str = "consumer",
        **kw: Any,
    ) -> Box:
        box = Box()
        self.coord.handle_join_group(
            group,
            member_id,
            instance,
            require_known,
            client_id,
            "/127.0.0.1",
            rebalance_ms,
            session_ms,
            protocol_type,
            PROTOCOLS if protocols is None else protocols,
            box,
            **kw,
        )
        return box

    def join_new(self, group: str = "g", **kw: Any) -> str:
        """JoinGroup v4+ dance: MEMBER_ID_REQUIRED, then join with the id. Returns the id
        (the second join is parked; read it with :meth:`join_box`)."""
        first = self.join(group=group, require_known=True, **kw).result
        assert first.error is E.member_id_required
        self.last_join = self.join(first.member_id, group=group, require_known=True, **kw)
        member_id: str = first.member_id
        return member_id

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        group: str = "g",
        instance: str | None = None,
    ) -> Box:
        box = Box()
        self.coord.handle_sync_group(group, generation, member_id, instance, assignments or {}, box)
        return box

    def commit(
        self,
        group: str,
        member_id: str,
        instance: str | None,
        generation: int,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
        **kw: Any,
    ) -> dict[Any, ErrorCode]:
        """OffsetCommit through the in-memory log, which answers at once."""
        box = Box()
        self.coord.handle_commit_offsets(group, member_id, instance, generation, offsets, box, **kw)
        result: dict[Any, ErrorCode] = box.result
        return result

    def heartbeat_(
        self, member_id: str, generation: int, group: str = "g", instance: str | None = None
    ) -> ErrorCode:
        return self.coord.handle_heartbeat(group, member_id, instance, generation)

    def state(self, group: str = "g") -> GroupState:
        g = self.coord.get_group(group)
        assert g is not None
        return g.state

    def stable_group(self, n: int, group: str = "g", **kw: Any) -> tuple[list[str], int]:
        """n dynamic members joined and synced; returns (member ids, generation)."""
        boxes = []
        ids = []
        for _ in range(n):
            ids.append(self.join_new(group=group, **kw))
            boxes.append(self.last_join)
        self.advance_until(lambda: all(b.done for b in boxes))
        results: list[JoinGroupResult] = [b.result for b in boxes]
        generation = results[0].generation_id
        leader = results[0].leader_id
        syncs = [
            self.sync(
                r.member_id,
                generation,
                {m: f"assign-{m}".encode() for m in ids} if r.member_id == leader else None,
                group=group,
            )
            for r in results
        ]
        for s in syncs:
            res: SyncGroupResult = s.result
            assert res.error is E.none
        assert self.state(group) is GroupState.STABLE
        return ids, generation


def no_timer_failures(records: list[logging.LogRecord]) -> None:
    """Timer tasks' exceptions are logged, not raised: a test must look for them."""
    failures = [r for r in records if r.name.startswith("purgatory") and r.levelno >= logging.ERROR]
    assert not failures, [r.getMessage() for r in failures]


@pytest.fixture(autouse=True)
def timer_tasks_must_not_fail(caplog: Any) -> Any:
    """Import into a test module to fail any test during which a timer task raised."""
    yield
    no_timer_failures(caplog.get_records("setup") + caplog.get_records("call"))
