"""Kafka's RLMQuotaManager: the copy and fetch byte rates of the remote log manager.

A rate over ``window_num`` windows of ``window_size_ms`` (Kafka's
``remote.log.manager.{copy,fetch}.quota.window.num`` = 11 and ``.window.size.seconds`` = 1),
on the broker's clock. Over the quota, the copier waits for its next run and a remote
fetch is answered empty (Kafka's fetch throttle), as Kafka does.
"""

from __future__ import annotations

from collections import deque

from purgatory import Clock

LONG_MAX = 2**63 - 1


class RLMQuotaManager:
    def __init__(
        self,
        clock: Clock,
        max_bytes_per_second: int,
        window_num: int = 11,
        window_size_ms: int = 1000,
    ) -> None:
        self.clock = clock
        self.max_bytes_per_second = max_bytes_per_second
        self._span_ms = window_num * window_size_ms
        self._samples: deque[tuple[int, int]] = deque()
        self._total = 0

    def _trim(self, now: int) -> None:
        while self._samples and self._samples[0][0] <= now - self._span_ms:
            self._total -= self._samples.popleft()[1]

    def record(self, nbytes: int) -> None:
        now = self.clock.now_ms()
        self._trim(now)
        self._samples.append((now, nbytes))
        self._total += nbytes

    def is_quota_exceeded(self) -> bool:
        if self.max_bytes_per_second >= LONG_MAX:
            return False
        self._trim(self.clock.now_ms())
        return self._total * 1000 / self._span_ms > self.max_bytes_per_second
