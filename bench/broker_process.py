"""``python -m minikafka serve --port 0`` in a child process, for the benchmarks.

A broker in its own interpreter, so that the benchmark's clients do not share its GIL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent


class BrokerSubprocess:
    """Start a broker (optionally under cProfile) and read its ready line."""

    def __init__(
        self,
        extra: list[str],
        *,
        profile: Path | None = None,
        stderr: int | IO[str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        """``cwd``: the checkout whose ``broker`` package runs (``python -m`` imports
        from the working directory first); this one by default."""
        cmd = [sys.executable]
        if profile is not None:
            cmd += ["-m", "cProfile", "-o", str(profile)]
        cmd += ["-m", "minikafka", "--log-level", "WARNING", "serve", "--port", "0", *extra]
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT if cwd is None else cwd,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("minikafka ready: bootstrap="):
            self.proc.kill()
            raise RuntimeError(f"broker did not start: {line!r}")
        self.bootstrap = line.split("bootstrap=", 1)[1].split()[0]

    def stop(self) -> int:
        """SIGTERM, then wait (kill after 60 s); the broker's exit code."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
