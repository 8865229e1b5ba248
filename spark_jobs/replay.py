"""Replay a capture against a broker (cluster) from Spark executors; results to Parquet.

Entry point of ``minikafka replay`` and of ``spark-submit spark_jobs/replay.py``::

    replay --capture DIR (--bootstrap HOST:PORT | --target-brokers N
           [--target-override KEY=VALUE ...]) --out DIR [--speed F] [--master URL]
           [--target-capture DIR] [--label TEXT] [--start-delay-s S] [--partitions N]

The target. ``--bootstrap`` replays against a running cluster. ``--target-brokers N``
starts a fresh minikafka of N brokers itself (``spark_jobs.target``), with the given
``--target-override``s, capturing into ``OUT/_target_capture``, and stops it when the
replay is done: one what-if variant per command. Either way the driver asks the target
for its brokers (Metadata) and their configs (DescribeConfigs): the configs that are
not Kafka's defaults label the variant in the report and in ``minikafka compare``.

Like for like. Only client requests are replayed; inter-broker requests (follower
fetches, with a replica id >= 0) are left out and reported as skips
(``replay_skip``): the target's own followers replicate what the replay produces
(``spark_jobs.traffic`` says why simulated followers would distort the figures).

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

Each captured broker's connections go to the target broker with the same id. The
replay stage runs in barrier mode: its tasks start together, warm up (codecs, every
connection open: see ``replay_client``), agree (``allGather`` of their ready instants)
on a shared start (``shared_start_unix_s``) and send each request at its captured
offset from the capture's first request divided by ``--speed`` (what that scales and
what it cannot: ``spark_jobs.speed``; the replay warns about each captured wait that
does not scale). Barrier mode also makes a cluster without enough free slots fail at
once instead of replaying connections in late waves.

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

Progress: one line per phase on stderr, and a bar of client requests replayed with an
ETA (``spark_jobs.progress``: the status tracker for the tasks, the tasks' own counts).
Output, in ``--out``: Parquet with ``spark_jobs.schema.RESULT_SCHEMA`` (each replayed
request's target connection and correlation id: the key of the target's capture
record), ``_replay.json`` (``spark_jobs.run_info``), and for a started target its
capture and log; a summary line on stdout.

What a replayed request keeps and what it changes: client ids are sent as captured (so a
target's quotas match them), correlation ids, member ids, generations, producer ids and
share-group epochs are rewritten to what the new broker answered (``replay_rewrite``,
``replay_share_rewrite``), principals are kept with ``--target-users`` (``replay_sasl``;
without it, PLAINTEXT and a warning naming the captured users), and each answer's
``throttle_time_ms`` is in the results. ``run_replay`` reads as its steps by name:
``ordered_requests``, ``capture_stats``, the run's description and warnings,
``barrier_partition_replayer``, ``count_reasons``. ``replay_client.replay_rows_in_loop`` is
the same replay on a loop the caller owns (``whatif``'s virtual-time replay).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from protocol.capture_files import captured_cluster_config
from spark_jobs.progress import ProgressMonitor, phase
from spark_jobs.replay_sasl import MECHANISMS, read_users, replay_user
from spark_jobs.run_info import (
    RUN_FILE,
    TARGET_CAPTURE_DIR,
    TARGET_DATA_DIR,
    ReplayRun,
    default_label,
)
from spark_jobs.target import TargetCluster, TargetError, parse_override
from spark_jobs.target_quotas import parse_quota_file, write_target_quotas

#: Kafka's principal of an unauthenticated (PLAINTEXT) connection.
ANONYMOUS: Final = "User:ANONYMOUS"

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession

    from spark_jobs.replay_client import ReplaySchedule
    from spark_jobs.replay_result import ReplayResult
    from spark_jobs.target import TargetConfig

__all__ = [
    "BARRIER_RELEASE_S",
    "CaptureStats",
    "ReplaySummary",
    "barrier_partition_replayer",
    "capture_stats",
    "count_reasons",
    "main",
    "ordered_requests",
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

    def __init__(
        self,
        out: Path,
        requests: int,
        connections: int,
        errors: dict[str, int],
        skipped: dict[str, int] | None = None,
    ):
        self.out = out
        self.requests = requests
        self.connections = connections
        self.errors = errors
        self.skipped = skipped or {}

    def __str__(self) -> str:
        errs = ", ".join(f"{k}: {v}" for k, v in sorted(self.errors.items())) or "none"
        skipped = sum(self.skipped.values())
        replayed = self.requests - skipped
        left_out = f"{skipped} inter-broker requests left out; " if skipped else ""
        return (
            f"replayed {replayed} client requests on {self.connections} connections "
            f"into {self.out} ({left_out}replay errors: {errs})"
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


def prepare_out_dir(out: Path) -> None:
    """Make ``out`` an empty directory: a previous replay's output is replaced, anything
    else is refused (Spark's overwrite would delete it, and the target's capture goes
    in here before the results are written)."""
    if out.exists():
        if not out.is_dir():
            raise ValueError(f"--out {out} is not a directory")
        entries = list(out.iterdir())
        ours = any(e.name in ("_SUCCESS", RUN_FILE) for e in entries)
        if entries and not ours:
            raise ValueError(f"--out {out} holds files that are not a replay's: not replacing them")
        for entry in entries:  # the directory itself may be a mount point (a volume)
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    out.mkdir(parents=True, exist_ok=True)


def _progress_host(sc: SparkContext) -> str:
    return str(sc.getConf().get("spark.driver.host", "127.0.0.1") or "127.0.0.1")


@dataclass
class TargetInfo:
    """What the caller knows of the target beyond its bootstrap (for ``_replay.json``)."""

    started: bool = False
    overrides: list[str] = field(default_factory=list)
    capture: Path | None = None
    #: ``--target-quotas``: the quota file's name, part of the variant's label.
    quotas: str | None = None


@dataclass(frozen=True)
class ReplaySasl:
    """``--target-users``: who may replay as whom, over which listener (broker id ->
    its SASL address) and mechanism (``spark_jobs.replay_sasl``)."""

    users: Mapping[str, str]
    addresses: Mapping[int, tuple[str, int]]
    mechanism: str = "PLAIN"


@dataclass(frozen=True)
class CaptureStats:
    """What the driver learns of the capture before the clock starts (one aggregation
    over the cached, ordered requests). ``first_us``/``last_us`` bound the client
    requests (a cluster's own traffic before and after its clients' is not replayed)."""

    requests: int
    client_requests: int
    connections: int
    brokers: tuple[int, ...]
    first_us: int
    last_us: int
    #: The principals client connections were captured as, besides User:ANONYMOUS.
    principals: tuple[str, ...] = ()

    @property
    def span_s(self) -> float:
        return (self.last_us - self.first_us) / 1e6


def ordered_requests(spark: SparkSession, capture: str | Path, partitions: int) -> DataFrame:
    """The capture's requests (``REPLAY_COLUMNS``), one client's connections per
    partition, each connection whole and in sequence order; cached, not yet computed."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from spark_jobs.captures import read_capture_requests_df
    from spark_jobs.replay_client import REPLAY_COLUMNS

    requests = read_capture_requests_df(spark, capture).select(*REPLAY_COLUMNS)
    # The client of a connection as replay_client.client_key names it (min ignores nulls).
    connection = Window.partitionBy("broker_id", "connection_id")
    client = F.coalesce(
        F.concat(F.lit("client:"), F.min("client_id").over(connection)),
        F.concat(F.lit("connection:"), F.col("broker_id"), F.lit("/"), F.col("connection_id")),
    )
    ordered = requests.withColumn("_client", client).repartition(partitions, "_client")
    ordered = ordered.drop("_client")
    return ordered.sortWithinPartitions("broker_id", "connection_id", "sequence").persist()


def capture_stats(ordered: DataFrame) -> CaptureStats | None:
    """Counts and the schedule's span of ``ordered``; None when it holds no request."""
    from pyspark.sql import functions as F

    from spark_jobs.traffic import traffic_column

    client_at = F.when(traffic_column() == "client", F.col("received_unix_us"))
    stats = ordered.agg(
        F.coalesce(F.min(client_at), F.min("received_unix_us")).alias("first"),
        F.coalesce(F.max(client_at), F.max("received_unix_us")).alias("last"),
        F.count(F.lit(1)).alias("n"),
        F.sum(F.when(traffic_column() == "client", 1).otherwise(0)).alias("client"),
        F.countDistinct("broker_id", "connection_id").alias("connections"),
        F.collect_set("broker_id").alias("brokers"),
        F.collect_set(F.when(traffic_column() == "client", F.col("principal"))).alias("users"),
    ).first()
    if stats is None or not stats["n"]:
        return None
    return CaptureStats(
        requests=int(stats["n"]),
        client_requests=int(stats["client"]),
        connections=int(stats["connections"]),
        brokers=tuple(sorted(int(b) for b in stats["brokers"])),
        first_us=int(stats["first"]),
        last_us=int(stats["last"]),
        principals=tuple(sorted(p for p in stats["users"] if p and p != ANONYMOUS)),
    )


def _record_capture(
    run: ReplayRun,
    stats: CaptureStats,
    addresses: Mapping[int, Any],
    sasl: ReplaySasl | None = None,
) -> None:
    """Put ``stats`` into ``run``, say what will be replayed, and warn about captured
    brokers the target lacks."""
    run.requests, run.client_requests = stats.requests, stats.client_requests
    run.connections = stats.connections
    run.capture_brokers = len(stats.brokers)
    run.capture_span_s = stats.span_s
    n, n_client = stats.requests, stats.client_requests
    phase(
        f"{n} captured requests on {run.connections} connections of {run.capture_brokers} "
        f"brokers: {n_client} client requests to replay, {n - n_client} inter-broker left "
        f"out (the target's brokers send their own); the schedule spans "
        f"{run.capture_span_s:.1f} s, {run.capture_span_s / run.speed:.1f} s at --speed "
        f"{run.speed:g}"
    )
    phase(
        f"target: {len(addresses)} brokers at {run.target_bootstrap}; config: {run.config_text()}"
    )
    _warn_about_principals(run, stats.principals, sasl)
    missing = sorted(set(stats.brokers) - set(addresses))
    if missing:
        run.warnings.append(
            f"captured brokers {missing} have no broker of the same id in the target: "
            "their connections fail"
        )


def _warn_about_principals(
    run: ReplayRun, principals: Sequence[str], sasl: ReplaySasl | None
) -> None:
    """Warn about captured users the replay cannot send as themselves."""
    users = sasl.users if sasl is not None else {}
    plain = [p for p in principals if replay_user(p, users) is None]
    if plain:
        how = "" if sasl is not None else ": give --target-users FILE to replay them as their users"
        run.warnings.append(
            f"connections captured as {', '.join(plain)} replay over PLAINTEXT as "
            f"{ANONYMOUS} (quotas and ACLs of those users do not apply){how}"
        )


def _warn_about_speed(run: ReplayRun, ordered: DataFrame, config_values: Mapping[str, Any]) -> None:
    """Add the captured waits that ``--speed`` cannot scale to the run's warnings, and
    print every warning."""
    from pyspark.sql import functions as F

    from spark_jobs.speed import SCALED, captured_waits, merge_waits, speed_warnings

    waits = ordered.where(F.col("api_key").isin(1, 11)).select("api_key", "request", "replica_id")
    merged = merge_waits(
        waits.rdd.mapPartitions(lambda rows: captured_waits(r.asDict() for r in rows)).collect()
    )
    run.warnings += speed_warnings(run.speed, merged, config_values)
    if run.speed != 1:
        phase(SCALED)
    for warning in run.warnings:
        phase(f"warning: {warning}")


def barrier_partition_replayer(
    schedule: ReplaySchedule, start_delay_s: float
) -> Callable[[Iterable[Any]], Iterable[ReplayResult]]:
    """The function each barrier task runs over its rows.

    Every task is running, and warmed up (replay_rows calls agree_start once its
    connections are open), before any sends; they agree on one start after the
    barrier can have released the last of them, so a task whose Python worker started
    late does not begin the schedule late."""

    def replay_partition(rows: Iterable[Any]) -> Iterable[ReplayResult]:
        from pyspark import BarrierTaskContext

        from spark_jobs.replay_client import replay_rows

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
        return replay_rows(materialised, schedule, agree_start, context.partitionId())

    return replay_partition


def _start_monitor(sc: SparkContext, group: str, run: ReplayRun) -> ProgressMonitor | None:
    try:
        return ProgressMonitor(
            sc, group, run.client_requests, run.capture_span_s / run.speed, host=_progress_host(sc)
        )
    except OSError:
        return None  # no progress channel: the replay itself does not need one


def _replay_and_write(
    spark: SparkSession, ordered: DataFrame, plan: _ReplayPlan, out_path: Path
) -> None:
    """Run the barrier stage over ``ordered`` and append its results to ``out_path``."""
    from spark_jobs.replay_client import ReplaySchedule
    from spark_jobs.schema import RESULT_SCHEMA

    sc = spark.sparkContext
    group = f"minikafka-replay-{os.getpid()}-{time.time_ns()}"
    monitor = _start_monitor(sc, group, plan.run)
    schedule = ReplaySchedule(
        addresses=plan.addresses,
        start_unix_s=time.time() + plan.start_delay_s,  # each task's agree_start replaces it
        first_received_us=plan.first_received_us,
        speed=plan.run.speed,
        response_timeout_s=plan.response_timeout_s,
        progress_address=monitor.address if monitor is not None else None,
        users=dict(plan.sasl.users) if plan.sasl is not None else {},
        sasl_addresses=dict(plan.sasl.addresses) if plan.sasl is not None else {},
        sasl_mechanism=plan.sasl.mechanism if plan.sasl is not None else "PLAIN",
    )
    sc.setJobGroup(group, "minikafka replay")
    phase(f"starting {plan.run.tasks} replay tasks (a barrier stage: they start together)")
    if monitor is not None:
        monitor.start()
    try:
        replayer = barrier_partition_replayer(schedule, plan.start_delay_s)
        results = spark.createDataFrame(
            ordered.rdd.barrier().mapPartitions(replayer), RESULT_SCHEMA
        )
        results.write.mode("append").parquet(str(out_path))
    finally:
        if monitor is not None:
            monitor.stop()


def count_reasons(spark: SparkSession, out_path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """(errors, skips) of the written results, by kind: the text before the first colon."""
    from pyspark.sql import functions as F

    from spark_jobs.schema import RESULT_SCHEMA

    written = spark.read.schema(RESULT_SCHEMA).parquet(str(out_path))

    def kinds(column: str) -> dict[str, int]:
        return {
            str(row["kind"]): int(row["count"])
            for row in written.where(F.col(column).isNotNull())
            .groupBy(F.regexp_extract(column, r"^([^:]*)", 1).alias("kind"))
            .count()
            .collect()
        }

    return kinds("replay_error"), kinds("replay_skip")


@dataclass
class _ReplayPlan:
    """What the replay stage needs from the driver's preparation."""

    run: ReplayRun
    addresses: Mapping[int, tuple[str, int]]
    first_received_us: int
    start_delay_s: float
    response_timeout_s: float
    sasl: ReplaySasl | None = None


def _new_run(
    sc: SparkContext,
    capture: str | Path,
    bootstrap: str,
    config: TargetConfig,
    n_addresses: int,
    speed: float,
    tasks: int,
    target: TargetInfo,
    label: str | None,
) -> ReplayRun:
    from spark_jobs.speed import SCALED

    return ReplayRun(
        label=label or _label(config, target),
        capture=str(Path(capture).resolve()),
        speed=speed,
        speed_scales=SCALED,
        master=str(sc.master),
        tasks=tasks,
        target_bootstrap=bootstrap,
        target_brokers=n_addresses,
        target_started=target.started,
        target_overrides=list(target.overrides),
        target_config=config.overrides(),
        target_capture=str(target.capture.resolve()) if target.capture else None,
    )


def _label(config: TargetConfig, target: TargetInfo) -> str:
    label = default_label(config.overrides())
    if target.quotas is None:
        return label
    quotas = f"quotas={target.quotas}"
    return quotas if label == "default" else f"{label}, {quotas}"


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
    target: TargetInfo | None = None,
    label: str | None = None,
    sasl: ReplaySasl | None = None,
) -> ReplaySummary:
    """Replay ``capture`` against ``bootstrap``; write RESULT_SCHEMA Parquet and
    ``_replay.json`` to ``out`` (which must exist and hold no results yet).

    The steps: ask the target who it is; read and order the capture (one read, cached,
    before the clock starts); describe the run; warn about what ``--speed`` cannot
    scale; replay in a barrier stage; count the errors and skips written."""
    from spark_jobs.target import describe_broker_configs, fetch_broker_addresses

    if speed <= 0:
        raise ValueError(f"--speed must be positive, got {speed}")
    began = time.monotonic()
    sc = spark.sparkContext
    out_path = Path(out)
    out_path.mkdir(parents=True, exist_ok=True)
    phase(f"reading the capture {capture}")
    addresses = fetch_broker_addresses(bootstrap)
    config = describe_broker_configs(addresses)
    n_parts = partitions or max(1, sc.defaultParallelism)
    ordered = ordered_requests(spark, capture, n_parts)
    target = target or TargetInfo()
    run = _new_run(sc, capture, bootstrap, config, len(addresses), speed, n_parts, target, label)
    try:
        stats = capture_stats(ordered)
        if stats is None:
            _write_empty(spark, out_path)
            run.write(out_path)
            return ReplaySummary(out_path, 0, 0, {})
        _record_capture(run, stats, addresses, sasl)
        _warn_about_speed(run, ordered, config.values)
        plan = _ReplayPlan(run, addresses, stats.first_us, start_delay_s, response_timeout_s, sasl)
        _replay_and_write(spark, ordered, plan, out_path)
    finally:
        ordered.unpersist()
    phase("results written; counting errors")
    run.errors, run.skipped = count_reasons(spark, out_path)
    run.elapsed_s = round(time.monotonic() - began, 3)
    run.write(out_path)
    return ReplaySummary(out_path, stats.requests, run.connections, run.errors, run.skipped)


def _write_empty(spark: SparkSession, out_path: Path) -> None:
    from spark_jobs.schema import RESULT_SCHEMA

    spark.createDataFrame([], RESULT_SCHEMA).write.mode("append").parquet(str(out_path))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="minikafka replay",
        description="Replay a capture against a broker from Spark; results as Parquet.",
    )
    parser.add_argument("--capture", required=True, help="capture directory (or file)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap", help="HOST:PORT[,...] of a running target")
    where.add_argument(
        "--target-brokers",
        type=int,
        help="start the target cluster itself: a fresh minikafka of N brokers on free ports "
        f"of 127.0.0.1, capturing into OUT/{TARGET_CAPTURE_DIR}, stopped at the end",
    )
    parser.add_argument(
        "--target-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config of the started target (repeatable), e.g. "
        "replica.fetch.wait.max.ms=100: one what-if variant per command",
    )
    parser.add_argument(
        "--target-quotas",
        default=None,
        type=Path,
        metavar="FILE",
        help="client quotas set on the started target before the replay (client-quotas.json "
        "or kafka-configs.sh-like lines, see spark_jobs/target_quotas.py): a what-if with a "
        "quota, the replayed clients throttled by their captured client ids",
    )
    parser.add_argument(
        "--target-users",
        default=None,
        type=Path,
        metavar="FILE",
        help="user -> password (JSON object or user=password lines): the started target gets "
        "a SASL_PLAINTEXT listener knowing them, and a connection captured as User:x replays "
        "over it as x (without: every connection over PLAINTEXT, as User:ANONYMOUS)",
    )
    parser.add_argument(
        "--target-sasl-mechanism",
        default="PLAIN",
        choices=MECHANISMS,
        help="the SASL mechanism of --target-users (PLAIN)",
    )
    parser.add_argument(
        "--target-capture",
        default=None,
        help="where the target captures: with --target-brokers, instead of "
        f"OUT/{TARGET_CAPTURE_DIR}; with --bootstrap, the --capture-dir the target was "
        "started with (the report then shows its outcomes beside the captured ones)",
    )
    parser.add_argument("--label", default=None, help="name of this variant (its configs)")
    parser.add_argument("--out", required=True, help="results directory (Parquet)")
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="time factor of the client's schedule: 2 = twice as fast (broker-side waits "
        "keep their length; see spark_jobs/speed.py)",
    )
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
    args = parser.parse_args(argv)
    if args.target_override and not args.target_brokers:
        parser.error("--target-override needs --target-brokers (a target the replay starts)")
    if args.target_brokers is not None and args.target_brokers < 1:
        parser.error(f"--target-brokers must be at least 1, not {args.target_brokers}")
    for override in args.target_override:
        try:
            parse_override(override)
        except ValueError as exc:
            parser.error(f"--target-override: {exc}")
    if args.target_quotas is not None:
        if not args.target_brokers:
            parser.error("--target-quotas needs --target-brokers (a target the replay starts)")
        try:
            args.quota_entries = parse_quota_file(args.target_quotas)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            parser.error(f"--target-quotas {args.target_quotas}: {exc}")
    if args.target_users is not None:
        if not args.target_brokers:
            parser.error("--target-users needs --target-brokers (a target the replay starts)")
        try:
            args.users = read_users(args.target_users)
        except (OSError, ValueError) as exc:
            parser.error(f"--target-users {args.target_users}: {exc}")
    return args


def _target_sasl(
    args: argparse.Namespace, cluster: TargetCluster | None, bootstrap: str
) -> ReplaySasl | None:
    """``--target-users``: the started target's SASL listener, broker by broker."""
    from spark_jobs.target import fetch_broker_addresses, listener_addresses

    if cluster is None or cluster.sasl_bootstrap is None:
        return None
    addresses = fetch_broker_addresses(bootstrap)
    sasl = listener_addresses(bootstrap, cluster.sasl_bootstrap, addresses)
    phase(
        f"SASL users on the target: {', '.join(sorted(cluster.users))} at {cluster.sasl_bootstrap}"
    )
    return ReplaySasl(cluster.users, sasl, args.target_sasl_mechanism)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the replay; joins an already active SparkSession (and leaves it running)."""
    args = parse_args(argv)
    from pyspark.sql import SparkSession

    from spark_jobs.session import build_spark_session, is_local_master

    out = Path(args.out)
    try:
        prepare_out_dir(out)
    except ValueError as exc:
        print(f"minikafka replay: error: {exc}", file=sys.stderr)
        return 2
    cluster: TargetCluster | None = None
    target = TargetInfo(
        overrides=list(args.target_override),
        capture=Path(args.target_capture) if args.target_capture else None,
    )
    bootstrap = args.bootstrap
    if args.target_brokers:
        target.started = True
        target.capture = target.capture or out / TARGET_CAPTURE_DIR
        overrides = " ".join(args.target_override) or "none"
        phase(f"starting the target cluster: {args.target_brokers} brokers, overrides: {overrides}")
        data_dir = None
        if args.target_quotas is not None:
            data_dir = out / TARGET_DATA_DIR
            write_target_quotas(args.quota_entries, data_dir)
            target.quotas = args.target_quotas.name
            phase(
                f"client quotas on the target: {len(args.quota_entries)} from {args.target_quotas}"
            )
        # The captured cluster's configs first (the capture's header records them), so the
        # target serves the capture as that cluster did; the what-if's overrides on top.
        captured = [f"{k}={v}" for k, v in captured_cluster_config(args.capture).items()]
        if captured:
            phase(f"the captured cluster's configs: {' '.join(captured)}")
        cluster = TargetCluster(
            args.target_brokers,
            [*captured, *args.target_override],
            capture_dir=target.capture,
            log_path=out / "_target.log",
            data_dir=data_dir,
            users=args.users if args.target_users is not None else None,
            security_dir=out / "_target_security",
        )
        try:
            bootstrap = cluster.start()
        except TargetError as exc:
            print(f"minikafka replay: {exc}", file=sys.stderr)
            return 1
    active = SparkSession.getActiveSession()
    try:
        spark = active or build_spark_session("minikafka-replay", args.master)
        try:
            if not is_local_master(spark.sparkContext.master or "local"):
                _ship_packages(spark.sparkContext)
            summary = run_replay(
                spark,
                args.capture,
                bootstrap,
                out,
                speed=args.speed,
                start_delay_s=args.start_delay_s,
                partitions=args.partitions,
                response_timeout_s=args.response_timeout_s,
                target=target,
                label=args.label,
                sasl=_target_sasl(args, cluster, bootstrap),
            )
        finally:
            if active is None:
                spark.stop()
    finally:
        if cluster is not None:
            phase("stopping the target cluster (which closes its capture)")
            cluster.stop()
    print(summary, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
