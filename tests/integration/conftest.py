"""Real brokers on 127.0.0.1 port 0, in this test's event loop or in a subprocess."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import pytest

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.coordinator.coordinator_loader import EventLoopLoadScheduler, LoadScheduler
from broker.server.dispatch import RequestObserver

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


class BrokerProcess:
    """``minikafka serve`` in a child process, for tests of the command line itself."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "minikafka", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("minikafka ready: bootstrap="):
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
            raise RuntimeError(f"broker did not start: {line!r} {err}")
        self.ready_line = line.strip()
        self.bootstrap = line.split("bootstrap=", 1)[1].split()[0]

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


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
