"""BUGGIFY: points fire only while a simulation's `Buggify` is installed, as its seed says;
each point leaves the broker on a legal path."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator

import pytest

from broker import buggify
from broker.buggify import (
    COORDINATOR_LOAD_PAUSE,
    LEADER_STEP_DOWN_MID_APPEND,
    POINTS,
    PURGATORY_COMPLETION_DELAYED,
    Buggify,
)
from broker.cluster.cluster_metadata import ClusterMetadata
from broker.cluster.controller import Controller
from broker.coordinator.coordinator_loader import EventLoopLoadScheduler, LoadJob, LoadSteps
from virtual_time.loop import run_simulated


@pytest.fixture(autouse=True)
def _uninstalled() -> Iterator[None]:
    yield
    buggify.install(None)


def test_nothing_fires_without_a_simulation() -> None:
    assert not any(buggify.fires(point) for point in POINTS for _ in range(100))
    assert buggify.delay_s() == 0.0


def test_the_seed_decides_which_points_are_on_and_when_they_fire() -> None:
    def draws(seed: int) -> tuple[frozenset[str], list[bool]]:
        bugs = Buggify(random.Random(seed))
        return bugs.enabled, [bugs.fires(p) for p in sorted(POINTS) for _ in range(20)]

    assert draws(5) == draws(5)
    assert len({draws(seed)[0] for seed in range(40)}) > 5  # runs differ in what is on


def test_an_enabled_point_fires_some_of_the_times_it_is_passed() -> None:
    bugs = Buggify(random.Random(1), only=frozenset({COORDINATOR_LOAD_PAUSE}))
    buggify.install(bugs)
    fired = sum(buggify.fires(COORDINATOR_LOAD_PAUSE) for _ in range(1000))
    assert 150 < fired < 350  # a quarter
    assert bugs.fired == {COORDINATOR_LOAD_PAUSE: fired}
    assert not any(buggify.fires(LEADER_STEP_DOWN_MID_APPEND) for _ in range(100))


def test_an_unknown_point_is_refused() -> None:
    with pytest.raises(ValueError, match="no BUGGIFY point"):
        Buggify(random.Random(1), only=frozenset({"no-such-point"}))


def test_a_deferred_completion_runs_later_in_virtual_time_and_in_one_piece() -> None:
    async def complete() -> tuple[float, list[float]]:
        loop = asyncio.get_running_loop()
        buggify.install(
            Buggify(
                random.Random(2),
                only=frozenset({PURGATORY_COMPLETION_DELAYED}),
                fire_probability=1.0,
            )
        )
        answered: list[float] = []
        buggify.deferred(PURGATORY_COMPLETION_DELAYED, lambda: answered.append(loop.time()))
        assert not answered  # not now
        await asyncio.sleep(buggify.MAX_DELAY_S)
        return loop.time(), answered

    _, answered = run_simulated(complete(), seed=1)
    assert len(answered) == 1 and 0 < answered[0] <= buggify.MAX_DELAY_S


def test_a_paused_coordinator_load_still_loads_everything_in_order() -> None:
    def steps(name: str, out: list[str]) -> LoadSteps:
        for i in range(5):
            out.append(f"{name}{i}")
            yield 1

    async def load() -> tuple[list[str], float]:
        loop = asyncio.get_running_loop()
        buggify.install(
            Buggify(random.Random(3), only=frozenset({COORDINATOR_LOAD_PAUSE}), fire_probability=1)
        )
        out: list[str] = []
        scheduler = EventLoopLoadScheduler(clock_s=loop.time)
        jobs = [LoadJob("a", steps("a", out)), LoadJob("b", steps("b", out))]
        for job in jobs:
            scheduler.schedule(job)
        while scheduler.pending:
            await asyncio.sleep(0.1)
        return out, loop.time()

    out, took = run_simulated(load(), seed=2)
    assert out == [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)]
    assert took > 0  # it paused between slices (without BUGGIFY: one slice, no time)


def test_a_leader_steps_down_to_another_live_in_sync_replica_and_the_isr_stays() -> None:
    cluster = ClusterMetadata()
    for broker in range(3):
        cluster.register_broker(broker, "127.0.0.1", 9092 + broker)
    cluster.create_topic("t", 1, 3, {})
    controller = Controller(cluster)
    state = cluster.topics["t"].partitions[0]
    leader, epoch, isr = state.leader, state.leader_epoch, list(state.isr)
    assert controller.move_leader_away("t", 0, leader)
    assert state.leader != leader and state.leader in isr
    assert state.isr == isr and state.leader_epoch > epoch
    assert not controller.move_leader_away("t", 0, leader)  # no longer its leader
