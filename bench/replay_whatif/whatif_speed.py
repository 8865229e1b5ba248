"""What one what-if cell costs: a capture replayed in virtual time, timed without Spark.

    .venv/bin/python -m bench.replay_whatif.whatif_speed CAPTURE [--seed N] [--brokers N]
        [--io-threads N] [--no-service-times] [--profile [--top N]] [--json]

Reads the capture (``whatif.virtual_replay.read_replay_rows``), fits the service-time model
from it (``load_service_times``, the grid's default), runs one ``replay_virtual`` cell and
prints the requests replayed, the virtual seconds, the wall seconds of each phase (read,
fit, replay), the replay's CPU seconds (steadier than wall on a shared machine), the
cell's wall and CPU seconds (read + replay, what a grid cell runs: the grid fits the
model once, on its driver), requests per wall second and the digest. ``--profile`` runs
the replay under cProfile and prints the top functions by cumulative and by own time.

The process re-executes itself with ``PYTHONHASHSEED=0`` (what ``minikafka simulate
--capture`` gives its cells) so two runs of one cell print one digest. Figures, not
assertions: wall time depends on this machine and its load (issue 24's target is an hour
of capture in under a minute per cell).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import os
import pstats
import sys
import time
from pathlib import Path

MODULE = "bench.replay_whatif.whatif_speed"


def _reexec_with_fixed_hash_seed() -> None:
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        os.execve(sys.executable, [sys.executable, "-m", MODULE, *sys.argv[1:]], env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--brokers", type=int, default=None)
    parser.add_argument("--io-threads", type=int, default=8)
    parser.add_argument("--no-service-times", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    _reexec_with_fixed_hash_seed()
    from protocol.capture_files import captured_cluster_config
    from simulation.request_handlers import load_service_times
    from whatif.virtual_replay import (
        VirtualReplayConfig,
        capture_brokers,
        read_replay_rows,
        replay_virtual,
    )

    for noisy in ("aiokafka", "asyncio", "broker"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    t0, read_cpu0 = time.perf_counter(), time.process_time()
    rows = read_replay_rows(args.capture)
    t1, read_cpu = time.perf_counter(), time.process_time() - read_cpu0
    model = None if args.no_service_times else load_service_times(args.capture)
    t2 = time.perf_counter()
    config = VirtualReplayConfig(  # as `whatif.grid_cells.run_cell` makes a cell's
        brokers=args.brokers or capture_brokers(rows),
        seed=args.seed,
        service_times=model,
        io_threads=args.io_threads,
        captured_configs=captured_cluster_config(args.capture),
    )
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    cpu0 = time.process_time()
    run = replay_virtual(rows, config)
    cpu1 = time.process_time()
    if profiler is not None:
        profiler.disable()
    t3 = time.perf_counter()
    client = sum(1 for r in run.results if r.traffic == "client" and r.replay_skip is None)
    figures = {
        "capture": str(args.capture),
        "rows": len(rows),
        "client_requests": client,
        "unanswered": run.unanswered,
        "virtual_s": round(run.virtual_s, 3),
        "read_s": round(t1 - t0, 2),
        "fit_s": round(t2 - t1, 2),
        "replay_wall_s": round(t3 - t2, 2),
        "replay_cpu_s": round(cpu1 - cpu0, 2),
        # What a grid cell runs (`whatif.grid_cells.run_cell`): read + replay. The fit is
        # the driver's, once per grid.
        "cell_wall_s": round((t1 - t0) + (t3 - t2), 2),
        "cell_cpu_s": round(read_cpu + cpu1 - cpu0, 2),
        "requests_per_wall_s": round(client / max(t3 - t2, 1e-9)),
        "digest": run.digest,
        "profiled": args.profile,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:>20}: {value}")
    if profiler is not None:
        stats = pstats.Stats(profiler, stream=sys.stdout)
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
