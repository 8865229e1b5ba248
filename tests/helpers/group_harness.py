"""A group coordinator and its group metadata manager on a manual clock, for unit tests.

Real purgatories and timers: tests move time with ``h.advance(ms)``, which steps the
clock 1 ms at a time and lets the timers run what expired, so "completes at 6000 ms"
means exactly that. The manager writes to an :class:`InMemoryGroupLog` (``h.log``),
which answers appends at once unless told to hold them, as a lagging ISR would.

``Request`` stands in for a request context: it records where the coordinator says the
request waits (``parked_in``) and how it left (``purgatory_done``).
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field, fields
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.coordinator.coordinator_loader import LoadScheduler
from broker.group import (
    GroupConfig,
    GroupCoordinator,
    GroupMetadataManager,
    GroupState,
    InMemoryGroupLog,
    JoinGroupParams,
    JoinGroupResult,
    OffsetConfig,
    SyncGroupResult,
)
from broker.server.purgatories import PurgatoryName, PurgatoryOutcome
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


@dataclass
class Request:
    """A ``ParkedRequest``: where the request waited, and every outcome it was told."""

    connection_id: str = "test-connection"
    correlation_id: int = 0
    purgatories: list[PurgatoryName] = field(default_factory=list)
    outcomes: list[PurgatoryOutcome] = field(default_factory=list)

    def parked_in(self, purgatory: PurgatoryName) -> None:
        self.purgatories.append(purgatory)

    def purgatory_done(self, outcome: PurgatoryOutcome) -> None:
        self.outcomes.append(outcome)

    @property
    def purgatory(self) -> PurgatoryName | None:
        """Where it waited last (what ``RequestTiming`` keeps)."""
        return self.purgatories[-1] if self.purgatories else None

    @property
    def outcome(self) -> PurgatoryOutcome | None:
        """How it left, last said (what ``RequestTiming`` keeps)."""
        return self.outcomes[-1] if self.outcomes else None


def _split_config(config: dict[str, Any]) -> tuple[GroupConfig, OffsetConfig]:
    group_names = {f.name for f in fields(GroupConfig)}
    offset_names = {f.name for f in fields(OffsetConfig)}
    unknown = set(config) - group_names - offset_names
    assert not unknown, f"unknown config {unknown}"
    return (
        GroupConfig(**{k: v for k, v in config.items() if k in group_names}),
        OffsetConfig(**{k: v for k, v in config.items() if k in offset_names}),
    )


class Harness:
    def __init__(
        self,
        log: InMemoryGroupLog | None = None,
        load_scheduler: LoadScheduler | None = None,
        **config: Any,
    ) -> None:
        self.clock = ManualClock(0)
        self.scheduler = SystemTimer(self.clock, name="scheduler")
        self.timers = [
            SystemTimer(self.clock, name="heartbeat"),
            SystemTimer(self.clock, name="rebalance"),
            self.scheduler,
        ]
        self.heartbeat: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory(
            "Heartbeat", self.timers[0]
        )
        self.rebalance: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory(
            "Rebalance", self.timers[1]
        )
        self.log = log if log is not None else InMemoryGroupLog()
        self.metadata = ClusterMetadata()
        group_config, offset_config = _split_config(config)
        counter = itertools.count(1)
        self.manager = GroupMetadataManager(
            0,
            offset_config,
            self.clock,
            self.metadata,
            self.log,
            self.scheduler,
            uuid_factory=lambda: f"uuid{next(counter)}",
            load_scheduler=load_scheduler,
        )
        self.coord = GroupCoordinator(group_config, self.heartbeat, self.rebalance, self.manager)

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

    # ------------------------------------------------------------- loading
    def load(self) -> None:
        """After a restart on the same log: become the leader of every partition the log
        has records of, and load them (as the manager does when leadership arrives)."""
        for partition in sorted(self.log.partitions):
            assert self.manager.load_groups_for_partition(partition, self.coord.on_group_loaded)

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
        request: Request | None = None,
        **kw: Any,
    ) -> Box:
        box = Box()
        params = JoinGroupParams(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            require_known_member_id=require_known,
            client_id=client_id,
            client_host="/127.0.0.1",
            rebalance_timeout_ms=rebalance_ms,
            session_timeout_ms=session_ms,
            protocol_type=protocol_type,
            protocols=tuple(PROTOCOLS if protocols is None else protocols),
            **kw,
        )
        self.coord.handle_join_group(params, box, request)
        return box

    def join_new(self, group: str = "g", **kw: Any) -> str:
        """JoinGroup v4+ dance: MEMBER_ID_REQUIRED, then join with the id. Returns the id
        (the second join is parked; read it with :attr:`last_join`)."""
        request = kw.pop("request", None)
        first = self.join(group=group, require_known=True, **kw).result
        assert first.error is E.member_id_required
        self.last_join = self.join(
            first.member_id, group=group, require_known=True, request=request, **kw
        )
        member_id: str = first.member_id
        return member_id

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        group: str = "g",
        instance: str | None = None,
        request: Request | None = None,
    ) -> Box:
        box = Box()
        self.coord.handle_sync_group(
            group, generation, member_id, instance, assignments or {}, box, parked_request=request
        )
        return box

    def commit_box(
        self,
        group: str,
        member_id: str,
        instance: str | None,
        generation: int,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
        **kw: Any,
    ) -> Box:
        box = Box()
        self.coord.handle_commit_offsets(group, member_id, instance, generation, offsets, box, **kw)
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
        result: dict[Any, ErrorCode] = self.commit_box(
            group, member_id, instance, generation, offsets, **kw
        ).result
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
