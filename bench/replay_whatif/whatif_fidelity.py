"""Fidelity of the what-if in virtual time: one capture replayed in real time and simulated.

    .venv/bin/python -m bench.replay_whatif.whatif_fidelity [--capture DIR] [--duration 30]
        [--realtime 2] [--seeds 4] [--loaded] [--shared-threads N] --out DIR

1. A capture: the README's workload (``minikafka serve --brokers 3 --capture-dir`` and
   ``minikafka workload --duration``), unless ``--capture`` names one.
2. ``--realtime`` real-time replays of it against a fresh 3-broker target each
   (``minikafka replay --target-brokers 3``): Kafka's TotalTimeMs from each target's capture.
3. The simulated side: ``minikafka simulate --capture`` with ``--seeds`` seeds, service
   times, network threads, links and the followers' work fitted from the capture; each
   cell captures its simulated target, so both sides are measured alike. By default the
   simulated cluster runs on one thread (``--shared-threads 1``), as the captured
   ``minikafka serve`` does -- the model of the system the capture came from; ``0`` gives
   Kafka's threads per broker, the what-if.
4. ``minikafka compare`` of every run, and one table: the client Produce and Fetch rows
   and the Produce and Fetch purgatory rows, p50 and p99, as captured, the real-time
   runs' range and the simulated seeds' range, and the simulated median's ratio to the
   captured figure and to the real-time median.
5. With ``--loaded``: the grid again with every core busy (a busy-looping process per
   core): each seed must give the same digest, and the table the same figures.

Figures, not pass/fail: the real-time side moves with this machine's load (that is why
the simulation exists); the exit status is 1 only when a loaded simulation differs from the
quiet one (determinism) or a step fails.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROWS = (
    ("api", "Produce"),
    ("api", "Fetch"),
    ("purgatory", "Produce"),
    ("purgatory", "Fetch"),
)
_READY = re.compile(r"ready", re.IGNORECASE)


def minikafka(*args: str) -> list[str]:
    return [sys.executable, "-m", "minikafka", *args]


def run(argv: Sequence[str], log: Path) -> None:
    with log.open("w") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}; see {log}")


def make_capture(out: Path, duration: float) -> Path:
    """The README's flow: a 3-broker cluster capturing, the workload against it."""
    capture = out / "capture"
    log = (out / "serve.log").open("w")
    serve = subprocess.Popen(
        minikafka("serve", "--brokers", "3", "--port", "0", "--capture-dir", str(capture)),
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert serve.stdout is not None
        port = None
        for line in serve.stdout:
            found = re.search(r"127\.0\.0\.1:(\d+)", line)
            if _READY.search(line) and found:
                port = found.group(1)
                break
        if port is None:
            raise SystemExit("the capturing cluster did not start; see serve.log")
        run(
            minikafka(
                "workload", "--bootstrap", f"127.0.0.1:{port}", "--duration", f"{duration:g}"
            ),
            out / "workload.log",
        )
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
    return capture


@contextlib.contextmanager
def busy_cores() -> Iterator[None]:
    """A busy-looping process per core while the block runs."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def simulate(capture: Path, seeds: int, out: Path, shared: int | None) -> list[dict[str, object]]:
    extra = ["--shared-threads", str(shared)] if shared is not None else []
    run(
        minikafka(
            "simulate", "--capture", str(capture), "--seeds", str(seeds), "--out", str(out), *extra
        ),
        out.parent / f"{out.name}.log",
    )
    cells: list[dict[str, object]] = json.loads((out / "grid.json").read_text())["cells"]
    return sorted(cells, key=lambda c: int(str(c["seed"])))


def compare(runs: dict[str, Path], out: Path) -> dict[tuple[str, str], dict[str, str]]:
    argv = minikafka("compare", *map(str, runs.values()), "--out", str(out))
    for label in runs:
        argv += ["--label", label]
    run(argv, out.parent / "compare.log")
    table: dict[tuple[str, str], dict[str, str]] = {}
    for kind, name in (("api", "compare_by_api.csv"), ("purgatory", "compare_by_purgatory.csv")):
        with (out / "tables" / name).open() as f:
            for row in csv.DictReader(f):
                table[(kind, row["key"])] = row
    return table


def spread(values: list[float]) -> str:
    return f"{min(values):.3f}" if len(values) == 1 else f"{min(values):.3f}-{max(values):.3f}"


def fidelity_rows(
    table: dict[tuple[str, str], dict[str, str]], real: list[str], simulated: list[str]
) -> list[str]:
    lines = [
        "| row | quantile | captured (ms) | real-time replays (ms) | simulated seeds (ms) "
        "| simulated / captured | simulated / real time |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, key in ROWS:
        row = table.get((kind, key))
        if row is None:
            continue
        for q in ("p50", "p99"):
            rt = [float(row[f"{label}__{q}"]) for label in real if row.get(f"{label}__{q}")]
            sim = [float(row[f"{label}__{q}"]) for label in simulated if row.get(f"{label}__{q}")]
            captured = float(row.get(f"captured__{q}") or "nan")
            if not rt or not sim:
                continue
            mid = statistics.median(sim)
            lines.append(
                f"| {kind} {key} | {q} | {captured:.3f} | {spread(rt)} | {spread(sim)} "
                f"| {mid / captured:.2f}x | {mid / statistics.median(rt):.2f}x |"
            )
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capture", type=Path, default=None)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--realtime", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--loaded", action="store_true")
    parser.add_argument(
        "--shared-threads",
        type=int,
        default=1,
        help="the simulated cluster's threads (1: minikafka serve's one event loop, the "
        "system the capture was taken from; 0: Kafka's threads per broker)",
    )
    parser.add_argument("--out", type=Path, required=True)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    capture = args.capture or make_capture(args.out, args.duration)
    runs: dict[str, Path] = {}
    for i in range(args.realtime):
        where = args.out / f"realtime-{i}"
        run(
            minikafka(
                "replay", "--capture", str(capture), "--target-brokers", "3", "--out", str(where)
            ),
            args.out / f"realtime-{i}.log",
        )
        runs[f"real-time {i}"] = where
    shared = args.shared_threads or None
    cells = simulate(capture, args.seeds, args.out / "simulated", shared)
    for cell in cells:
        runs[f"simulated seed {cell['seed']}"] = Path(str(cell["dir"]))
    table = compare(runs, args.out / "compare")
    real = [label for label in runs if label.startswith("real-time")]
    simulated = [label for label in runs if label.startswith("simulated")]
    print(f"capture {capture}: {args.realtime} real-time replays, {len(cells)} simulated seeds")
    print("\n".join(fidelity_rows(table, real, simulated)))
    walls = [float(str(c["wall_s"])) for c in cells]
    print(f"simulated cells: {spread(walls)} s wall each; bench {time.monotonic() - began:.0f} s")
    if not args.loaded:
        return 0
    with busy_cores():
        loaded = simulate(capture, args.seeds, args.out / "simulated-loaded", shared)
    same = [(a["digest"], b["digest"]) for a, b in zip(cells, loaded, strict=True)]
    quiet_md = (args.out / "simulated" / "comparison.md").read_text()
    loaded_md = (args.out / "simulated-loaded" / "comparison.md").read_text()
    print(f"with every core busy: digests {'the same' if all(a == b for a, b in same) else same}")
    print(
        f"with every core busy: comparison.md {'identical' if quiet_md == loaded_md else 'DIFFERS'}"
    )
    return 0 if all(a == b for a, b in same) and quiet_md == loaded_md else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
