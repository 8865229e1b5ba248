"""``python -m whatif``: the what-if grid (``minikafka simulate --capture`` runs this).

python -m whatif --capture DIR --grid KEY=V1,V2 [--grid ...] [--seeds N|A..B]
                 [--master URL] [--brokers N] [--service-times TABLE.json|CAPTURE]
                 [--io-threads N] --out DIR
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from whatif.grid_cells import check_axes, expand_grid, parse_grid, parse_seeds


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="minikafka simulate --capture",
        description="A capture replayed in virtual time under a grid of broker configs x "
        "seeds, one Spark task per cell.",
        allow_abbrev=False,  # simulate's --seed must not read as --seeds
    )
    parser.add_argument("--capture", required=True, type=Path, help="capture directory")
    parser.add_argument(
        "--grid", action="append", default=[], metavar="KEY=V1,V2", help="a broker config axis"
    )
    parser.add_argument("--seeds", default="1", help="N (seeds 0..N-1) or A..B (1)")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    parser.add_argument("--out", required=True, type=Path, help="results directory")
    parser.add_argument(
        "--brokers", type=int, default=None, help="target brokers (default: the capture's)"
    )
    parser.add_argument(
        "--service-times",
        type=Path,
        default=None,
        metavar="TABLE.json|CAPTURE",
        help="service-time table or capture to fit (default: fitted from --capture)",
    )
    parser.add_argument("--io-threads", type=int, default=8, help="num.io.threads (8)")
    parser.add_argument(
        "--shared-threads",
        type=int,
        default=None,
        metavar="N",
        help="model every broker on one pool of N threads, followers' work included, as "
        "minikafka serve runs them (1), instead of Kafka's threads per broker",
    )
    args, _ = parser.parse_known_args(argv)  # simulate's own options pass through unused
    try:
        args.axes = parse_grid(args.grid)
        check_axes(args.axes)
        args.seed_list = parse_seeds(str(args.seeds))
    except ValueError as exc:
        parser.error(str(exc))
    if not args.capture.exists():
        parser.error(f"no capture at {args.capture}")
    if args.io_threads < 1 or any(
        n is not None and n < 1 for n in (args.brokers, args.shared_threads)
    ):
        parser.error("--brokers, --io-threads and --shared-threads must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from simulation.request_handlers import load_service_times
    from spark_jobs.session import build_spark_session
    from whatif.grid import run_grid

    for noisy in ("aiokafka", "asyncio", "broker"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    try:
        model = load_service_times(args.service_times or args.capture)
    except ValueError as exc:
        print(f"minikafka simulate: error: --service-times: {exc}", file=sys.stderr)
        return 2
    print(f"service times: {model.source}; {args.io_threads} request handlers per broker")
    cells = expand_grid(
        args.axes,
        args.seed_list,
        str(args.capture.resolve()),
        args.brokers,
        args.io_threads,
        model,
        args.out.resolve(),
        args.shared_threads,
    )
    # Python workers hash strings alike in every cell: same seed, same digest.
    spark = build_spark_session(
        "minikafka-whatif", args.master, {"spark.executorEnv.PYTHONHASHSEED": "0"}
    )
    try:
        outcomes = run_grid(spark, cells, args.out)
    finally:
        spark.stop()
    return 0 if any(o.error is None for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
