"""BUGGIFY (FoundationDB): points where the broker takes a legal but unlikely path, in
simulation only.

A correct broker must keep its promises when a purgatory answers late, when a leader loses
its leadership between two partitions of one produce, when a coordinator's load stops for
a while between two slices, or when a fetch returns less than it could. Real clusters do
all of these, rarely; a simulation makes them common, so the invariants see them.

FoundationDB's rule, kept here: a point fires only in simulation; in each run, each point
is *enabled* with some probability (`ENABLE_PROBABILITY`, drawn once from the run's seed), and
an enabled point then *fires* with some probability each time the code passes it
(`FIRE_PROBABILITY`, or the point's own in `FIRE_PROBABILITIES`, as FoundationDB's
``BUGGIFY_WITH_PROB``: a leader stepping down on a quarter of all appends would be a
different cluster, not a rare path made common). Runs therefore differ in which points are
on, and a point that is on fires often but not always. The seed decides everything: the
same seed buggifies the same way.

The switch is module-level, as FoundationDB's ``BUGGIFY`` macro is global: the
composition root (`broker.app.MiniKafka`, given a `Buggify` by the simulation) installs it
for the cluster's life and removes it when the cluster stops. A real broker never installs
one, and `fires` is then one global read and a comparison with None. This module sits at
``broker/``'s top level beside ``real_clock.py`` and ``ids.py`` for the same reason they do:
every room reads it, and it depends on nothing of the broker's.

The points (`POINTS`), each named where it is passed:

- ``purgatory-completion-delayed``: a DelayedFetch, or a client's DelayedProduce, that
  completes answers after a random virtual delay (up to `MAX_DELAY_S`), as a busy broker's
  response queue would. Not a coordinator's own append: its callback applies the
  coordinator's state, which Kafka does in log order (an offset commit applied after a
  later one would move the committed offset back — seeds 5 and 12 showed it);
- ``leader-step-down-mid-append``: after appending one partition of a produce, its leader
  moves to another live in-sync replica (the controller's election, the ISR unchanged),
  before the rest of the request and before acks=all could be satisfied;
- ``coordinator-load-pause``: a coordinator partition's load runs one unit and waits a
  random virtual delay before its next slice (requests meanwhile get
  COORDINATOR_LOAD_IN_PROGRESS);
- ``fetch-fewer-bytes``: a fetch reads one batch of a partition (the first partition with
  data: KIP-74's minimum) or nothing, where it could have filled ``max_bytes``;
- ``produce-response-delayed``: a produce answered without parking (acks 0 or 1, or an
  error) is answered after a random virtual delay.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

__all__ = [
    "COORDINATOR_LOAD_PAUSE",
    "FETCH_FEWER_BYTES",
    "LEADER_STEP_DOWN_MID_APPEND",
    "POINTS",
    "PRODUCE_RESPONSE_DELAYED",
    "PURGATORY_COMPLETION_DELAYED",
    "Buggify",
    "deferred",
    "delay_s",
    "fires",
    "install",
]

PURGATORY_COMPLETION_DELAYED = "purgatory-completion-delayed"
LEADER_STEP_DOWN_MID_APPEND = "leader-step-down-mid-append"
COORDINATOR_LOAD_PAUSE = "coordinator-load-pause"
FETCH_FEWER_BYTES = "fetch-fewer-bytes"
PRODUCE_RESPONSE_DELAYED = "produce-response-delayed"

#: Every point and what it does, for ``minikafka simulate --list-buggify``.
POINTS: dict[str, str] = {
    PURGATORY_COMPLETION_DELAYED: "a completed DelayedProduce/DelayedFetch answers after a "
    "random virtual delay",
    LEADER_STEP_DOWN_MID_APPEND: "after one partition of a produce is appended, its leader "
    "moves to another live in-sync replica",
    COORDINATOR_LOAD_PAUSE: "a coordinator load runs one unit, then waits a random virtual "
    "delay before its next slice",
    FETCH_FEWER_BYTES: "a fetch reads one batch (or nothing) of a partition where it could "
    "fill max_bytes",
    PRODUCE_RESPONSE_DELAYED: "a produce answered without parking (acks 0/1, errors) is "
    "answered after a random virtual delay",
}

#: FoundationDB's defaults: a point is on in a quarter of the runs, and fires a quarter of
#: the times it is passed.
ENABLE_PROBABILITY = 0.25
FIRE_PROBABILITY = 0.25
#: Points passed on every append or fetch fire less often (each is passed thousands of
#: times a run): a step-down every fifty appends, a short fetch every twenty.
FIRE_PROBABILITIES: dict[str, float] = {
    LEADER_STEP_DOWN_MID_APPEND: 0.02,
    FETCH_FEWER_BYTES: 0.05,
    PRODUCE_RESPONSE_DELAYED: 0.05,
    PURGATORY_COMPLETION_DELAYED: 0.05,
}
#: The longest delay a point adds (virtual seconds).
MAX_DELAY_S = 1.0


class Buggify:
    """Which points are on in one run, and the dice they fire by (both from its seed)."""

    __slots__ = ("_probability", "_rng", "enabled", "fired")

    def __init__(
        self,
        rng: random.Random,
        *,
        enable_probability: float = ENABLE_PROBABILITY,
        fire_probability: float | None = None,
        only: frozenset[str] | None = None,
    ) -> None:
        """``fire_probability``: every point's (None: `FIRE_PROBABILITIES`, else
        `FIRE_PROBABILITY`); ``only``: exactly these points on (tests, a replay)."""
        unknown = (only or frozenset()) - POINTS.keys()
        if unknown:
            raise ValueError(f"no BUGGIFY point {sorted(unknown)[0]!r}; known: {sorted(POINTS)}")
        self._rng = rng
        draws = {point: rng.random() for point in sorted(POINTS)}  # always all: stable dice
        self.enabled = frozenset(
            point
            for point, draw in draws.items()
            if (point in only if only is not None else draw < enable_probability)
        )
        self._probability = {
            point: fire_probability
            if fire_probability is not None
            else FIRE_PROBABILITIES.get(point, FIRE_PROBABILITY)
            for point in self.enabled
        }
        #: How often each point fired (the simulation reports it).
        self.fired: dict[str, int] = dict.fromkeys(sorted(self.enabled), 0)

    def fires(self, point: str) -> bool:
        probability = self._probability.get(point)
        if probability is None or self._rng.random() >= probability:
            return False
        self.fired[point] += 1
        return True

    def delay_s(self) -> float:
        return self._rng.uniform(0.0, MAX_DELAY_S)


_active: Buggify | None = None


def install(buggify: Buggify | None) -> None:
    """The composition root's switch: points fire by ``buggify``'s dice; None: never."""
    global _active
    _active = buggify


def fires(point: str) -> bool:
    """True when the simulation enabled ``point`` and it fires now; False in a real broker."""
    active = _active
    return active is not None and active.fires(point)


def may_fire(point: str) -> bool:
    """Whether ``point`` is on in this run (`fires` may then say yes): a hot loop asks
    once, then `fires` per pass only when it may. `fires` of a point that is off draws
    nothing, so skipping it changes no draw."""
    active = _active
    return active is not None and point in active.enabled


def delay_s() -> float:
    """A random virtual delay for a point that fired (0 when none is installed)."""
    active = _active
    return 0.0 if active is None else active.delay_s()


def deferred(point: str, call: Callable[[], object]) -> None:
    """``call()`` now or, when ``point`` fires, after a random delay on the running loop."""
    if not fires(point):
        call()
        return
    asyncio.get_running_loop().call_later(delay_s(), call)
