"""Kafka's timer and purgatory machinery on one asyncio thread (see ARCHITECTURE.md).

Generic and clock-injected: nothing here knows the broker, and only ``reaper`` uses
asyncio.
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
