"""`stop_consumer`: aiokafka's ``AIOKafkaConsumer.stop``, without its stray cancellation.

aiokafka's ``Fetcher.close`` cancels its pending fetch tasks and awaits each; one that was
sleeping its retry backoff after a timed-out fetch (a broker partitioned away) re-raises
the CancelledError into ``stop`` itself, which would end the simulated client -- and the
run -- as if it had been cancelled. Here that error is swallowed unless the caller's own
task is the one being cancelled.
"""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer


async def stop_consumer(consumer: AIOKafkaConsumer) -> None:
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
