"""``minikafka`` command line: ``serve`` (and the tools built on it).

The shape of ``serve`` is relied on by other tools and tests: when every listener is up
it prints exactly one line ``minikafka ready: bootstrap=HOST:PORT[,HOST:PORT...]`` on
stdout (followed by `` control=http://HOST:PORT`` when ``--control-port`` is given),
then serves until SIGINT or SIGTERM and exits 0. A bad config stops it at once
with exit code 2 and a message naming the key.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from broker.app import MiniKafka
from broker.config import ConfigError, load_config, parse_overrides

log = logging.getLogger("broker.cli")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minikafka", description="A Kafka-compatible mini broker simulator."
    )
    parser.add_argument("--log-level", default="INFO", help="Python logging level (INFO)")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run one or more brokers")
    serve.add_argument("--brokers", type=int, default=1, help="brokers in this process (1)")
    serve.add_argument("--host", default="127.0.0.1", help="listen address (127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=9092, help="port of broker 0; broker i uses port+i; 0: free"
    )
    serve.add_argument(
        "--advertised-host",
        default=None,
        help="host name Metadata gives clients (default: --host), like Kafka's "
        "advertised.listeners; e.g. a container listening on 0.0.0.0",
    )
    serve.add_argument("--data-dir", type=Path, default=None, help="keep logs here (memory)")
    serve.add_argument("--config", type=Path, default=None, help="a Kafka server.properties")
    serve.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka broker config, e.g. num.partitions=3 (repeatable)",
    )
    _add_control_options(serve)
    _add_fault_parser(sub)
    _add_capture_options(serve)
    _add_spark_job_parsers(sub)
    return parser


# -- capture, and the client-side jobs of spark_jobs/ (workload, replay, report) -------

#: ``minikafka workload|replay|report ARGS`` run ``python -m spark_jobs.<job> ARGS`` in a
#: child process: the broker package must not import spark_jobs (import-linter
#: contract), and a child keeps the clients (and the JVM) out of this process. Arguments
#: pass through untouched; see ``python -m spark_jobs.<job> --help``.
SPARK_JOBS = {
    "workload": "spark_jobs.workload",
    "replay": "spark_jobs.replay",
    "report": "spark_jobs.report",
}
_SPARK_JOB_HELP = {
    "workload": "drive a broker with a realistic client mix (aiokafka)",
    "replay": "replay a capture against a broker (Spark)",
    "report": "latency report of a replay (Spark)",
}
#: The jobs that take ``--log-level``: a ``minikafka --log-level L JOB`` passes it on.
_JOBS_WITH_LOG_LEVEL = frozenset({"workload"})


def _add_capture_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--capture-dir",
        type=Path,
        default=None,
        help="capture every request and delayed-operation event into this directory",
    )


def _add_spark_job_parsers(sub: Any) -> None:
    for name, module in SPARK_JOBS.items():
        # Listed for --help only: main() hands the arguments over before parsing.
        sub.add_parser(name, help=f"{_SPARK_JOB_HELP[name]}; see python -m {module} --help")


def _spark_job(argv: Sequence[str]) -> tuple[str, list[str]] | None:
    """(module, its arguments) when ``argv`` names a job of spark_jobs, else None."""
    i = 0
    log_level: list[str] = []
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "--log-level":
            log_level = list(argv[i : i + 2])
            i += 2
        else:
            i += 1
    if i < len(argv) and argv[i] in SPARK_JOBS:
        name = argv[i]
        passed = log_level if name in _JOBS_WITH_LOG_LEVEL else []
        return SPARK_JOBS[name], [*passed, *argv[i + 1 :]]
    return None


def _run_spark_job(module: str, args: list[str]) -> int:
    import subprocess

    return subprocess.call([sys.executable, "-m", module, *args])


# -- control endpoint and fault injection (broker/control/) ------------------------------


def _add_control_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--control-port",
        type=int,
        default=None,
        help="run the HTTP control endpoint on this port (0: a free port); off by default",
    )
    serve.add_argument(
        "--control-host", default="127.0.0.1", help="control endpoint address (127.0.0.1)"
    )


def _add_fault_parser(sub: Any) -> None:
    fault = sub.add_parser("fault", help="inject faults through a running control endpoint")
    fault.add_argument(
        "--control",
        default=os.environ.get("MINIKAFKA_CONTROL"),
        help="control endpoint URL, e.g. http://127.0.0.1:9000 (env MINIKAFKA_CONTROL)",
    )
    actions = fault.add_subparsers(dest="fault_command", required=True)
    actions.add_parser("status", help="health, brokers and the faults in force")
    for name, text in (
        ("stop-broker", "stop a broker"),
        ("start-broker", "start a stopped broker"),
        ("pause-replication", "pause a broker's replica fetchers"),
        ("resume-replication", "resume a broker's replica fetchers"),
    ):
        actions.add_parser(name, help=text).add_argument("broker_id", type=int)
    delay = actions.add_parser("delay-replication", help="delay a broker's replica fetches")
    delay.add_argument("broker_id", type=int)
    delay.add_argument("ms", type=int)
    latency = actions.add_parser("latency", help="delay every response of a broker (0: off)")
    latency.add_argument("broker_id", type=int)
    latency.add_argument("ms", type=int)
    fail = actions.add_parser("fail", help="fail a broker's next N requests of an API")
    fail.add_argument("--broker", type=int, required=True, help="broker id")
    fail.add_argument("--api-key", required=True, help="API key or name (0 or Produce)")
    fail.add_argument(
        "--error", required=True, help="error code or name (6 or NOT_LEADER_OR_FOLLOWER)"
    )
    fail.add_argument("--count", type=int, default=1, help="how many requests (1)")
    fail.add_argument("--topic", default=None, help="only requests naming this topic")
    fail.add_argument("--partition", type=int, default=None, help="... and this partition")
    clear = actions.add_parser("clear", help="clear faults of one broker, or of all")
    clear.add_argument("broker_id", type=int, nargs="?", default=None)


def _int_or_name(value: str) -> int | str:
    text = value.strip()
    return int(text) if text.lstrip("-").isdigit() else text


def _fault(args: argparse.Namespace) -> int:
    """One call on the control endpoint; prints its JSON answer, exit 1 on an error."""
    from broker.control.client import ControlClient, ControlClientError

    if not args.control:
        print("minikafka fault: --control URL is required", file=sys.stderr)
        return 2
    client = ControlClient(args.control)
    command = args.fault_command
    calls: dict[str, Callable[[], Any]] = {
        "status": lambda: {
            "health": client.health(),
            "brokers": client.cluster()["brokers"],
            "faults": client.faults(),
        },
        "stop-broker": lambda: client.stop_broker(args.broker_id),
        "start-broker": lambda: client.start_broker(args.broker_id),
        "pause-replication": lambda: client.replication(args.broker_id, "pause"),
        "resume-replication": lambda: client.replication(args.broker_id, "resume"),
        "delay-replication": lambda: client.replication(args.broker_id, "delay", args.ms),
        "latency": lambda: client.latency(args.broker_id, args.ms),
        "fail": lambda: client.fail(
            args.broker,
            _int_or_name(args.api_key),
            _int_or_name(args.error),
            args.count,
            args.topic,
            args.partition,
        ),
        "clear": lambda: client.clear(args.broker_id),
    }
    try:
        answer = calls[command]()
    except ControlClientError as exc:
        print(f"minikafka fault {command}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(answer, indent=2, sort_keys=True))
    return 0


async def _serve(args: argparse.Namespace) -> int:
    config = load_config(args.config, parse_overrides(args.override))
    app = MiniKafka(
        config,
        brokers=args.brokers,
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        control_port=args.control_port,
        control_host=args.control_host,
        capture_dir=args.capture_dir,
        advertised_host=args.advertised_host,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await app.start()
    except OSError as exc:
        print(f"minikafka: cannot listen: {exc}", file=sys.stderr)
        await app.stop()
        return 1
    control = f" control={app.control_url}" if app.control_url is not None else ""
    print(f"minikafka ready: bootstrap={app.bootstrap}{control}", flush=True)
    await stop.wait()
    log.info("shutting down")
    await app.stop()
    return 0


def run_async(factory: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run on uvloop when it is installed, else on the default loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.run(factory())
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(factory())


def main(argv: Sequence[str] | None = None) -> int:
    job = _spark_job(sys.argv[1:] if argv is None else argv)
    if job is not None:
        return _run_spark_job(*job)
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        if args.command == "serve":
            return run_async(lambda: _serve(args))
        if args.command == "fault":
            return _fault(args)
    except ConfigError as exc:
        print(f"minikafka: configuration error: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
