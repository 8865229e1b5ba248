"""How much faster than real time `minikafka simulate` runs, and what a run costs.

    .venv/bin/python -m bench.simulation.simulation_speed [--durations 60,300,600] [--seeds 1,2,3]
        [--faults none,default] [--service-times TABLE.json|CAPTURE [--io-threads N]] [--json]
    .venv/bin/python -m bench.simulation.simulation_speed --vs TREE [--pairs 3]
        [--durations 600] [--seeds 7] [--faults default]

Runs ``minikafka simulate`` (in its own process, as a user does: PYTHONHASHSEED=0 and no
address-space randomisation in the child it starts) for every duration, fault mix and seed,
and prints the virtual seconds, the wall seconds, their ratio, the digest and whether every
invariant held. With ``--service-times`` each request costs its broker a modelled service
time on ``--io-threads`` handlers (issue 24): more timers per request, so a lower ratio.
Figures, not assertions: the ratio depends on this machine and its load.

``--vs TREE`` compares this checkout with another one (a worktree of a reference commit):
the first duration, fault mix and seed, run in turn (this, TREE, this, ...) ``--pairs``
times, each run's CPU the operating system's account of the finished child. Pairing is what
makes the ratio mean something: this machine's speed for one command moves ~2x between days,
so a ratio of two figures taken on different days says nothing. The figure compared is CPU
per virtual second (the two trees may simulate a different number of virtual seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

_DIGEST = re.compile(r"^digest ([0-9a-f]+)\s+([\d.]+) s virtual in ([\d.]+) s", re.MULTILINE)


def run_one(
    duration: float,
    faults: str,
    seed: int,
    extra: list[str] | None = None,
    tree: Path | None = None,
) -> dict[str, object]:
    """One ``minikafka simulate`` run, of this checkout or of ``tree``; ``cpu_s`` is the
    user and system time of the command and the child it starts."""
    env = None if tree is None else {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "minikafka",
            "simulate",
            "--seed",
            str(seed),
            "--duration",
            f"{duration:g}",
            "--faults",
            faults,
            *(extra or []),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tree,
        env=env,
    )
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    found = _DIGEST.search(done.stdout)
    if found is None:
        return {"duration": duration, "faults": faults, "seed": seed, "error": done.stderr[-300:]}
    virtual, wall = float(found.group(2)), float(found.group(3))
    return {
        "duration": duration,
        "faults": faults,
        "seed": seed,
        "virtual_s": virtual,
        "wall_s": wall,
        "process_s": round(elapsed, 1),
        "cpu_s": round(cpu, 2),
        "ratio": round(virtual / wall, 1),
        "digest": found.group(1),
        "held": done.returncode == 0,
    }


def compare(tree: Path, pairs: int, duration: float, faults: str, seed: int) -> int:
    """This checkout against ``tree``, in turn: CPU per virtual second, pair by pair."""
    print(
        f"{'pair':>4} {'this cpu s':>10} {'virtual s':>9} {'tree cpu s':>10} {'virtual s':>9}"
        f" {'cpu/virtual s, this/tree':>25}  digests"
    )
    ratios: list[float] = []
    for pair in range(1, pairs + 1):
        this = run_one(duration, faults, seed)
        other = run_one(duration, faults, seed, tree=tree)
        if "error" in this or "error" in other:
            print(f"{pair:>4}  error: {this.get('error') or other.get('error')}")
            return 1
        per_this = float(str(this["cpu_s"])) / float(str(this["virtual_s"]))
        per_other = float(str(other["cpu_s"])) / float(str(other["virtual_s"]))
        ratios.append(per_this / per_other)
        print(
            f"{pair:>4} {this['cpu_s']:>10} {this['virtual_s']:>9} {other['cpu_s']:>10} "
            f"{other['virtual_s']:>9} {ratios[-1]:>25.3f}  {this['digest']} {other['digest']}"
        )
    ratios.sort()
    median = ratios[len(ratios) // 2]
    print(f"median this/tree: {median:.3f} (min {ratios[0]:.3f}, max {ratios[-1]:.3f})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durations", default="60,300,600")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--faults", default="none,default")
    parser.add_argument("--service-times", default=None, help="a table or a capture")
    parser.add_argument("--io-threads", default="8", help="handlers per broker (8)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--vs", type=Path, default=None, help="a checkout to compare with")
    parser.add_argument("--pairs", type=int, default=3, help="with --vs: runs of each (3)")
    args = parser.parse_args()
    if args.vs is not None:
        first = (float(args.durations.split(",")[0]), args.faults.split(",")[0])
        return compare(args.vs.resolve(), args.pairs, *first, int(args.seeds.split(",")[0]))
    extra = []
    if args.service_times:
        extra = ["--service-times", args.service_times, "--io-threads", args.io_threads]
    print(
        f"{'duration':>8} {'faults':>8} {'seed':>4} {'virtual s':>9} {'wall s':>7} "
        f"{'ratio':>6} {'invariants':>10}  digest"
    )
    for duration in (float(d) for d in args.durations.split(",")):
        for faults in args.faults.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                row = run_one(duration, faults, seed, extra)
                if "error" in row:
                    print(f"{duration:>8g} {faults:>8} {seed:>4}  error: {row['error']}")
                    continue
                print(
                    f"{duration:>8g} {faults:>8} {seed:>4} {row['virtual_s']:>9.1f} "
                    f"{row['wall_s']:>7.1f} {row['ratio']:>5.1f}x "
                    f"{'held' if row['held'] else 'BROKEN':>10}  {row['digest']}"
                )
                if args.json:
                    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
