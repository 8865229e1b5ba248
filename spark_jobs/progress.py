"""Replay progress: one line per phase, and a bar of requests replayed with an ETA.

Two sources, because neither alone says how far a replay is:

* Spark's status tracker (``SparkContext.statusTracker``) says how many of the replay
  stage's tasks are running and done. A barrier stage's tasks all run until the end of
  the schedule, so it tells the phases (tasks starting, all running, finishing) but not
  the progress within them. PySpark accumulators reach the driver only when a task
  ends, so they cannot tell it either.
* So each task reports its own count: ``ProgressReporter`` sends a small UDP datagram
  to the driver (``task, done, total, start``) at most every ``interval_s`` as its
  client requests are answered (or fail, or time out). UDP costs the task one
  non-blocking send and never waits for the driver; a lost datagram only makes the bar
  lag until the next. The agreed start instant rides along, so the driver knows when
  the schedule ends: the ETA is that end (the captured span divided by ``--speed``)
  from now, plus the answers still owed once it has passed.

``ProgressBar`` renders ``replay [######------] 4123/8000 requests 51% ETA 0:14``: in
place on a terminal, and every tenth (or once every ``log_every_s``) as a line of its
own when stderr is a file or pipe.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["ProgressBar", "ProgressMonitor", "ProgressReporter", "format_eta", "phase"]

_WIDTH: Final = 30


def phase(message: str, stream: IO[str] | None = None) -> None:
    """One line for one phase of a job: ``replay: message``."""
    out = stream or sys.stderr
    print(f"replay: {message}", file=out, flush=True)


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressReporter:
    """The task side: counts its settled client requests and tells the driver."""

    def __init__(
        self,
        address: tuple[str, int] | None,
        task: int,
        total: int,
        interval_s: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.task = task
        self.total = total
        self.done = 0
        self.start_unix_s: float | None = None
        self._address = address
        self._interval_s = interval_s
        self._clock = clock
        self._last = float("-inf")
        self._sock: socket.socket | None = None
        if address is not None:
            try:
                self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                self._sock.setblocking(False)
            except OSError:
                self._sock = None

    def started(self, start_unix_s: float) -> None:
        self.start_unix_s = start_unix_s
        self.send()

    def tick(self, _: object = None) -> None:
        """One more request settled (usable as a future's done-callback)."""
        self.done += 1
        if self.done >= self.total or self._clock() - self._last >= self._interval_s:
            self.send()

    def send(self) -> None:
        self._last = self._clock()
        if self._sock is None or self._address is None:
            return
        message: dict[str, float] = {"task": self.task, "done": self.done, "total": self.total}
        if self.start_unix_s is not None:
            message["start"] = self.start_unix_s
        with contextlib.suppress(OSError):  # best effort: the replay never waits for it
            self._sock.sendto(json.dumps(message).encode(), self._address)

    def close(self) -> None:
        self.send()
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class ProgressBar:
    """Renders progress (see module doc); ``update`` returns the text it wrote, if any."""

    def __init__(
        self,
        total: int,
        stream: IO[str] | None = None,
        *,
        tty: bool | None = None,
        log_every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._log_every_s = log_every_s
        self._clock = clock
        self._last_decile = -1
        self._last_log = float("-inf")
        self._drawn = False

    def render(self, done: int, eta_s: float | None) -> str:
        fraction = min(1.0, done / self.total) if self.total else 1.0
        filled = round(fraction * _WIDTH)
        bar = "#" * filled + "-" * (_WIDTH - filled)
        return (
            f"replay [{bar}] {done}/{self.total} requests {fraction * 100:3.0f}% "
            f"ETA {format_eta(eta_s)}"
        )

    def update(self, done: int, eta_s: float | None) -> str | None:
        text = self.render(done, eta_s)
        if self.tty:
            self.stream.write("\r" + text)
            self.stream.flush()
            self._drawn = True
            return text
        decile = int(10 * done / self.total) if self.total else 10
        now = self._clock()
        if decile > self._last_decile or now - self._last_log >= self._log_every_s:
            self._last_decile = max(decile, self._last_decile)
            self._last_log = now
            print(text, file=self.stream, flush=True)
            return text
        return None

    def finish(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


class ProgressMonitor(threading.Thread):
    """The driver side: receives the tasks' reports, watches the replay stage through the
    status tracker, prints phases and the bar until ``stop``."""

    def __init__(
        self,
        sc: SparkContext | None,
        group: str,
        total: int,
        span_s: float,
        *,
        host: str = "127.0.0.1",
        stream: IO[str] | None = None,
        poll_s: float = 0.5,
    ) -> None:
        super().__init__(name="replay-progress", daemon=True)
        self._sc = sc
        self._group = group
        self._span_s = span_s
        self._poll_s = poll_s
        self._stream = stream or sys.stderr
        self.bar = ProgressBar(total, self._stream)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((host, 0))
        self._sock.settimeout(poll_s)
        self.address: tuple[str, int] = self._sock.getsockname()[:2]
        self._tasks: dict[int, dict[str, Any]] = {}
        self._stop_event = threading.Event()
        self._tasks_line = ""
        self._schedule_started = False

    @property
    def done(self) -> int:
        return sum(int(t.get("done", 0)) for t in self._tasks.values())

    def eta_s(self, now_unix_s: float | None = None) -> float | None:
        starts = [float(t["start"]) for t in self._tasks.values() if "start" in t]
        if not starts:
            return None
        now = time.time() if now_unix_s is None else now_unix_s
        return max(0.0, max(starts) + self._span_s - now)

    def receive(self, data: bytes) -> None:
        try:
            message = json.loads(data)
            self._tasks[int(message["task"])] = message
        except (ValueError, KeyError, TypeError):
            return

    def receive_available(self) -> int:
        """Take every report already queued on the socket, without waiting; how many.

        Loopback datagrams are queued by the time their ``sendto`` returns, so a test
        can check what a reporter sent without starting the thread."""
        count = 0
        while True:
            try:
                data = self._sock.recv(4096, socket.MSG_DONTWAIT)
            except (BlockingIOError, TimeoutError):
                return count
            self.receive(data)
            count += 1

    def _stage_line(self) -> str:
        """The replay stage's tasks, from the status tracker (the group's latest stage)."""
        if self._sc is None:
            return ""
        tracker = self._sc.statusTracker()
        stages: list[int] = []
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            stages.extend(job.stageIds if job is not None else ())
        stage = tracker.getStageInfo(max(stages)) if stages else None
        if stage is None or not stage.numTasks:
            return ""
        return (
            f"replay tasks: {stage.numActiveTasks} running, {stage.numCompletedTasks} done "
            f"of {stage.numTasks}"
        )

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                data = self._sock.recv(4096)
            except TimeoutError:
                data = b""
            except OSError:
                break
            if data:
                self.receive(data)
            line = self._stage_line()
            if line and line != self._tasks_line:
                if self.bar.tty:
                    self.bar.finish()
                phase(line.removeprefix("replay "), self._stream)
                self._tasks_line = line
            if any("start" in t for t in self._tasks.values()):
                if not self._schedule_started:
                    self._schedule_started = True
                    phase("every task is ready; the schedule has started", self._stream)
                self.bar.update(self.done, self.eta_s())

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=5)
        if self._schedule_started:
            self.bar.update(self.done, 0.0)
        self.bar.finish()
        self._sock.close()
