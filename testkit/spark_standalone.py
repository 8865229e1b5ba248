"""A Spark standalone cluster on 127.0.0.1 from PySpark's own scripts, for benches and tests.

    with standalone_cluster(Path(tmp), workers=2, cores=1) as cluster:
        run(["...", "--master", cluster.url], env=cluster.driver_env())

A master and ``workers`` workers of ``cores`` cores each, every one started by the pyspark
package's ``sbin/spark-daemon.sh`` (the daemon script Spark's ``start-master.sh`` and
``start-worker.sh`` wrap; the pip package ships only it, not those two). ``SPARK_HOME`` is
the pyspark package; ``SPARK_LOCAL_IP=127.0.0.1`` so nothing listens beyond loopback;
``PYSPARK_PYTHON`` is this interpreter (the project's ``.venv`` python: the executors'
Python workers must import our packages); the work, log and pid directories are under
``base`` (the package directory may be read-only, and two clusters must not share pid
files). Entering waits until the master's status page (``/json/``) counts every worker;
leaving stops the daemons in reverse order and waits for each JVM to exit (the script's
``stop`` only sends SIGTERM), SIGKILL after a grace period -- whatever happened inside.

Where we differ from ``start-all.sh``: no ``conf/workers`` file and no ssh, the daemons are
numbered instances of one machine; the web UIs listen on free ports, never 8080/8081.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pyspark

__all__ = ["SPARK_HOME", "StandaloneCluster", "free_port", "standalone_cluster"]

SPARK_HOME = Path(pyspark.__file__).resolve().parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STOP_GRACE_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def driver_env() -> dict[str, str]:
    """The environment for a driver (a Spark job's command) talking to such a cluster."""
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


class StandaloneCluster:
    """A Spark master and workers on 127.0.0.1, by PySpark's ``sbin/spark-daemon.sh``."""

    def __init__(self, base: Path, workers: int, cores: int, memory: str = "1g") -> None:
        self.base = base
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.logs = base / "logs"
        self.env = {
            **driver_env(),
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_MASTER_HOST": "127.0.0.1",
            "SPARK_WORKER_DIR": str(base / "work"),
            "SPARK_LOG_DIR": str(self.logs),
            "SPARK_PID_DIR": str(base / "pids"),
        }
        self.env.pop("SPARK_NO_DAEMONIZE", None)
        for name in ("work", "logs", "pids"):
            (base / name).mkdir(parents=True, exist_ok=True)
        self.started: list[tuple[str, int]] = []

    def _daemon(self, action: str, cls: str, instance: int, *args: str) -> None:
        script = SPARK_HOME / "sbin" / "spark-daemon.sh"
        subprocess.run(
            ["bash", str(script), action, cls, str(instance), *args],
            env=self.env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )

    def _pid(self, cls: str, instance: int) -> int | None:
        for pid_file in (self.base / "pids").glob(f"*{cls}-{instance}.pid"):
            try:
                return int(pid_file.read_text().strip())
            except (OSError, ValueError):
                return None
        return None

    def start(self, timeout_s: float = 120.0) -> None:
        master_args = ["--host", "127.0.0.1", "--port", str(self.port)]
        self.started.append((MASTER_CLASS, 1))
        self._daemon("start", MASTER_CLASS, 1, *master_args, "--webui-port", str(self.ui_port))
        for i in range(1, self.workers + 1):
            worker_args = ["--host", "127.0.0.1", "--webui-port", str(free_port())]
            worker_args += ["--cores", str(self.cores), "--memory", self.memory]
            worker_args += ["--work-dir", str(self.base / "work"), self.url]
            self.started.append((WORKER_CLASS, i))
            self._daemon("start", WORKER_CLASS, i, *worker_args)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.alive_workers() >= self.workers:
                return
            time.sleep(0.5)
        raise RuntimeError(f"{self.workers} workers did not register; see {self.logs}")

    def status(self) -> dict[str, object]:
        """The master's ``/json/`` page ({} while it is not up)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                page = json.load(r)
        except (OSError, ValueError):
            return {}
        return page if isinstance(page, dict) else {}

    def alive_workers(self) -> int:
        value = self.status().get("aliveworkers", 0)
        return int(value) if isinstance(value, int | str) else 0

    def stop(self) -> None:
        """Stop every daemon started, newest first, and wait for its JVM to be gone."""
        for cls, instance in reversed(self.started):
            pid = self._pid(cls, instance)
            try:
                self._daemon("stop", cls, instance)
            except (subprocess.SubprocessError, OSError):
                if pid is not None:
                    _signal(pid, signal.SIGTERM)
            if pid is not None and not _wait_gone(pid, STOP_GRACE_S):
                _signal(pid, signal.SIGKILL)
                _wait_gone(pid, 5.0)
        self.started.clear()


def _signal(pid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


@contextmanager
def standalone_cluster(
    base: Path, workers: int, cores: int, memory: str = "1g"
) -> Iterator[StandaloneCluster]:
    """A started cluster (every worker registered); stopped on leaving, whatever happened."""
    cluster = StandaloneCluster(base, workers, cores, memory)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
