"""Replay a capture against a broker (cluster) from Spark executors; results to Parquet.

Entry point of ``minikafka replay`` and of ``spark-submit spark_jobs/replay.py``::

    replay --capture DIR --bootstrap HOST:PORT --out DIR [--speed F] [--master URL]
           [--start-delay-s S] [--partitions N]

How the work is cut. The capture is read with its explicit schema
(``read_capture_requests_df``), repartitioned by client (``replay_client.client_key``
of each connection: its client id, else the connection) so that all of a client's
connections land in one task, and sorted within partitions by connection and sequence:
each task then sees each of its connections whole and in order, on any cluster. A
client's connections must share a task because they depend on each other (a
FindCoordinator answer on one broker decides where the JoinGroup goes) and only one
task can make one wait for another's answer; tasks start apart. The partitions are
materialised (``persist`` + ``count``) before the clock starts, so reading and
shuffling the capture does not eat into the schedule.
There are as many partitions as task slots (``defaultParallelism``, or
``--partitions``): every connection must be live at once, and a second wave of tasks
would start late.

The driver asks ``--bootstrap`` for the cluster's brokers (Metadata) and sends each
captured broker's connections to the broker with the same id. The replay stage runs in
barrier mode: its tasks start together, warm up (codecs, every connection open: see
``replay_client``), agree (``allGather`` of their ready instants) on a shared start
(``shared_start_unix_s``) and send each request at its captured offset from the
capture's first request divided by ``--speed``. Barrier mode also makes a cluster
without enough free slots fail at once instead of replaying connections in late waves.

Spark does not release a barrier the moment the last task arrives: each task's JVM
side polls for the answer once a second (``BarrierTaskContext.runBarrier`` sleeps
1000 ms between checks), so a task returns from ``allGather`` up to a second after
the last arrival -- the last task itself typically a full second after its call.
The start therefore lies ``BARRIER_RELEASE_S`` plus ``--start-delay-s`` after the last
ready instant; with only ``--start-delay-s`` (0.5 s) one task regularly began its
schedule ~0.5 s late. A task released after the start anyway says so on stderr.

Executors open their own TCP connections to the brokers, so the brokers must be
reachable from them, and the capture directory must be readable at the same path.
On a cluster, ship this project's ``protocol`` and ``spark_jobs`` (done here with
``addPyFile`` for non-local masters) and install kio, pydantic and crc32c on the
executors.

Progress: a driver thread polls Spark's status tracker and prints completed tasks.
Output: Parquet with ``spark_jobs.schema.RESULT_SCHEMA`` in ``--out``; a summary line.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "BARRIER_RELEASE_S",
    "ReplaySummary",
    "main",
    "parse_args",
    "run_replay",
    "shared_start_unix_s",
]

#: How long after the last task arrives Spark can take to release every task of a
#: barrier: its tasks poll the coordinator's answer every 1000 ms (Spark 3.0 to 4.x).
BARRIER_RELEASE_S: Final = 1.0


def shared_start_unix_s(
    ready_unix_s: Iterable[float],
    start_delay_s: float,
    barrier_release_s: float = BARRIER_RELEASE_S,
) -> float:
    """The instant every replay task starts its schedule (wall clock, seconds).

    ``ready_unix_s`` holds each task's ready instant, as the barrier gathered them;
    every task computes the same answer from the same list. The start is
    ``start_delay_s`` after the barrier can have released the last task: any earlier
    and a task still waiting for Spark's next poll would begin its schedule late.
    """
    ready = list(ready_unix_s)
    if not ready:
        raise ValueError("no task is ready: nothing to agree on")
    if start_delay_s < 0 or barrier_release_s < 0:
        raise ValueError("the start delay and barrier release time must not be negative")
    return max(ready) + barrier_release_s + start_delay_s


class ReplaySummary:
    """What a replay did, for the caller and the summary line."""

    def __init__(self, out: Path, requests: int, connections: int, errors: dict[str, int]):
        self.out = out
        self.requests = requests
        self.connections = connections
        self.errors = errors

    def __str__(self) -> str:
        errs = ", ".join(f"{k}: {v}" for k, v in sorted(self.errors.items())) or "none"
        return (
            f"replayed {self.requests} requests on {self.connections} connections "
            f"into {self.out} (replay errors: {errs})"
        )


def _ship_packages(sc: SparkContext) -> None:
    """Zip our two packages the executors need and add them to the job."""
    root = Path(__file__).resolve().parent.parent
    fd, name = tempfile.mkstemp(prefix="minikafka-replay-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(name, "w") as zf:
        for package in ("protocol", "spark_jobs"):
            for path in (root / package).rglob("*.py"):
                zf.write(path, path.relative_to(root).as_posix())
    sc.addPyFile(name)


class _Progress(threading.Thread):
    """Prints "replay: N/M tasks" while the replay stage runs (the status tracker)."""

    def __init__(self, sc: SparkContext, group: str, interval_s: float = 2.0) -> None:
        super().__init__(name="replay-progress", daemon=True)
        self._sc = sc
        self._group = group
        self._interval_s = interval_s
        self._stop_event = threading.Event()

    def run(self) -> None:
        tracker = self._sc.statusTracker()
        last = ""
        while not self._stop_event.wait(self._interval_s):
            done = total = 0
            for job_id in tracker.getJobIdsForGroup(self._group):
                job = tracker.getJobInfo(job_id)
                if job is None:
                    continue
                for stage_id in job.stageIds:
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done += stage.numCompletedTasks
                        total += stage.numTasks
            line = f"replay: {done}/{total} tasks done"
            if total and line != last:
                print(line, flush=True)
                last = line

    def stop(self) -> None:
        self._stop_event.set()


def run_replay(
    spark: SparkSession,
    capture: str | Path,
    bootstrap: str,
    out: str | Path,
    *,
    speed: float = 1.0,
    start_delay_s: float = 0.5,
    partitions: int | None = None,
    response_timeout_s: float = 60.0,
) -> ReplaySummary:
    """Replay ``capture`` against ``bootstrap``; write RESULT_SCHEMA Parquet to ``out``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from spark_jobs.captures import read_capture_requests_df
    from spark_jobs.replay_client import (
        REPLAY_COLUMNS,
        ReplaySchedule,
        fetch_broker_addresses,
        replay_rows,
    )
    from spark_jobs.schema import RESULT_SCHEMA

    if speed <= 0:
        raise ValueError(f"--speed must be positive, got {speed}")
    sc = spark.sparkContext
    addresses = fetch_broker_addresses(bootstrap)
    requests = read_capture_requests_df(spark, capture).select(*REPLAY_COLUMNS)
    # One read of the capture: shuffled into per-connection order and cached, and the
    # figures below computed from the cache, all before the clock starts.
    n_parts = partitions or max(1, sc.defaultParallelism)
    # The client of a connection as replay_client.client_key names it (min ignores nulls).
    connection = Window.partitionBy("broker_id", "connection_id")
    client = F.coalesce(
        F.concat(F.lit("client:"), F.min("client_id").over(connection)),
        F.concat(F.lit("connection:"), F.col("broker_id"), F.lit("/"), F.col("connection_id")),
    )
    ordered: DataFrame = requests.withColumn("_client", client).repartition(n_parts, "_client")
    ordered = ordered.drop("_client")
    ordered = ordered.sortWithinPartitions("broker_id", "connection_id", "sequence").persist()
    stats = ordered.agg(
        F.min("received_unix_us").alias("first"),
        F.count(F.lit(1)).alias("n"),
        F.countDistinct("broker_id", "connection_id").alias("connections"),
    ).first()
    assert stats is not None
    out_path = Path(out)
    if not stats["n"]:
        ordered.unpersist()
        spark.createDataFrame([], RESULT_SCHEMA).write.mode("overwrite").parquet(str(out_path))
        return ReplaySummary(out_path, 0, 0, {})
    connections = int(stats["connections"])

    schedule = ReplaySchedule(
        addresses=addresses,
        start_unix_s=time.time() + start_delay_s,  # each task's agree_start replaces it
        first_received_us=int(stats["first"]),
        speed=speed,
        response_timeout_s=response_timeout_s,
    )

    def replay_partition(rows: Iterable[Any]) -> Iterable[tuple[Any, ...]]:
        # Barrier stage: every task is running, and warmed up (replay_rows calls
        # agree_start once its connections are open), before any sends; they agree on
        # one start after the barrier can have released the last of them, so a task
        # whose Python worker started late does not begin the schedule late.
        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()

        def agree_start(ready_unix_s: float) -> float:
            arrived = context.allGather(repr(ready_unix_s))
            start = shared_start_unix_s((float(t) for t in arrived), start_delay_s)
            late_ms = (time.time() - start) * 1000.0
            if late_ms > 0:
                print(
                    f"minikafka replay: task {context.partitionId()} released by the "
                    f"barrier {late_ms:.0f} ms after the shared start",
                    file=sys.stderr,
                    flush=True,
                )
            return start

        materialised = [row.asDict() for row in rows]
        return replay_rows(materialised, schedule, agree_start)

    group = f"minikafka-replay-{os.getpid()}-{time.time_ns()}"
    sc.setJobGroup(group, "minikafka replay")
    progress = _Progress(sc, group)
    progress.start()
    try:
        results = spark.createDataFrame(
            ordered.rdd.barrier().mapPartitions(replay_partition), RESULT_SCHEMA
        )
        results.write.mode("overwrite").parquet(str(out_path))
    finally:
        progress.stop()
        ordered.unpersist()
    written = spark.read.schema(RESULT_SCHEMA).parquet(str(out_path))
    errors = {
        str(row["kind"]): int(row["count"])
        for row in written.where(F.col("replay_error").isNotNull())
        .groupBy(F.regexp_extract("replay_error", r"^([^:]*)", 1).alias("kind"))
        .count()
        .collect()
    }
    return ReplaySummary(out_path, int(stats["n"]), connections, errors)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="minikafka replay",
        description="Replay a capture against a broker from Spark; results as Parquet.",
    )
    parser.add_argument("--capture", required=True, help="capture directory (or file)")
    parser.add_argument("--bootstrap", required=True, help="HOST:PORT[,...] of the target")
    parser.add_argument("--out", required=True, help="results directory (Parquet)")
    parser.add_argument("--speed", type=float, default=1.0, help="time factor: 2 = twice as fast")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    parser.add_argument(
        "--start-delay-s",
        type=float,
        default=0.5,
        help="margin from the barrier releasing the last ready task to the first send "
        f"(0.5; the start is {BARRIER_RELEASE_S:g} s + this after the last task is ready)",
    )
    parser.add_argument(
        "--partitions", type=int, default=None, help="replay tasks (default: task slots)"
    )
    parser.add_argument(
        "--response-timeout-s", type=float, default=60.0, help="give up on an answer after (60)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the replay; joins an already active SparkSession (and leaves it running)."""
    args = parse_args(argv)
    from pyspark.sql import SparkSession

    from spark_jobs.session import build_spark_session, is_local_master

    active = SparkSession.getActiveSession()
    spark = active or build_spark_session("minikafka-replay", args.master)
    try:
        if not is_local_master(spark.sparkContext.master or "local"):
            _ship_packages(spark.sparkContext)
        summary = run_replay(
            spark,
            args.capture,
            args.bootstrap,
            args.out,
            speed=args.speed,
            start_delay_s=args.start_delay_s,
            partitions=args.partitions,
            response_timeout_s=args.response_timeout_s,
        )
    finally:
        if active is None:
            spark.stop()
    print(summary, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
