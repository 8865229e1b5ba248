"""Run the whole test suite several times in a row, some of the runs on a loaded machine,
and say which tests failed even once.

A test that fails one run in twenty fails CI one submission in twenty; this is how we find
them before CI does. Each run is ``python -m pytest -q`` in the checkout (the suite
``make test`` runs, without lint and types), its output kept in ``--out DIR/run-N.log``.
A loaded run keeps every core busy for its whole length with ``stress-ng --cpu N`` when
Debian's ``stress-ng`` is installed, else with N busy-looping Python processes — so the
broker, its clients and the test all get a fraction of a core, as on a busy CI machine.

Run: ``.venv/bin/python -m bench.suite.suite_soak --runs 10 --loaded 5`` (runs 1, 3, 5... are
the loaded ones while they last). Prints one line per run and, at the end, every test that
failed with the runs it failed in; exits 1 if any run failed. ``--pytest-args`` passes
more arguments (``-x``, a test path, ``-p no:randomly``...).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

_SUMMARY = re.compile(r"^=*\s*(\d+ (passed|failed).*) in ([\d.]+)s", re.M)
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


@contextlib.contextmanager
def _load(cores: int) -> Iterator[str]:
    """Keep ``cores`` cores busy until the block ends; yields what does it."""
    if shutil.which("stress-ng"):
        cmd = ["stress-ng", "--cpu", str(cores), "--cpu-method", "matrixprod", "--quiet"]
        procs = [subprocess.Popen(cmd, start_new_session=True)]
        what = f"stress-ng --cpu {cores}"
    else:
        spin = "while True: pass"
        procs = [
            subprocess.Popen([sys.executable, "-c", spin], start_new_session=True)
            for _ in range(cores)
        ]
        what = f"{cores} busy loops"
    try:
        yield what
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()


def _run_suite(log: Path, pytest_args: list[str]) -> tuple[int, str, list[str]]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args]
    with log.open("w") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    text = log.read_text(errors="replace")
    match = _SUMMARY.search(text)
    summary = f"{match.group(1)} in {match.group(3)}s" if match else "no summary"
    return rc, summary, _FAILED.findall(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--loaded", type=int, default=5, help="how many runs are loaded")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--out", type=Path, default=Path("suite-soak"))
    parser.add_argument("--pytest-args", default="", help="more pytest arguments, one string")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    loaded_runs = _loaded_runs(args.runs, args.loaded)
    failures: dict[str, list[int]] = {}
    green = 0
    for n in range(1, args.runs + 1):
        loaded = n in loaded_runs
        started = time.monotonic()
        ctx = _load(args.cores) if loaded else contextlib.nullcontext("quiet")
        with ctx as what:
            rc, summary, failed = _run_suite(args.out / f"run-{n}.log", args.pytest_args.split())
        wall = time.monotonic() - started
        green += rc == 0
        for test in failed:
            failures.setdefault(test, []).append(n)
        print(f"run {n:2d} ({what}): rc={rc} {summary} [{wall:.0f} s wall]", flush=True)
    print(f"\n{green} of {args.runs} runs green")
    for test, runs in sorted(failures.items()):
        print(f"  {test}: failed in run(s) {', '.join(map(str, runs))}")
    return 0 if green == args.runs else 1


def _loaded_runs(runs: int, loaded: int) -> set[int]:
    """Which runs are loaded: alternate, starting with the first (odd runs, then even)."""
    order = [*range(1, runs + 1, 2), *range(2, runs + 1, 2)]
    return set(order[:loaded])


if __name__ == "__main__":
    sys.exit(main())
