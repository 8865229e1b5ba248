"""A skewed clock on one broker: its wall clock stepped off the virtual time, both its
clocks drifting.

Every broker reads two injected clocks (`broker.app.MiniKafka`'s ``broker_clocks``): a
monotonic one (``purgatory.Clock``: its scheduler, purgatory timeouts, session and ISR lag
checks, the log flusher) and a wall one (``RequestClock.wall_ms``: LogAppendTime, the
CreateTime bounds of KIP-937, retention by timestamp, transaction dates). `SkewedClocks`
gives each broker a pair that reads the virtual time through its `BrokerSkew`:

- the **wall** clock is the virtual wall time plus the monotonic lead plus ``offset_s``, a
  step (an NTP correction, a VM resumed from a snapshot), forward or back; the step is undone
  when the fault heals — a wall clock may go back;
- the **monotonic** clock runs at ``1 + drift`` while the fault lasts (an oscillator off by
  a few percent: sessions and timeouts of that broker end early or late) and keeps the lead
  it gained: a monotonic clock never goes back.

What Kafka guarantees under skew, and so what the checkers may demand: order is by offset,
never by timestamp. LogAppendTime is the leader's wall clock when it appends, so the
timestamps of a partition need not grow across a change of leader (nor across a step back
on one leader); the time index keeps a running maximum, and ListOffsets by time answers the
first offset whose timestamp is at or after the target by that maximum. No invariant may
assume timestamps monotonic by offset, nor compare two brokers' clocks; a record whose
CreateTime is more than ``message.timestamp.after.max.ms`` (1 h) ahead of the leader's clock
is refused (INVALID_TIMESTAMP), so steps stay well under an hour here. Timeouts measured on a
drifting monotonic clock are longer or shorter by the drift: a session may expire a few
percent early, which Kafka's clients survive by rejoining.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.server.request_timing import RequestClock
from purgatory import Clock, LoopClock

#: The most a skewed broker's clocks run fast or slow (the nemesis draws its drift up to
#: this either way): a checker allows a broker's timers to fire this much early.
MAX_DRIFT = 0.05


@dataclass(slots=True)
class BrokerSkew:
    """One broker's clocks relative to the virtual time."""

    offset_s: float = 0.0  # the wall clock's step
    drift: float = 0.0  # the rate both clocks run at, minus one
    lead_s: float = 0.0  # what past drift put the monotonic clock ahead (or behind)
    since_s: float = 0.0  # when the current drift began (virtual time)

    def monotonic_s(self, now_s: float) -> float:
        return now_s + self.lead_s + self.drift * (now_s - self.since_s)

    def start(self, now_s: float, offset_s: float, drift: float) -> None:
        self.stop(now_s)
        self.offset_s, self.drift, self.since_s = offset_s, drift, now_s

    def stop(self, now_s: float) -> None:
        """Heal: the wall step is undone, the drift stops, the monotonic lead stays."""
        self.lead_s += self.drift * (now_s - self.since_s)
        self.offset_s = self.drift = 0.0
        self.since_s = now_s


class SkewedClocks:
    """Every broker's clocks, read through its `BrokerSkew` (none skewed at first)."""

    def __init__(self, time_s: Callable[[], float], epoch_s: float) -> None:
        self._time_s = time_s
        self._epoch_s = epoch_s
        self._skews: dict[int, BrokerSkew] = {}

    def skew(self, broker_id: int) -> BrokerSkew:
        return self._skews.setdefault(broker_id, BrokerSkew())

    def of_broker(self, broker_id: int) -> tuple[Clock, RequestClock]:
        """The clock and request clock `MiniKafka` hands broker ``broker_id`` (at each start:
        a restarted broker reads the same skew)."""
        skew, time_s, epoch_s = self.skew(broker_id), self._time_s, self._epoch_s
        clock = _SkewedClock(skew, time_s)
        monotonic_s = clock.monotonic_s

        def wall_ms() -> float:
            return (epoch_s + monotonic_s() + skew.offset_s) * 1000.0

        return clock, RequestClock(monotonic_ns=clock.monotonic_ns, wall_ms=wall_ms)


class _SkewedClock(LoopClock):
    """`LoopClock` over a broker's skewed monotonic time, read in one call: every clock
    read of every broker comes here (~750k in a 600 s run), through two layers of calls
    before. The same arithmetic as `BrokerSkew.monotonic_s`, so the same milliseconds."""

    __slots__ = ("_skew", "_time_s")

    def __init__(self, skew: BrokerSkew, time_s: Callable[[], float]) -> None:
        super().__init__(self.monotonic_s)
        self._skew = skew
        self._time_s = time_s

    def monotonic_s(self) -> float:
        now_s = self._time_s()
        skew = self._skew
        return now_s + skew.lead_s + skew.drift * (now_s - skew.since_s)

    def now_ms(self) -> int:
        now_s = self._time_s()
        skew = self._skew
        return int((now_s + skew.lead_s + skew.drift * (now_s - skew.since_s)) * 1000.0)

    def monotonic_ns(self) -> int:
        """The request clock's stamps (~350k a run): ``monotonic_s`` in integer ns."""
        now_s = self._time_s()
        skew = self._skew
        return round((now_s + skew.lead_s + skew.drift * (now_s - skew.since_s)) * 1e9)
