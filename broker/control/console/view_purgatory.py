"""The purgatories as the console shows them: each one's parked operations with their
watch keys and time left, completed and expired per second, and every timer's
hierarchical timing wheel (levels, buckets, tasks per bucket, the reaper's next tick).

Reading changes nothing the reaper sees: the wheel is read through
``TimingWheel.bucket_sizes`` and ``SystemTimer.peek_next_expiration_ms``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.control.cluster_control import ClusterControl
from broker.quota.throttled_channel import THROTTLED_CHANNEL, throttled_channels
from broker.server.watch_keys import watch_key_name

if TYPE_CHECKING:
    from purgatory.reaper import ExpirationReaper
    from purgatory.system_timer import SystemTimer

__all__ = ["PurgatoryRates", "purgatories"]

#: Rates are counts over at least this long (shorter samples are too noisy to show).
RATE_WINDOW_MS = 1000


@dataclass
class PurgatoryRates:
    """Completed and expired per second of each purgatory, from its counters sampled
    at most once per window (one per console, shared by its pages)."""

    _last: dict[tuple[int, str], tuple[int, int, int]] = field(default_factory=dict)
    _rates: dict[tuple[int, str], tuple[float, float]] = field(default_factory=dict)

    def rate(
        self, key: tuple[int, str], now_ms: int, completed: int, expired: int
    ) -> tuple[float, float]:
        last = self._last.get(key)
        if last is None or now_ms < last[0]:
            self._last[key] = (now_ms, completed, expired)
            return self._rates.get(key, (0.0, 0.0))
        elapsed = now_ms - last[0]
        if elapsed >= RATE_WINDOW_MS:
            seconds = elapsed / 1000
            self._rates[key] = ((completed - last[1]) / seconds, (expired - last[2]) / seconds)
            self._last[key] = (now_ms, completed, expired)
        return self._rates.get(key, (0.0, 0.0))


def _wheel(timer: SystemTimer, reaper: ExpirationReaper | None, now_ms: int) -> dict[str, Any]:
    levels = []
    for level in timer.timing_wheel.levels():
        sizes = level.bucket_sizes()
        current = (level.current_time // level.tick_ms) % level.wheel_size
        levels.append(
            {
                "tick_ms": level.tick_ms,
                "wheel_size": level.wheel_size,
                "interval_ms": level.interval,
                "current_time": level.current_time,
                "current_bucket": current,
                "buckets": sizes,
                "tasks": sum(sizes),
            }
        )
    next_expiration = timer.peek_next_expiration_ms()
    tick = reaper.next_tick_ms if reaper is not None else None
    return {
        "name": timer.name,
        "tasks": timer.size(),
        "levels": levels,
        "next_expiration_in_ms": None if next_expiration is None else next_expiration - now_ms,
        "reaper_next_tick_in_ms": None if tick is None else tick - now_ms,
    }


def purgatories(app: ClusterControl, rates: PurgatoryRates) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for broker in sorted(app.brokers, key=lambda b: b.broker_id):
        endpoint = app.cluster.brokers.get(broker.broker_id)
        if endpoint is None or not endpoint.alive:
            out.append({"broker": broker.broker_id, "alive": False})
            continue
        now = broker.services.clock.now_ms()
        purgatory_set = broker.purgatories
        reapers = {id(r.timer): r for r in purgatory_set.reapers}
        shown = []
        for name, purgatory in purgatory_set.purgatories.items():
            operations = []
            for op in purgatory.delayed_operations():
                deadline = op.deadline_ms
                operations.append(
                    {
                        "kind": type(op).__name__,
                        "watch_keys": [watch_key_name(key) for key in op.watch_keys],
                        "delay_ms": op.delay_ms,
                        "remaining_ms": None if deadline is None else deadline - now,
                    }
                )
            completed, expired = rates.rate(
                (broker.broker_id, name.value),
                now,
                purgatory.completed_count,
                purgatory.expired_count,
            )
            shown.append(
                {
                    "name": name.value,
                    "watched": purgatory.watched(),
                    "delayed": purgatory.num_delayed(),
                    "completed_total": purgatory.completed_count,
                    "expired_total": purgatory.expired_count,
                    "completed_per_s": completed,
                    "expired_per_s": expired,
                    "operations": operations,
                }
            )
        timers = [*purgatory_set.timers.values(), purgatory_set.scheduler_timer]
        timers.append(purgatory_set.share_lock_timer)
        throttled = None
        quotas = broker.services.quota_managers
        if quotas is not None:
            throttled = throttled_channels(quotas.reaper, now)
        out.append(
            {
                "broker": broker.broker_id,
                "alive": True,
                "purgatories": shown,
                "wheels": [_wheel(t, reapers.get(id(t)), now) for t in timers],
                "throttled": throttled,
                "throttled_name": THROTTLED_CHANNEL,
            }
        )
    return out
