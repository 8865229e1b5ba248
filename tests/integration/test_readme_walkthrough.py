"""README.md's commands, run in order as a newcomer runs them after ``make run``.

Each ```sh block is read line by line and each line is run by bash, in a scratch
directory that holds the project's ``.venv``, ``Makefile`` and ``pyproject.toml``
(symlinks), so ``./captures`` and friends land there and not in the checkout:

* ``make run`` and ``minikafka serve`` start in the background, as in a second
  terminal, and the test waits for their ready line; a new one first stops the one
  running (Ctrl-C, SIGINT), as the README says to. ``make run`` is run as
  ``make -o .venv/.base-installed run`` -- the environment is the one ``make test``
  installed, and the install step would only reach for the package index.
* ``export NAME=VALUE`` is kept for the lines after it; a line ending in ``&`` runs in
  the background and ``wait`` waits for those; ``sleep`` sleeps.
* ``# => text`` after a command: what it prints (stdout and stderr) contains ``text``.
* Every command must exit 0, and no output -- the servers' logs included -- may hold a
  ``Traceback``.

The README's fixed ports (9092-9094, 9192-9194, 9990) are replaced by free ones, and
``MINIKAFKA_BOOTSTRAP`` points at the first cluster, whose default (9092) the tools use.

Skipped, and why: ``make test`` (it is what runs this test); ``pip install`` (the
extras are installed already; it would reach the package index); ``kcat`` (when it is
not installed, and its group member runs until Ctrl-C); ``xdg-open`` (a browser);
``docker compose`` (a Docker daemon and an image build; ``tests/unit/test_compose.py``
checks the file and that the README's commands are its own); ``minikafka replay``,
``report`` and ``compare`` unless ``MINIKAFKA_WALKTHROUGH_SPARK=1`` (a local Spark session takes a
minute; ``tests/integration/test_replay_e2e.py`` and ``test_report.py`` cover them).
The pytest-plugin example is run by ``tests/integration/test_pytest_plugin.py``; the
other ```python examples here, with ``python -`` (each must print something).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
VENV = Path(sys.executable).parent.parent
COMMAND_TIMEOUT_S = 180
SPARK = os.environ.get("MINIKAFKA_WALKTHROUGH_SPARK") == "1"

pytestmark = pytest.mark.timeout(900)


@dataclass
class Block:
    language: str
    lines: list[str]


def readme_blocks() -> list[Block]:
    blocks: list[Block] = []
    current: Block | None = None
    for line in README.read_text().splitlines():
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence and current is None:
            current = Block(fence.group(1), [])
        elif fence:
            blocks.append(current)  # type: ignore[arg-type]
            current = None
        elif current is not None:
            current.lines.append(line)
    return blocks


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_run(count: int, taken: set[int]) -> int:
    """A port p with p..p+count-1 all free on 127.0.0.1, below the ephemeral range (as
    the README's 9092 is), so no client's outgoing connection takes it meanwhile."""
    low, _ = _ephemeral_range()
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(10000, max(low - count, 10001))
        ports = range(base, base + count)
        if taken.intersection(ports):
            continue
        sockets = []
        try:
            for port in ports:
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
        taken.update(ports)
        return base
    raise RuntimeError("no free ports")


def skip_reason(line: str) -> str | None:
    if line.startswith("make test"):
        return "make test runs this test"
    if "pip install" in line:
        return "the extras are installed; pip would reach the package index"
    if line.startswith("kcat"):
        if shutil.which("kcat") is None:
            return "kcat is not installed"
        if " -G " in line:
            return "a kcat group member runs until Ctrl-C"
    if line.startswith("xdg-open"):
        return "opens a browser"
    if line.startswith("docker "):
        return "needs a Docker daemon (test_compose.py checks the file)"
    if not SPARK and re.search(r"minikafka (replay|report|compare|simulate --capture)\b", line):
        return "Spark takes a minute (MINIKAFKA_WALKTHROUGH_SPARK=1 runs it)"
    if re.search(r"minikafka simulate\b.*--master", line):
        return "a campaign of many seeds (test_simulate_campaign runs a small one)"
    return None


@dataclass
class Server:
    proc: subprocess.Popen[str]
    line: str
    output: list[str] = field(default_factory=list)

    def stop(self) -> None:
        """Ctrl-C in its terminal: SIGINT to its process group, then wait until every
        process of the group (make and the broker under it) is gone."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)
        # A synchronous teardown (no event loop here): the one poll outside
        # testkit.polling, for the process group's end (no event to wait on for a group).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            self.proc.poll()
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


class Walkthrough:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        taken: set[int] = set()
        first, replay, control = free_run(3, taken), free_run(3, taken), free_run(1, taken)
        self.ports = {
            "9092": first,
            "9093": first + 1,
            "9094": first + 2,
            "9192": replay,
            "9193": replay + 1,
            "9194": replay + 2,
            "9990": control,
        }
        self.env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "MINIKAFKA_BOOTSTRAP": f"127.0.0.1:{first}",
        }
        self.servers: list[Server] = []
        self.background: list[tuple[str, subprocess.Popen[str]]] = []
        self.skipped: list[tuple[str, str]] = []
        self.ran: list[str] = []

    def ports_of(self, text: str) -> str:
        return re.sub(
            r"\b(9092|9093|9094|9192|9193|9194|9990)\b", lambda m: str(self.ports[m.group(1)]), text
        )

    def check(self, command: str, code: int | None, output: str, expected: str | None) -> None:
        assert "Traceback" not in output, f"{command}\n{output}"
        assert code == 0, f"{command} exited {code}\n{output}"
        if expected is not None:
            assert self.ports_of(expected) in output, f"{command}: no {expected!r} in\n{output}"

    def run_line(self, raw: str) -> None:
        line = raw.strip()
        if not line or line.startswith("#"):
            return
        reason = skip_reason(line)
        if reason is not None:
            self.skipped.append((line, reason))
            return
        expected = None
        if "# => " in line:
            expected = line.split("# => ", 1)[1].strip()
        command = self.ports_of(line)
        self.ran.append(command)
        export = re.match(r"^export (\w+)=(\S+)", command)
        if export:
            self.env[export.group(1)] = export.group(2)
            return
        if command == "wait":
            for text, proc in self.background:
                out, _ = proc.communicate(timeout=COMMAND_TIMEOUT_S)
                self.check(text, proc.returncode, out, None)
            self.background.clear()
            return
        if command.startswith("make run") or "minikafka serve" in command:
            self.start_server(command)
            return
        if command.rstrip().endswith("&") and not command.rstrip().endswith("&&"):
            text = command.rstrip()[:-1]
            self.background.append((text, self.spawn(text)))
            return
        result = subprocess.run(
            ["bash", "-c", command],
            cwd=self.workdir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        self.check(command, result.returncode, result.stdout, expected)

    def spawn(self, command: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.workdir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def start_server(self, command: str) -> None:
        for server in self.servers:
            server.stop()
        if command.startswith("make run"):
            rest = command[len("make run") :].split("#", 1)[0].rstrip()
            command = (
                f"make -o .venv/.base-installed run{rest} CONTROL_PORT={self.ports['9990']} "
                f"'ARGS=--port {self.ports['9092']}'"
            )
        proc = self.spawn(command)
        output: list[str] = []
        ready = threading.Event()

        def pump() -> None:
            assert proc.stdout is not None
            for text in proc.stdout:
                output.append(text)
                if text.startswith("minikafka ready: "):
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        assert ready.wait(COMMAND_TIMEOUT_S), f"{command}: no ready line"
        line = next((o for o in output if o.startswith("minikafka ready: ")), None)
        assert line is not None, f"{command} did not start:\n{''.join(output)}"
        self.servers.append(Server(proc, line, output))

    def run_python(self, code: str) -> None:
        result = subprocess.run(
            [str(VENV / "bin" / "python"), "-"],
            input=self.ports_of(code),
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        first = next((line for line in code.splitlines() if "bootstrap_servers" in line), "")
        name = f"python <the example with {first.strip()}>"
        self.ran.append(name)
        self.check(name, result.returncode, result.stdout + result.stderr, None)
        assert result.stdout.strip(), f"{name} printed nothing"

    def finish(self) -> None:
        for _, proc in self.background:
            proc.kill()
            proc.wait(timeout=10)
        for server in self.servers:
            server.stop()
        for server in self.servers:
            log = "".join(server.output)
            assert "Traceback" not in log, log


@pytest.mark.skipif(
    not (VENV / "bin" / "minikafka").exists() or shutil.which("make") is None,
    reason="needs the project's virtualenv (with the minikafka script) and make",
)
def test_the_readme_works_as_written(tmp_path: Path) -> None:
    for name in (".venv", "Makefile", "pyproject.toml"):
        target = VENV if name == ".venv" else ROOT / name
        (tmp_path / name).symlink_to(target)
    walk = Walkthrough(tmp_path)
    try:
        for block in readme_blocks():
            if block.language == "sh":
                for line in block.lines:
                    walk.run_line(line)
            elif block.language == "python" and "def test_" not in "\n".join(block.lines):
                walk.run_python("\n".join(block.lines))
    finally:
        walk.finish()
    print("ran:", *walk.ran, sep="\n  ")
    print("skipped:", *(f"{line}  ({why})" for line, why in walk.skipped), sep="\n  ")
    assert any("fault clear" in command for command in walk.ran)
    assert any("workload" in command for command in walk.ran)
