"""``minikafka`` command line: ``serve`` (and the tools built on it).

The shape of ``serve`` is relied on by other tools and tests: when every listener is up
it prints exactly one line ``minikafka ready: bootstrap=HOST:PORT[,HOST:PORT...]`` on
stdout, then serves until SIGINT or SIGTERM and exits 0. A bad config stops it at once
with exit code 2 and a message naming the key.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
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
    serve.add_argument("--data-dir", type=Path, default=None, help="keep logs here (memory)")
    serve.add_argument("--config", type=Path, default=None, help="a Kafka server.properties")
    serve.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka broker config, e.g. num.partitions=3 (repeatable)",
    )
    return parser


async def _serve(args: argparse.Namespace) -> int:
    config = load_config(args.config, parse_overrides(args.override))
    app = MiniKafka(
        config, brokers=args.brokers, host=args.host, port=args.port, data_dir=args.data_dir
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
    print(f"minikafka ready: bootstrap={app.bootstrap}", flush=True)
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
    except ConfigError as exc:
        print(f"minikafka: configuration error: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
