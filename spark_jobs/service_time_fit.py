"""Fit a service-time table (``protocol.service_times``) from a capture or Kafka's request log.

Entry point of ``python -m spark_jobs.service_time_fit``::

    service_time_fit (--capture DIR | --request-log FILE [--request-log FILE ...])
                     --out TABLE.json [--seed N]

The table is what a simulated broker charges each request (``minikafka simulate
--service-times TABLE.json``, issue 24). From a capture the samples are each served
request's ``local_time_ms`` and ``request_size``; Kafka's request log has the same
``localTimeMs`` but no request size, so its samples land in no size bucket and each
API gets one distribution over every size. Both read the files here, in one process,
without Spark: a fit keeps at most a reservoir of samples per API and bucket, so memory
does not grow with the input, and reading is the whole cost.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from protocol.capture_files import read_capture
from protocol.service_times import (
    FETCH_FOLLOWER_KEY,
    FETCH_FOLLOWER_NAME,
    ServiceTimeFitter,
    ServiceTimeModel,
    fit_capture_records,
    service_key,
)
from spark_jobs.request_log import api_name_for_key, iter_request_log

__all__ = ["fit_capture", "fit_request_log", "fit_request_log_lines", "main"]


def fit_capture(path: str | Path, *, seed: int = 0) -> ServiceTimeModel:
    """The service times a capture (directory or file) measured."""
    return fit_capture_records(read_capture(path), source=f"capture {path}", seed=seed)


def fit_request_log_lines(
    lines: Iterable[str], *, source: str = "request log", seed: int = 0
) -> ServiceTimeModel:
    """The service times of Kafka's request log lines: every ``Completed request``,
    follower fetches included (they occupy Kafka's handlers too; kept apart as
    FetchFollower), and the send times (the log has no sizes: one bucket each)."""
    fitter = ServiceTimeFitter(seed=seed)
    sends = ServiceTimeFitter(seed=seed + 1)
    for entry in iter_request_log(lines):
        key = service_key(entry.api_key, entry.replica_id)
        fitter.add(key, None, entry.local_time_ms)
        sends.add(key, None, entry.response_send_time_ms)
    return replace(fitter.fit(source), send=sends.fit(source))


def _lines(paths: Sequence[str | Path]) -> Iterator[str]:
    for path in paths:
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as file:
            yield from file


def fit_request_log(paths: Sequence[str | Path], *, seed: int = 0) -> ServiceTimeModel:
    """The service times in Kafka's request log files (plain or .gz)."""
    source = "request log " + ", ".join(map(str, paths))
    return fit_request_log_lines(_lines(paths), source=source, seed=seed)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="service_time_fit",
        description="Fit per-API service times (Kafka's LocalTimeMs) for a simulated broker.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--capture", help="capture directory (or file)")
    source.add_argument(
        "--request-log", action="append", dest="request_logs", help="Kafka request log file"
    )
    parser.add_argument("--out", required=True, help="the table to write (JSON)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the reservoir samples")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.capture:
        model = fit_capture(args.capture, seed=args.seed)
    else:
        model = fit_request_log(args.request_logs, seed=args.seed)
    if not model.by_api:
        print("service_time_fit: error: no served request in the input", file=sys.stderr)
        return 1
    Path(args.out).write_text(json.dumps(model.to_table(), indent=1) + "\n", encoding="utf-8")
    for key, dist in sorted(model.by_api.items()):
        p50, p99 = dist.quantile(0.5), dist.quantile(0.99)
        name = FETCH_FOLLOWER_NAME if key == FETCH_FOLLOWER_KEY else api_name_for_key(key)
        print(f"{name:<24} {dist.samples:>8} samples  p50 {p50:.3f} ms  p99 {p99:.3f} ms")
    print(f"service times written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
