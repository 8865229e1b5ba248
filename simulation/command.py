"""``minikafka simulate``: the workload mix against a simulated cluster, on a virtual clock.

    minikafka simulate --brokers 3 --seed 7 --duration 600 --faults restart=2,partition=2
    minikafka simulate --seeds 1..20 --duration 300 --faults default
    minikafka simulate --seeds 1..1000 --duration 60 --faults default --master local[2] --out DIR

Prints, per run, the faults the nemesis applied, the invariants as a table and a digest
(same seed, same digest), and the ratio of virtual to wall time. With ``--seeds A..B`` one
line per seed and, for the first seed that breaks an invariant, the command that replays it.
Exit status 1 when an invariant broke. ``--row FILE`` also writes a single run's row as JSON
(`run_row`). With ``--master`` (or ``--check-determinism``) the seeds are a campaign on Spark,
one seed per task (``python -m whatif.campaign``), its results in ``--out``.

Hash randomisation and address-space randomisation are per process and decide the order of
some iterations (strings hash by seed, most objects by address), so the command runs itself
again in a child with ``PYTHONHASHSEED=0`` and without address randomisation: then the same
seed gives the same digest on any run (of the same code and Python).
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

DEFAULT_FAULTS = (
    "restart=2,partition=2,pause=2,delay=1,lagging-failover=1,crash=1,swizzle=1,hold=1,skew=1"
)
_CHILD = "MINIKAFKA_SIMULATE_CHILD"
_ADDR_NO_RANDOMIZE = 0x0040000  # <sys/personality.h>


def _without_address_randomisation() -> None:
    """In the child, before exec: no address-space randomisation (``setarch -R``).

    CPython hashes most objects by address, so a set of futures — aiokafka waits on
    ``asyncio.wait(set(...))`` — iterates in an order that follows where the allocator put
    them; with ASLR that differs from one process to the next, and so would the run."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        current = libc.personality(0xFFFFFFFF)
        libc.personality(current | _ADDR_NO_RANDOMIZE)
    except (OSError, AttributeError):  # not Linux: runs stay alike within one process only
        pass


def add_simulate_parser(sub: Any) -> None:
    simulate = sub.add_parser(
        "simulate", help="run the workload mix against a simulated cluster on a virtual clock"
    )
    simulate.add_argument("--brokers", type=int, default=3, help="brokers (3)")
    simulate.add_argument("--seed", type=int, default=0, help="the run's seed (0)")
    simulate.add_argument(
        "--seeds", default=None, metavar="A..B", help="run every seed from A to B (inclusive)"
    )
    simulate.add_argument(
        "--duration", type=float, default=60.0, help="virtual seconds of traffic (60)"
    )
    simulate.add_argument(
        "--faults",
        default="none",
        help="KIND=COUNT,... of restart, partition, pause, delay, lagging-failover, "
        "broker-partition, one-way, loss, remote-slow, remote-down (the two: --tiered), "
        "crash (a power loss: the unflushed tail goes), swizzle, hold, skew; "
        f"'default' is {DEFAULT_FAULTS}",
    )
    simulate.add_argument(
        "--no-buggify",
        action="store_true",
        help="no BUGGIFY point on (by default the seed turns some on: --list-buggify)",
    )
    simulate.add_argument(
        "--list-buggify",
        action="store_true",
        help="name the BUGGIFY points (simulation-only broker paths the seed turns on) and exit",
    )
    simulate.add_argument(
        "--rate", type=float, default=5.0, help="records per second per producer (5)"
    )
    simulate.add_argument(
        "--tiered",
        action="store_true",
        help="tiered storage (KIP-405) on: a tiered topic in the mix, its producer and a "
        "reader from offset 0, the remote tier's faults for the nemesis",
    )
    simulate.add_argument(
        "--out", type=Path, default=None, help="capture every request into this directory"
    )
    simulate.add_argument(
        "--service-times",
        type=Path,
        default=None,
        metavar="TABLE.json|CAPTURE",
        help="what each request costs its broker in virtual time: a service-time table, or "
        "a capture to fit one from (default: nothing, requests take no time)",
    )
    simulate.add_argument(
        "--io-threads",
        type=int,
        default=8,
        help="request handlers per broker with --service-times (Kafka's num.io.threads, 8)",
    )
    simulate.add_argument(
        "--row",
        type=Path,
        default=None,
        metavar="FILE",
        help="with --seed: write the run's row (digest, invariants, times) as JSON, and a "
        "broken run's history beside it",
    )
    simulate.add_argument(
        "--plant",
        default=None,
        metavar="BUG",
        help="run with a planted bug in (--list-planted names them); with --seeds, stop at "
        "the first seed that catches it",
    )
    simulate.add_argument(
        "--list-planted", action="store_true", help="name the planted bugs and exit"
    )
    simulate.add_argument(
        "--check-determinism",
        action="store_true",
        help="campaign: run each seed twice, in separate tasks, and report any seed whose "
        "two digests differ",
    )
    _add_whatif_options(simulate)


def _add_whatif_options(simulate: Any) -> None:
    """``--capture`` turns simulate into the what-if grid (issue 24): ``python -m whatif``."""
    simulate.add_argument(
        "--capture",
        type=Path,
        default=None,
        help="replay this capture in virtual time instead of the workload mix, one Spark task "
        "per (--grid config, seed) cell; --seeds N then means seeds 0..N-1",
    )
    simulate.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="with --capture: a broker config axis (repeatable; the first values: baseline)",
    )
    simulate.add_argument(
        "--master",
        default=None,
        help="Spark master: with --capture the what-if grid, else a campaign of --seeds, "
        "one seed per task (local[*] by default with --check-determinism)",
    )
    simulate.add_argument(
        "--shared-threads",
        type=int,
        default=None,
        metavar="N",
        help="with --capture: every broker on one pool of N threads, as minikafka serve "
        "runs them (1), instead of Kafka's num.io.threads per broker",
    )


def _seed_range(args: argparse.Namespace) -> list[int]:
    if args.seeds is None:
        return [args.seed]
    first, sep, last = str(args.seeds).partition("..")
    if not sep or not first.isdigit() or not last.isdigit() or int(last) < int(first):
        raise ValueError(f"--seeds: expected A..B with A <= B, got {args.seeds!r}")
    return list(range(int(first), int(last) + 1))


def run_simulate(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Check the arguments, then run (in a child with PYTHONHASHSEED=0 unless already).

    The broker is imported only here: ``minikafka``'s other commands build this parser
    without paying for it. A run re-executes itself first and leaves every check to its
    child (which prints the same errors; its exit status is ours): the parent would
    import the whole broker for checks the child makes again (~0.6 s of every run)."""
    runs_here = args.capture is None and args.master is None and not args.check_determinism
    if runs_here and os.environ.get(_CHILD) != "1":
        return run_pinned(argv).returncode
    from simulation.nemesis import parse_faults
    from simulation.planted import PLANTED

    if args.list_planted:
        for bug in PLANTED.values():
            print(f"{bug.name}\n    {bug.summary}\n    replaces {bug.where}")
        return 0
    if args.list_buggify:
        from broker.buggify import ENABLE_PROBABILITY, FIRE_PROBABILITIES, FIRE_PROBABILITY, POINTS

        print(
            f"each point is on in a run with probability {ENABLE_PROBABILITY:g} (drawn from "
            "the seed), then fires with its probability each time it is passed:"
        )
        for name, what in POINTS.items():
            fires = FIRE_PROBABILITIES.get(name, FIRE_PROBABILITY)
            print(f"{name}  (fires {fires:g})\n    {what}")
        return 0
    if args.plant is not None and args.plant not in PLANTED:
        print(
            f"minikafka simulate: error: --plant: no planted bug {args.plant!r} "
            "(--list-planted names them)",
            file=sys.stderr,
        )
        return 2
    if args.capture is not None:
        return _run_tool("whatif", argv)
    if args.grid or args.shared_threads is not None:
        print(
            "minikafka simulate: error: --grid and --shared-threads need --capture",
            file=sys.stderr,
        )
        return 2
    if args.master is not None or args.check_determinism:
        return _run_tool("whatif.campaign", argv)
    if args.row is not None and args.seeds is not None:
        print("minikafka simulate: error: --row takes one --seed, not --seeds", file=sys.stderr)
        return 2
    try:
        seeds = _seed_range(args)
        faults = parse_faults(DEFAULT_FAULTS if args.faults == "default" else args.faults)
    except ValueError as exc:
        print(f"minikafka simulate: error: {exc}", file=sys.stderr)
        return 2
    if args.brokers < 1 or args.duration <= 0 or args.rate <= 0 or args.io_threads < 1:
        print(
            "minikafka simulate: error: --brokers, --duration, --rate and --io-threads must be > 0",
            file=sys.stderr,
        )
        return 2
    if args.service_times is not None and not args.service_times.exists():
        print(f"minikafka simulate: error: no {args.service_times}", file=sys.stderr)
        return 2
    # (kafka.authorizer.logger: the audit line of every denial the SASL client meets)
    for noisy in ("aiokafka", "asyncio", "broker", "kafka.authorizer.logger", "kafka_tools"):
        logging.getLogger(noisy).setLevel(max(logging.getLogger().level, logging.CRITICAL))
    return _run_seeds(args, seeds, faults, sys.stdout)


def run_pinned(argv: Sequence[str], **run: Any) -> subprocess.CompletedProcess[Any]:
    """``python -m minikafka *argv`` as the run's own process: ``PYTHONHASHSEED=0``, no
    address randomisation, and marked as the child so it runs rather than re-executes.

    A campaign's task (`whatif.seed_runs`) starts seeds this way too, skipping the parent
    that would only start this child."""
    command = [sys.executable, "-m", "minikafka", *argv]
    return subprocess.run(
        command,
        env=child_environment(os.environ),
        preexec_fn=_without_address_randomisation,
        check=False,
        **run,
    )


def child_environment(parent: Mapping[str, str]) -> dict[str, str]:
    """The pinned child's environment: the parent's, hash seed 0, marked as the child.

    Where the parent says ``PYTHONDONTWRITEBYTECODE`` (and names no cache prefix), the child
    keeps its bytecode anyway, under the temporary directory (``PYTHONPYCACHEPREFIX``), not
    beside the sources: without it every run compiles the ~450 modules of the broker again
    (~2 s of CPU a run, a campaign's thousand runs included). Nothing lands in the source
    tree, which is what that setting usually asks; the run is the same (same digest)."""
    env = {**parent, "PYTHONHASHSEED": "0", _CHILD: "1"}
    if env.get("PYTHONDONTWRITEBYTECODE") and not env.get("PYTHONPYCACHEPREFIX"):
        del env["PYTHONDONTWRITEBYTECODE"]
        user = os.getuid() if hasattr(os, "getuid") else 0
        env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / f"minikafka-pycache-{user}")
    return env


def _run_tool(module: str, argv: Sequence[str]) -> int:
    """The what-if grid or a campaign in a child (``python -m whatif[.campaign]``): simulation
    must not import whatif, and the child's hash seed is fixed so that a digest repeats."""
    args = list(argv)
    rest = args[args.index("simulate") + 1 :] if "simulate" in args else args
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    command = [sys.executable, "-m", module, *rest]
    return subprocess.call(command, env=env, preexec_fn=_without_address_randomisation)


def _run_seeds(
    args: argparse.Namespace, seeds: list[int], faults: dict[str, int], out: TextIO
) -> int:
    from simulation.request_handlers import load_service_times
    from simulation.scenario import SimulationConfig, simulate

    try:
        model = load_service_times(args.service_times) if args.service_times else None
    except ValueError as exc:
        print(f"minikafka simulate: error: --service-times: {exc}", file=sys.stderr)
        return 2
    if model is not None:
        apis = len(model.by_api)
        print(
            f"service times: {model.source} ({apis} API{'' if apis == 1 else 's'} named); "
            f"{args.io_threads} request "
            "handlers per broker",
            file=out,
        )
    broken: int | None = None
    for seed in seeds:
        capture = args.out / f"seed-{seed}" if args.out is not None and len(seeds) > 1 else args.out
        config = SimulationConfig(
            brokers=args.brokers,
            seed=seed,
            duration_s=args.duration,
            faults=faults,
            out=capture,
            rate_per_s=args.rate,
            service_times=model,
            io_threads=args.io_threads,
            plant=args.plant,
            tiered=args.tiered,
            buggify=not args.no_buggify,
        )
        result = simulate(config)
        if len(seeds) == 1:
            _print_run(result, out)
        else:
            failed = [v.name for v in result.verdicts if not v.held]
            state = "held" if not failed else "BROKEN: " + "; ".join(failed)
            print(f"seed {seed:>4}  digest {result.digest}  {_speed(result)}  {state}", file=out)
        if args.row is not None:
            from simulation.run_row import write_row

            write_row(args.row, result, replay_command(args, seed))
        if not result.held and broken is None:
            broken = seed
            if args.plant is not None:
                caught = "; ".join(v.name for v in result.verdicts if not v.held)
                tried = seeds.index(seed) + 1
                print(
                    f"planted bug {args.plant} caught by seed {seed} "
                    f"({tried} seed{'s' * (tried != 1)}): {caught}",
                    file=out,
                )
                break
    if broken is not None:
        print(
            f"first seed that broke an invariant: {broken}; replay it with:\n"
            f"  {replay_command(args, broken)}",
            file=out,
        )
        return 1
    return 0


def replay_command(args: argparse.Namespace, seed: int) -> str:
    """The command that runs ``seed`` again exactly as this run did."""
    replay = (
        f"minikafka simulate --brokers {args.brokers} --seed {seed} "
        f"--duration {args.duration:g} --faults {args.faults} --rate {args.rate:g}"
    )
    if args.service_times is not None:
        replay += f" --service-times {args.service_times} --io-threads {args.io_threads}"
    if args.tiered:
        replay += " --tiered"
    if args.plant is not None:
        replay += f" --plant {args.plant}"
    if args.no_buggify:
        replay += " --no-buggify"
    return replay


def _speed(result: Any) -> str:
    ratio = result.virtual_s / result.wall_s if result.wall_s > 0 else float("inf")
    return f"{result.virtual_s:.1f} s virtual in {result.wall_s:.1f} s ({ratio:.1f}x)"


def _print_run(result: Any, out: TextIO) -> None:
    print(f"seed {result.seed}", file=out)
    for line in result.history.faults:
        print(f"  fault  {line}", file=out)
    width = max(len(v.name) for v in result.verdicts)
    print(f"  {'invariant'.ljust(width)}  held  detail", file=out)
    for v in result.verdicts:
        print(f"  {v.name.ljust(width)}  {'yes' if v.held else 'NO '}   {v.detail}", file=out)
    for v in result.verdicts:  # the smallest pieces of history that show each violation
        for piece in v.evidence:
            print(
                f"\n{v.name}:\n" + "\n".join(f"  {line}" for line in piece.splitlines()), file=out
            )
    print(f"digest {result.digest}  {_speed(result)}", file=out)
