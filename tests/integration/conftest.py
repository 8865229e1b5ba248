"""Real brokers on 127.0.0.1 port 0, in this test's event loop or in a subprocess."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import pytest

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.coordinator.coordinator_loader import EventLoopLoadScheduler, LoadScheduler
from broker.server.dispatch import RequestObserver
from testkit.broker_process import BrokerProcess

FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0"}


@contextlib.asynccontextmanager
async def running_cluster(
    brokers: int = 1,
    data_dir: Path | None = None,
    *,
    observers: Sequence[RequestObserver] = (),
    load_scheduler: Callable[[], LoadScheduler] = EventLoopLoadScheduler,
    **overrides: str,
) -> AsyncIterator[MiniKafka]:
    """Start ``brokers`` brokers in this event loop; stop them on exit."""
    config = BrokerConfig.model_validate({**FAST_GROUPS, **overrides})
    app = MiniKafka(
        config,
        brokers=brokers,
        port=0,
        data_dir=data_dir,
        observers=observers,
        load_scheduler=load_scheduler,
    )
    await app.start()
    try:
        yield app
    finally:
        await app.stop()


@pytest.fixture
async def kafka() -> AsyncIterator[MiniKafka]:
    async with running_cluster() as app:
        yield app


@pytest.fixture
def broker_process() -> Iterator[type[BrokerProcess]]:
    started: list[BrokerProcess] = []

    class Tracked(BrokerProcess):
        def __init__(self, args: list[str]) -> None:
            super().__init__(args)
            started.append(self)

    yield Tracked
    for process in started:
        if process.proc.poll() is None:
            process.proc.kill()
            process.proc.wait(timeout=10)
