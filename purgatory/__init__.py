"""Kafka's timer and purgatory machinery on one asyncio thread.

Generic and clock-injected: nothing here knows the broker, and only ``reaper`` uses
asyncio. ``clock`` (the injected clocks), ``timer_task`` and ``timing_wheel`` (Kafka's
hierarchical wheel), ``system_timer`` (its facade), ``reaper`` (the expiration reaper on
the loop), ``delayed_operation`` and ``operation_purgatory`` (Kafka's purgatory). Kafka's
defaults: tick 1 ms, wheel size 20, purge interval 1000.
"""

from purgatory.clock import Clock, LoopClock, ManualClock
from purgatory.delayed_operation import DelayedOperation
from purgatory.operation_purgatory import DelayedOperationPurgatory
from purgatory.reaper import ExpirationReaper
from purgatory.system_timer import SystemTimer
from purgatory.timer_task import TimerTask

__all__ = [
    "Clock",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "ExpirationReaper",
    "LoopClock",
    "ManualClock",
    "SystemTimer",
    "TimerTask",
]
