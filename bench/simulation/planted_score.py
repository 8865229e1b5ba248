"""The simulator's score: how many seeds it takes to catch each planted bug.

    .venv/bin/python -m bench.simulation.planted_score [--seeds 200] [--duration 60]
        [--faults default] [--bugs NAME,NAME] [--jobs 2] [--json]

For every bug of ``minikafka simulate --list-planted`` runs
``minikafka simulate --plant NAME --seeds 1..N`` (which stops at the first seed that breaks
an invariant) and prints a table: the bug, the seed that caught it, how many seeds that took,
which invariant saw it, and the wall time. ``--jobs`` runs that many bugs at once. A bug not
caught within ``--seeds`` is a hole to fill (a workload, a fault or a checker missing), and
the table says so. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

_CAUGHT = re.compile(r"^planted bug (\S+) caught by seed (\d+) \((\d+) seeds?\): (.*)$", re.M)


def planted_names() -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "minikafka", "simulate", "--list-planted"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if line and not line.startswith(" ")]


def score(bug: str, seeds: int, duration: float, faults: str) -> dict[str, object]:
    command = [
        sys.executable, "-m", "minikafka", "simulate", "--plant", bug, "--seeds", f"1..{seeds}",
        "--duration", f"{duration:g}", "--faults", faults,
    ]  # fmt: skip
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    found = _CAUGHT.search(done.stdout)
    if found is None:
        return {"bug": bug, "seed": None, "seeds": seeds, "checker": "not caught", "wall_s": wall}
    return {
        "bug": bug,
        "seed": int(found.group(2)),
        "seeds": int(found.group(3)),
        "checker": found.group(4),
        "wall_s": wall,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--faults", default="default")
    parser.add_argument("--bugs", default=None, help="comma-separated (default: every one)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    bugs = args.bugs.split(",") if args.bugs else planted_names()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(lambda b: score(b, args.seeds, args.duration, args.faults), bugs))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"seeds 1..{args.seeds}, --duration {args.duration:g} --faults {args.faults}\n")
    print("| planted bug | caught by seed | seeds needed | checker that saw it | wall s |")
    print("|---|---|---|---|---|")
    for row in rows:
        seed = row["seed"] if row["seed"] is not None else "-"
        needed = row["seeds"] if row["seed"] is not None else f"> {row['seeds']}"
        print(f"| {row['bug']} | {seed} | {needed} | {row['checker']} | {row['wall_s']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
