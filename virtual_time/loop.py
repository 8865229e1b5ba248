"""An asyncio event loop on a virtual clock: idle time costs nothing, ties follow a seed.

Theory of operation. `asyncio.BaseEventLoop` already separates the three things a loop does:
run what is ready, ask its selector for I/O (waiting at most until the next timer), and move
the timers that are due into the ready queue. `SimulatedEventLoop` keeps all of that and
replaces only the selector and the clock:

- `time()` is a number this loop owns (`now`), not `time.monotonic()`;
- there are no file descriptors: the in-memory network (`network.py`) delivers bytes by
  scheduling callbacks, so "waiting for I/O" is always "waiting for the next timer";
- so `_run_once` does not wait for I/O. It advances `now` to the earliest timer, then moves
  every timer due at that instant into the ready queue itself, in an order drawn from the
  seed — timers due at the same virtual instant are the simulation's only real source of
  interleaving, and their order is the one thing a seed should decide. Callbacks scheduled
  with `call_soon` keep asyncio's first-in-first-out promise (streams and futures rely on it).

The timer heap holds ``(when, seq, handle)`` entries, ``seq`` the timer's creation number, so
that the heap compares in C and its pop order is a function of the timers alone: the seed's
draws for a tie are handed out in creation order, whatever shape the heap has (asyncio's heap
of handles pops equal times in an order its history decides, so no cancelled timer could
leave it early without moving every later tie).

When nothing is ready and no timer is pending while ``run_until_complete`` still waits, the
simulation can never make progress: `SimulationStalled` says so at once, where a real loop
would hang forever.

Why not a library: `looptime` (the maintained one) fast-forwards a real selector loop when it
is idle, but it still polls real sockets, whose readiness order the kernel decides — the
runs are fast but not reproducible. Once the network is in memory there is nothing left to
poll, and the loop is the hundred lines below. Work sent to a thread (`run_in_executor`, the
log cleaner's) runs inline: threads run outside virtual time and in an order no seed decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import heapq
import itertools
import math
import random
from asyncio import format_helpers
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from contextvars import copy_context
from heapq import heappop, heappush
from typing import Any, TypeVar

from virtual_time.determinism import DEFAULT_EPOCH_S, pinned_process
from virtual_time.network import LatencyModel, SimNetwork, SimServer, SimTransport

_T = TypeVar("_T")

# The least the virtual clock moves when the loop waits for a timer (see `_advance`).
MIN_STEP_S = 1e-6
# `asyncio.base_events`' constants, which `_run_once` keeps (they are private there).
_MIN_SCHEDULED_TIMER_HANDLES = 100
_MIN_CANCELLED_TIMER_HANDLES_FRACTION = 0.5
_MAXIMUM_SELECT_TIMEOUT_S = 24 * 3600.0


_Handle = asyncio.Handle
_new_handle = object.__new__  # a handle's slots set one by one: see `call_soon`


_TimerHandle = asyncio.TimerHandle  # built slot by slot too (see `call_at`)


class SimulationStalled(RuntimeError):
    """Nothing is runnable and no timer is pending, yet the awaited future is not done."""


#: Loop iterations within `LIVELOCK_WINDOW_S` of virtual time before the run is declared
#: livelocked. A healthy run makes ~1 000 iterations a virtual second; a spin either never
#: waits (callbacks always ready) or waits the least step (`MIN_STEP_S`) each time (a
#: deadline polled against a clock that barely moves): a million iterations take seconds
#: of CPU and, at the least step, a second of virtual time.
LIVELOCK_ITERATIONS = 1_000_000
LIVELOCK_WINDOW_S = 2.0


class SimulationLivelock(RuntimeError):
    """The loop ran `LIVELOCK_ITERATIONS` iterations within `LIVELOCK_WINDOW_S` of virtual
    time: something reschedules itself at once or at the least step, for ever (a retry
    without backoff, a callback chain that never awaits time). A real loop would burn a
    core while its clock moves on; here the clock hardly moves, so the run never ends.
    Or (``overran``) the clock passed the run's deadline: the run waits for something that
    never comes while its timers keep the clock moving."""

    def __init__(self, virtual_s: float, spinning: list[str], overran: bool = False) -> None:
        self.virtual_s = virtual_s
        self.spinning = spinning
        what = (
            "the run passed its deadline"
            if overran
            else f"{LIVELOCK_ITERATIONS} loop iterations within {LIVELOCK_WINDOW_S:g} s"
        )
        super().__init__(
            f"livelock at virtual t={virtual_s:.6f}s: {what}; "
            f"{'waiting' if overran else 'ready'}: {'; '.join(spinning) or '-'}"
        )


class SimulatedEventLoop(asyncio.BaseEventLoop):
    """An event loop whose `time()` is virtual; see the module docstring."""

    def __init__(
        self, seed: int, start_s: float = 0.0, latency: LatencyModel | None = None
    ) -> None:
        super().__init__()
        self.now = start_s
        self.seed = seed
        self.random = random.Random(seed)
        self.network = SimNetwork(self, random.Random(f"{seed}/network"), latency)
        self._clock_resolution = 1e-9
        # when the current streak of iterations began, and its length (a livelock's)
        self._streak_from_s = start_s
        self.deadline_s = math.inf  # virtual time a run must end by (`run_simulated`)
        self._streak = 0
        self.timer_ties = 0
        # ``_scheduled`` (asyncio's name) holds (when, seq, handle): see the module docstring
        self._timer_seq = itertools.count()

    def time(self) -> float:
        return self.now

    def _advance(self, timeout: float) -> None:
        """Jump to the earliest timer exactly (``now + (when - now)`` can miss it by an ulp),
        and never by less than `MIN_STEP_S`.

        The minimum step is time passing while code runs. Without it a client that polls the
        clock for a deadline spins forever at one instant: aiokafka's fetcher waits
        ``backoff - (monotonic() - created)``, which float rounding can leave at 1e-17 s —
        a timer due "now" that finds the clock unmoved and sets another.
        """
        scheduled = self._scheduled  # type: ignore[attr-defined]
        target = self.now + timeout
        if scheduled and scheduled[0][0] <= target + 1e-9:
            target = scheduled[0][0]
        self.now = max(target, self.now + MIN_STEP_S)

    def pending_timers(self) -> list[asyncio.TimerHandle]:
        """The timers not yet run, cancelled ones included until the heap drops them."""
        return [entry[2] for entry in self._scheduled]  # type: ignore[attr-defined]

    def _run_once(self) -> None:
        """One iteration, as `asyncio.BaseEventLoop._run_once` runs it, without what a loop
        with no descriptors and a clock it owns does not need (the selector call, the event
        processing, the debug timing): the same steps in the same order, so the same seed
        gives the same run. A what-if replay spends a few percent of its time here.
        """
        base: Any = self  # asyncio's private state, which typeshed does not declare
        scheduled: list[Any] = base._scheduled
        ready = base._ready
        count = len(scheduled)
        if (
            count > _MIN_SCHEDULED_TIMER_HANDLES
            and base._timer_cancelled_count / count > _MIN_CANCELLED_TIMER_HANDLES_FRACTION
        ):
            kept = []
            for entry in scheduled:
                handle = entry[2]
                if handle._cancelled:
                    handle._scheduled = False
                else:
                    kept.append(entry)
            heapq.heapify(kept)
            base._scheduled = scheduled = kept
            base._timer_cancelled_count = 0
        else:
            while scheduled and scheduled[0][2]._cancelled:
                base._timer_cancelled_count -= 1
                heappop(scheduled)[2]._scheduled = False
        # A livelock (`SimulationLivelock`): too many iterations within one window of time.
        if self.now - self._streak_from_s > LIVELOCK_WINDOW_S:
            self._streak_from_s = self.now
            self._streak = 0
            if self.now > self.deadline_s:
                raise SimulationLivelock(self.now, self._describe_pending(), overran=True)
        else:
            self._streak += 1
            if self._streak > LIVELOCK_ITERATIONS:
                raise SimulationLivelock(self.now, self._describe_ready())
        if not ready:
            if base._stopping:
                self._advance(0.0)
            elif scheduled:
                # `_advance` inlined (it runs at nearly every iteration), the same arithmetic.
                now = self.now
                when = scheduled[0][0]
                target = now + min(max(0.0, when - now), _MAXIMUM_SELECT_TIMEOUT_S)
                if when <= target + 1e-9:
                    target = when
                self.now = max(target, now + MIN_STEP_S)
            else:
                raise SimulationStalled(
                    f"nothing runnable and no timer pending at virtual t={self.now:.6f}s"
                )
        if scheduled and scheduled[0][0] <= self.now:  # (most iterations have none due)
            self._release_due_timers()
        end_time = self.now + base._clock_resolution
        while scheduled and scheduled[0][0] < end_time:
            handle = heappop(scheduled)[2]
            handle._scheduled = False
            ready.append(handle)
        popleft = ready.popleft
        for _ in range(len(ready)):
            handle = popleft()
            if handle._cancelled:
                continue
            # `asyncio.Handle._run`, inlined: a frame less for every callback of the run.
            try:
                handle._context.run(handle._callback, *handle._args)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._report_callback_error(handle, exc)

    def _describe_ready(self, most: int = 5) -> list[str]:
        """The first callbacks ready to run, as asyncio names them (a livelock's evidence)."""
        ready: Any = self._ready  # type: ignore[attr-defined]
        return [
            format_helpers._format_callback_source(h._callback, h._args) for h in list(ready)[:most]
        ]

    def _describe_pending(self, most: int = 8) -> list[str]:
        """The tasks still waiting, by coroutine, most first (an overrun's evidence: what
        the run is waiting on)."""
        pending = Counter(
            getattr(task.get_coro(), "__qualname__", "?")
            for task in asyncio.all_tasks(self)
            if not task.done()
        )
        return [f"{n} x {name}" for name, n in pending.most_common(most)]

    def _report_callback_error(self, handle: Any, exc: BaseException) -> None:
        """What `asyncio.Handle._run` tells the exception handler of a failed callback."""
        callback = format_helpers._format_callback_source(handle._callback, handle._args)
        context: dict[str, Any] = {
            "message": f"Exception in callback {callback}",
            "exception": exc,
            "handle": handle,
        }
        if handle._source_traceback:
            context["source_traceback"] = handle._source_traceback
        self.call_exception_handler(context)

    def call_soon(  # type: ignore[override]
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        """`asyncio.BaseEventLoop.call_soon` without its debug-only checks (futures call
        this for every done callback: it is the loop's most frequent call), the handle
        built as `_new_handle` builds it."""
        base: Any = self
        if base._debug or base._closed:
            return super().call_soon(callback, *args, context=context)
        handle: Any = _new_handle(_Handle)
        handle._context = copy_context() if context is None else context
        handle._loop = self
        handle._callback = callback
        handle._args = args
        handle._cancelled = False
        handle._repr = None
        handle._source_traceback = None
        base._ready.append(handle)
        return handle  # type: ignore[no-any-return]

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """`asyncio.BaseEventLoop.call_at` (every sleep, timeout and network delivery is
        one), its debug-only checks made only in debug mode, the timer pushed as
        ``(when, seq, timer)`` (see the module docstring)."""
        base: Any = self
        timer: Any
        if base._debug or base._closed or when is None:
            self._check_closed()  # type: ignore[attr-defined]
            if base._debug:
                self._check_thread()  # type: ignore[attr-defined]
                self._check_callback(callback, "call_at")  # type: ignore[attr-defined]
            timer = asyncio.TimerHandle(when, callback, args, self, context)
        else:
            timer = _new_handle(_TimerHandle)
            timer._context = copy_context() if context is None else context
            timer._loop = self
            timer._callback = callback
            timer._args = args
            timer._cancelled = False
            timer._repr = None
            timer._source_traceback = None
            timer._when = when
        timer._scheduled = True
        heappush(base._scheduled, (when, next(self._timer_seq), timer))
        return timer  # type: ignore[no-any-return]

    def call_later(  # type: ignore[override]
        self,
        delay: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """`asyncio.BaseEventLoop.call_later` straight to `call_at` (every ``sleep``)."""
        base: Any = self
        if base._debug or delay is None:
            return super().call_later(delay, callback, *args, context=context)
        return self.call_at(self.now + delay, callback, *args, context=context)

    def _release_due_timers(self) -> None:
        """Move the timers due now into the ready queue, ties in the seed's order: each
        due timer, in creation order, draws a number, and they run by time, then draw."""
        base: Any = self
        scheduled = base._scheduled
        now = self.now
        if not scheduled or scheduled[0][0] > now:
            return
        due: list[Any] = []
        while scheduled and scheduled[0][0] <= now:
            entry = heappop(scheduled)
            handle = entry[2]
            handle._scheduled = False
            if handle._cancelled:
                base._timer_cancelled_count -= 1
                continue
            due.append(entry)
        if len(due) == 1:
            base._ready.append(due[0][2])
            return
        if not due:
            return
        draw = self.random.random
        # (when, draw, seq, handle): compared in C, never as far as the handle
        keyed = [(entry[0], draw(), entry[1], entry[2]) for entry in due]
        keyed.sort()
        self.timer_ties += len(due) - len({entry[0] for entry in due})
        base._ready.extend([entry[3] for entry in keyed])

    def _process_events(self, event_list: list[Any]) -> None:
        """No descriptors, so no events: the network schedules its own callbacks."""

    def _write_to_self(self) -> None:
        """Nothing to wake: the loop never blocks (asyncio calls this from other threads)."""

    async def create_server(  # type: ignore[override]
        self,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        host: str | None = None,
        port: int | None = None,
        *,
        ssl: Any = None,
        **_socket_options: Any,
    ) -> SimServer:
        """A listener on the in-memory network; socket options (backlog, reuse) mean nothing."""
        if ssl is not None:
            raise NotImplementedError("TLS is not simulated yet")
        return self.network.create_server(protocol_factory, host or "127.0.0.1", port or 0)

    async def create_connection(  # type: ignore[override]
        self,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        host: str | None = None,
        port: int | None = None,
        *,
        ssl: Any = None,
        **_socket_options: Any,
    ) -> tuple[SimTransport, asyncio.BaseProtocol]:
        """A connection over the in-memory network (refused where nobody listens)."""
        if ssl is not None:
            raise NotImplementedError("TLS is not simulated yet")
        if host is None or port is None:
            raise ValueError("the simulated network connects to a host and a port")
        return await self.network.create_connection(protocol_factory, host, int(port))

    def run_in_executor(  # type: ignore[override]
        self, executor: Executor | None, func: Callable[..., _T], *args: Any
    ) -> asyncio.Future[_T]:
        """Run ``func`` inline, now, and hand back its outcome as a done future.

        A thread would run outside virtual time and in an order no seed decides; the work
        sent to threads (the log cleaner's) is correct when run inline, only not concurrent.
        """
        future: asyncio.Future[_T] = self.create_future()
        try:
            future.set_result(func(*args))
        except BaseException as exc:
            future.set_exception(exc)
        return future


def run_simulated(
    coro: Any,
    seed: int,
    start_s: float = 0.0,
    latency: LatencyModel | None = None,
    epoch_s: float = DEFAULT_EPOCH_S,
    deadline_s: float = math.inf,
) -> Any:
    """Run ``coro`` to completion on a fresh `SimulatedEventLoop`, the process's clocks,
    `random` and `uuid4` pinned to it (`determinism.pinned_process`, wall time ``epoch_s +
    loop.time()``); the loop is closed after. A `SimulationLivelock` -- a spin, or virtual
    time past ``deadline_s`` -- is raised once what is left has been cancelled, or given up
    on if that spins too (`_bounded_if`)."""
    loop = SimulatedEventLoop(seed, start_s, latency)
    loop.deadline_s = deadline_s
    livelocked = False  # then nothing more runs on it: the spin would go on (and raise)
    try:
        asyncio.set_event_loop(loop)
        with pinned_process(loop, seed, epoch_s), _collector_for_long_runs():
            try:
                return loop.run_until_complete(coro)
            except SimulationLivelock:
                livelocked = True
                raise
            finally:
                with _bounded_if(livelocked, loop):
                    _cancel_leftover_tasks(loop)
    finally:
        try:
            with _bounded_if(livelocked, loop):
                loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


@contextmanager
def _collector_for_long_runs() -> Iterator[None]:
    """The cyclic garbage collector, tuned for a run: what exists before it (a replay's
    capture rows, every module) is frozen out of the collections, and the youngest
    generation is collected every 10 000 allocations, not every 700. An hour's replay
    spent ~8% of its time in the collector, rescanning the rows it holds; ~2% so.
    Collections stay a function of the run's allocations: same run, same collections."""
    thresholds = gc.get_threshold()
    freeze = gc.get_freeze_count() == 0  # a caller that froze objects keeps its own
    if freeze:
        gc.freeze()
    gc.set_threshold(10_000, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if freeze:
            gc.unfreeze()


@contextmanager
def _bounded_if(livelocked: bool, loop: SimulatedEventLoop) -> Iterator[None]:
    """After a livelock, the way out (cancelling what is left) gets a fresh watch and no
    deadline; if it spins too, it is given up (the tasks are left, the livelock reported)."""
    if not livelocked:
        yield
        return
    loop.deadline_s = math.inf
    loop._streak, loop._streak_from_s = 0, loop.now
    with contextlib.suppress(SimulationLivelock):
        yield


def _cancel_leftover_tasks(loop: SimulatedEventLoop) -> None:
    """What `asyncio.run` does on the way out: cancel what is left and let it unwind."""
    leftover = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in leftover:
        task.cancel()
    if leftover:
        loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
