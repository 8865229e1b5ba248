"""How much faster than real time `minikafka simulate` runs, and what a run costs.

    .venv/bin/python -m bench.simulation.simulation_speed [--durations 60,300,600] [--seeds 1,2,3]
        [--faults none,default] [--service-times TABLE.json|CAPTURE [--io-threads N]] [--json]

Runs ``minikafka simulate`` (in its own process, as a user does: PYTHONHASHSEED=0 and no
address-space randomisation in the child it starts) for every duration, fault mix and seed,
and prints the virtual seconds, the wall seconds, their ratio, the digest and whether every
invariant held. With ``--service-times`` each request costs its broker a modelled service
time on ``--io-threads`` handlers (issue 24): more timers per request, so a lower ratio.
Figures, not assertions: the ratio depends on this machine and its load.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time

_DIGEST = re.compile(r"^digest ([0-9a-f]+)\s+([\d.]+) s virtual in ([\d.]+) s", re.MULTILINE)


def run_one(
    duration: float, faults: str, seed: int, extra: list[str] | None = None
) -> dict[str, object]:
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
    )
    elapsed = time.perf_counter() - started
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
        "ratio": round(virtual / wall, 1),
        "digest": found.group(1),
        "held": done.returncode == 0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durations", default="60,300,600")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--faults", default="none,default")
    parser.add_argument("--service-times", default=None, help="a table or a capture")
    parser.add_argument("--io-threads", default="8", help="handlers per broker (8)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
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
