"""``minikafka serve --port 0`` in a child process, for the benchmarks and the CLI tests.

A broker in its own interpreter: the benchmarks' clients do not share its GIL, and the
tests of the command line see what a user sees (the ready line, the exit code on SIGTERM).

``cwd`` picks the checkout whose broker runs (``python -m`` imports from the working
directory first). Since the layout change the entry point is ``python -m minikafka``;
an older checkout (before ``minikafka/`` existed, e.g. the baseline a bench compares
against) has it at ``python -m broker``: the module is chosen by what the checkout has.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
READY = "minikafka ready: bootstrap="


def entry_module(checkout: Path) -> str:
    """``minikafka`` when the checkout has ``minikafka/__main__.py``, else ``broker``."""
    return "minikafka" if (checkout / "minikafka" / "__main__.py").exists() else "broker"


class BrokerProcess:
    """Start ``serve --port 0`` (optionally under cProfile) and read its ready line."""

    def __init__(
        self,
        args: list[str],
        *,
        cwd: Path | None = None,
        profile: Path | None = None,
        stderr: int | IO[str] | None = subprocess.PIPE,
        log_level: str | None = None,
    ) -> None:
        """``cwd``: the checkout to run (None: this process's working directory, with
        this checkout's entry point); ``log_level``: ``--log-level`` before ``serve``."""
        cmd = [sys.executable]
        if profile is not None:
            cmd += ["-m", "cProfile", "-o", str(profile)]
        cmd += ["-m", entry_module(ROOT if cwd is None else cwd)]
        if log_level is not None:
            cmd += ["--log-level", log_level]
        cmd += ["serve", "--port", "0", *args]
        self.proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith(READY):
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
            raise RuntimeError(f"broker did not start: {line!r} {err or ''}")
        self.ready_line = line.strip()
        self.bootstrap = line.split("bootstrap=", 1)[1].split()[0]

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        """Send ``sig`` and wait up to ``timeout`` s (SIGKILL after); the exit code."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def stop(self) -> int:
        """SIGTERM, then wait (SIGKILL after 60 s): the benches' way to end a run."""
        return self.terminate(signal.SIGTERM, timeout=60)

    def kill9(self) -> None:
        """SIGKILL, as a crash."""
        self.proc.kill()
        self.proc.wait(timeout=10)
