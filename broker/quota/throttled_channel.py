"""Kafka's ThrottledChannel and its reaper: a throttled connection, unmuted on time.

KIP-219: a client over its quota gets its response at once, carrying
``throttle_time_ms``, and then the broker does not read from its connection for that
long. Kafka's ``ThrottledChannel`` tells the socket server "throttling started" when it
is made (the channel is muted once its response is sent) and "throttling done" when the
``ThrottledChannelReaper`` takes it from a ``DelayQueue`` (the channel is unmuted unless a
response is still pending). Kafka runs one delay queue and reaper thread per quota type.

Here a ``ThrottledChannel`` is a ``TimerTask`` on one timing wheel per broker, the
"ThrottledChannel" timer, reaped by an ``ExpirationReaper`` like the purgatories' — one
wheel for every quota type (the queue sizes are still counted per type, as Kafka's
``queue-size`` metric). The connection (``broker/server/connection.py``) is the
``ThrottleCallback``: ``start_throttling`` mutes it, ``end_throttling`` unmutes it.
"""

from __future__ import annotations

import weakref
from typing import Protocol

from purgatory import Clock, ExpirationReaper, SystemTimer, TimerTask

THROTTLED_CHANNEL = "ThrottledChannel"


class ThrottleCallback(Protocol):
    """Kafka's ``ThrottleCallback``: what a throttled connection is told."""

    def start_throttling(self) -> None: ...

    def end_throttling(self) -> None: ...


class ThrottledChannel(TimerTask):
    """One connection muted for ``throttle_time_ms``; tells ``callback`` at both ends."""

    __slots__ = ("callback", "quota_type", "reaper", "throttle_time_ms")

    def __init__(
        self,
        reaper: ThrottledChannelReaper,
        quota_type: str,
        throttle_time_ms: int,
        callback: ThrottleCallback,
    ) -> None:
        # +1: the timer counts whole milliseconds from a floored "now", so this keeps
        # the mute at least throttle_time_ms, never a fraction less.
        super().__init__(throttle_time_ms + 1)
        self.reaper = reaper
        self.quota_type = quota_type
        self.throttle_time_ms = throttle_time_ms
        # Weak: a connection closed while throttled is freed at once, not kept (with
        # its buffers) until its throttle time has passed, which may be long.
        self.callback = weakref.ref(callback)
        callback.start_throttling()

    def run(self) -> None:
        self.reaper.throttling_done(self)
        callback = self.callback()
        if callback is not None:
            callback.end_throttling()


class ThrottledChannelReaper:
    """The broker's throttled channels: a timer, its reaper, the queue size per type.

    A component of the broker (``start``/``stop``); ``/purgatory`` and ``/metrics`` read
    ``queue_size`` and ``throttled_channels``.
    """

    def __init__(self, clock: Clock) -> None:
        self.timer = SystemTimer(clock, name=THROTTLED_CHANNEL)
        self._reaper = ExpirationReaper(self.timer, name=f"{THROTTLED_CHANNEL}Reaper")
        self._channels: dict[int, ThrottledChannel] = {}
        self.queue_size: dict[str, int] = {}
        self.throttled_total: dict[str, int] = {}

    def throttle(self, quota_type: str, throttle_time_ms: int, callback: ThrottleCallback) -> None:
        channel = ThrottledChannel(self, quota_type, throttle_time_ms, callback)
        self._channels[id(channel)] = channel
        self.queue_size[quota_type] = self.queue_size.get(quota_type, 0) + 1
        self.throttled_total[quota_type] = self.throttled_total.get(quota_type, 0) + 1
        self.timer.add(channel)

    def throttling_done(self, channel: ThrottledChannel) -> None:
        if self._channels.pop(id(channel), None) is not None:
            self.queue_size[channel.quota_type] -= 1

    def throttled_channels(self) -> list[ThrottledChannel]:
        return list(self._channels.values())

    async def start(self) -> None:
        self._reaper.start()

    async def stop(self) -> None:
        await self._reaper.stop()
        for channel in list(self._channels.values()):
            channel.cancel()
            self.throttling_done(channel)


def throttled_channels(reaper: ThrottledChannelReaper, now_ms: int) -> dict[str, object]:
    """The reaper as ``/purgatory`` shows a purgatory: the channels muted now."""
    channels = reaper.throttled_channels()
    operations = []
    for channel in channels:
        deadline = channel.deadline_ms
        operations.append(
            {
                "kind": "ThrottledChannel",
                "quota_type": channel.quota_type,
                "delay_ms": channel.throttle_time_ms,
                "deadline_ms": deadline,
                "remaining_ms": None if deadline is None else deadline - now_ms,
            }
        )
    done = sum(reaper.throttled_total.values()) - len(channels)
    return {
        "purgatory_size": len(channels),
        "num_delayed_operations": len(channels),
        "expirations": done,
        "queue_size": dict(sorted(reaper.queue_size.items())),
        "operations": operations,
    }
