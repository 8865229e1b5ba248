"""The report's client-side latency: what the clients measured (KIP-714) beside the broker.

A capture taken with client telemetry on (``serve --client-telemetry``) holds one
``client_telemetry`` record per push: the client's own metrics, decoded. librdkafka 2.16
pushes, per push interval, the average and maximum of its request latencies:

==========================================================  ===============
pushed metric (``.avg`` / ``.max``)                          API
==========================================================  ===============
``org.apache.kafka.producer.node.request.latency``          Produce
``org.apache.kafka.consumer.fetch.manager.fetch.latency``   Fetch
``org.apache.kafka.consumer.coordinator.commit.latency``    OffsetCommit
``org.apache.kafka.consumer.coordinator.rebalance.latency`` rebalance
==========================================================  ===============

A producer's node request latency covers every request it sends a broker, Produce by far
the most; a rebalance is a JoinGroup and a SyncGroup (and the wait between), so it has
no broker row of its own. The table has one row per API: the client side (pushes that
saw a request, the mean of their averages, the largest maximum) beside the broker side
for the same API from the same capture (Kafka's TotalTimeMs of client requests: count,
p50, p99, max, mean). The gap between the two is the network, the client's queues and
its own scheduling: what a broker-side breakdown cannot show. A push whose average is 0
saw no request in its interval (librdkafka pushes 0 then) and is left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from protocol.capture import ClientTelemetryPush
from protocol.capture_files import capture_files, read_client_telemetry
from spark_jobs.render import Column, Table
from spark_jobs.traffic import CLIENT, traffic_column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "LATENCY_METRICS",
    "client_latency_stats",
    "client_latency_table",
    "client_telemetry_rows",
    "read_client_telemetry_df",
    "telemetry_schema",
]

#: The pushed latency metrics (without ``.avg``/``.max``) and the API each stands for.
LATENCY_METRICS: Final = {
    "org.apache.kafka.producer.node.request.latency": "Produce",
    "org.apache.kafka.consumer.fetch.manager.fetch.latency": "Fetch",
    "org.apache.kafka.consumer.coordinator.commit.latency": "OffsetCommit",
    "org.apache.kafka.consumer.coordinator.rebalance.latency": "rebalance",
}

_COLUMNS = (
    ("client_pushes", "pushes"),
    ("client_avg", "avg"),
    ("client_max", "max"),
    ("broker_count", "n"),
    ("broker_p50", "p50"),
    ("broker_p99", "p99"),
    ("broker_max", "max"),
    ("broker_mean", "mean"),
)


def telemetry_schema() -> StructType:
    """One row per pushed data point."""
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    return StructType(
        [
            StructField("broker_id", LongType(), nullable=False),
            StructField("connection_id", StringType(), nullable=False),
            StructField("client_id", StringType(), nullable=True),
            StructField("client_instance_id", StringType(), nullable=False),
            StructField("client_software_name", StringType(), nullable=True),
            StructField("received_unix_us", LongType(), nullable=False),
            StructField("name", StringType(), nullable=False),
            StructField("kind", StringType(), nullable=False),
            StructField("value", DoubleType(), nullable=False),
        ]
    )


def client_telemetry_rows(push: ClientTelemetryPush) -> Iterator[tuple[Any, ...]]:
    """A push's points in ``telemetry_schema`` column order."""
    for point in push.points:
        yield (
            push.broker_id,
            push.connection_id,
            push.client_id,
            push.client_instance_id,
            push.client_software_name,
            push.received_unix_us,
            point.name,
            point.kind,
            point.value,
        )


def _rows_of_file(path: str) -> Iterator[tuple[Any, ...]]:
    for push in read_client_telemetry(path):
        yield from client_telemetry_rows(push)


def read_client_telemetry_df(spark: SparkSession, path: str | Path) -> DataFrame:
    """Every pushed data point of a capture (one task per file)."""
    files = [str(f) for f in capture_files(path)]
    rdd = spark.sparkContext.parallelize(files, max(1, len(files))).flatMap(_rows_of_file)
    return spark.createDataFrame(rdd, schema=telemetry_schema())


def client_latency_stats(points: DataFrame, analysis: DataFrame) -> list[dict[str, Any]]:
    """Per API (``LATENCY_METRICS``): the client side from ``points`` and the broker side
    of client requests from ``analysis`` (``ANALYSIS_SCHEMA``), as one dict per API."""
    from pyspark.sql import functions as F

    base = F.regexp_replace("name", r"\.(avg|max)$", "")
    mapping = F.create_map(*[F.lit(x) for pair in LATENCY_METRICS.items() for x in pair])
    latency = points.where(base.isin(*LATENCY_METRICS)).withColumn("api", mapping[base])
    is_avg = F.col("name").endswith(".avg") & (F.col("value") > 0)
    client = latency.groupBy("api").agg(
        F.sum(F.when(is_avg, 1).otherwise(0)).alias("client_pushes"),
        F.avg(F.when(is_avg, F.col("value"))).alias("client_avg"),
        F.max(F.when(F.col("name").endswith(".max"), F.col("value"))).alias("client_max"),
    )
    rows = {r["api"]: dict(r.asDict()) for r in client.collect()}
    apis = [api for api in rows if api != "rebalance"]
    if apis:
        broker = (
            analysis.where((traffic_column() == CLIENT) & F.col("api_name").isin(*apis))
            .groupBy("api_name")
            .agg(
                F.count(F.lit(1)).alias("broker_count"),
                F.percentile_approx("total_time_ms", [0.5, 0.99], 10_000).alias("_q"),
                F.max("total_time_ms").alias("broker_max"),
                F.avg("total_time_ms").alias("broker_mean"),
            )
        )
        for r in broker.collect():
            q = r["_q"] or [None, None]
            rows[r["api_name"]].update(
                broker_count=r["broker_count"],
                broker_p50=q[0],
                broker_p99=q[1],
                broker_max=r["broker_max"],
                broker_mean=r["broker_mean"],
            )
    order = list(LATENCY_METRICS.values())
    return sorted(rows.values(), key=lambda r: order.index(r["api"]))


def client_latency_table(stats: list[dict[str, Any]]) -> Table:
    """One row per API the clients reported on, client beside broker (ms)."""
    columns = [Column("api", "API")] + [Column(key, label) for key, label in _COLUMNS]
    groups = [("", 1), ("client (KIP-714 telemetry, ms)", 3), ("broker TotalTimeMs (ms)", 5)]
    note = (
        "The clients' own request latency, pushed every interval (KIP-714), beside the "
        "broker's TotalTimeMs of the same API's client requests in this capture. A "
        "producer's node request latency stands for Produce; a rebalance (JoinGroup, "
        "SyncGroup and the wait between) has no broker row."
    )
    if not stats:
        note += " No client pushed latency metrics."
    return Table(
        "client_latency", "Client-side latency beside the broker's", columns, stats, note, groups
    )
