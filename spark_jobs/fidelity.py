"""Captured beside replayed, like for like: the DataFrame transforms of the report.

The unit of comparison is a **side**: one set of served requests with Kafka's
breakdown, in ``SIDE_COLUMNS``. A replay gives two sides of the *same* client requests:

* ``captured``: each replayed request as the captured broker served it (the capture's
  breakdown, carried in the replay results);
* ``replayed``: the same request as the target broker served it -- its record in the
  target's capture, found by the target connection and the correlation id the replay
  gave it (``replay_connection``, ``replay_correlation_id``: Kafka's connection id is
  ``local:port-remote:port-index``, the replay knows the first two parts). The measure
  is then Kafka's TotalTimeMs on both sides, and the replayed side has its own
  purgatory, outcome and time parked. Without a target capture the replayed latency is
  the replay's send-to-response time (``measure`` "client"), and the outcomes are
  unknown.

Only requests on both sides are compared: client requests the replay sent without an
error (and, with a target capture, found in it). Inter-broker requests are never in a
side (``spark_jobs.traffic``); each cluster's own are summarised apart
(``inter_broker_sides``). ``side_stats`` aggregates a side frame per key (API,
purgatory) and side in one Spark job; ``pivot`` lays the sides of a key side by side
with their ratios, for the report (two sides) and ``compare`` (one per variant).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from spark_jobs.traffic import CLIENT, INTER_BROKER, traffic_column

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "BREAKDOWN",
    "CAPTURED",
    "QUANTILES",
    "REPLAYED",
    "SIDE_COLUMNS",
    "captured_side",
    "classify_events",
    "compared_pairs",
    "connection_prefix",
    "delayed_operations_by_side",
    "inter_broker_sides",
    "pivot",
    "replayed_side",
    "side_from_analysis",
    "side_stats",
]

CAPTURED: Final = "captured"
REPLAYED: Final = "replayed"
QUANTILES: Final = (0.5, 0.99, 0.999)
_Q_NAMES: Final = ("p50", "p99", "p999")
_ACCURACY: Final = 10_000
#: Kafka's breakdown, in the order a request lives it (the stacked bars' order).
BREAKDOWN: Final = ("request_queue_ms", "local_ms", "remote_ms", "response_queue_ms", "send_ms")
SIDE_COLUMNS: Final = (
    "side",
    "api_name",
    "purgatory",
    "purgatory_outcome",
    "latency_ms",
    *BREAKDOWN,
    "client_ms",
    "t_s",
)


def connection_prefix(column: str = "connection_id") -> Column:
    """Kafka's connection id without its trailing ``-index``: ``local:port-remote:port``."""
    from pyspark.sql import functions as F

    return F.regexp_extract(F.col(column), r"^(.*)-\d+$", 1)


def compared_pairs(results: DataFrame) -> DataFrame:
    """The client requests the replay sent without an error: the compared set."""
    from pyspark.sql import functions as F

    return results.where(
        (F.col("traffic") == CLIENT)
        & F.col("replay_skip").isNull()
        & F.col("replay_error").isNull()
        & F.col("actual_send_ms").isNotNull()
    )


def captured_side(pairs: DataFrame, side: str = CAPTURED) -> DataFrame:
    """The compared requests as captured (``SIDE_COLUMNS``)."""
    from pyspark.sql import functions as F

    return pairs.select(
        F.lit(side).alias("side"),
        "api_name",
        "purgatory",
        "purgatory_outcome",
        F.col("captured_total_ms").alias("latency_ms"),
        F.col("captured_request_queue_ms").alias("request_queue_ms"),
        F.col("captured_local_ms").alias("local_ms"),
        F.col("captured_remote_ms").alias("remote_ms"),
        F.col("captured_response_queue_ms").alias("response_queue_ms"),
        F.col("captured_send_ms").alias("send_ms"),
        F.lit(None).cast("double").alias("client_ms"),
        (F.col("planned_send_ms") / 1000.0).alias("t_s"),
    )


def replayed_side(
    pairs: DataFrame, target: DataFrame | None, side: str = REPLAYED
) -> tuple[DataFrame, DataFrame | None]:
    """(the compared requests as the target served them, the pairs that are on both
    sides). With ``target`` (the target's capture, ``ANALYSIS_SCHEMA``) each pair is
    joined with its record there, and only matched pairs are kept; without it the
    latency is the replay's send-to-response and no pair is dropped but those without
    a response (acks=0): the second item is then None and the caller uses the pairs
    with a response on the captured side too."""
    from pyspark.sql import functions as F

    if target is None:
        answered = pairs.where(F.col("response_ms").isNotNull())
        frame = answered.select(
            F.lit(side).alias("side"),
            "api_name",
            F.lit(None).cast("string").alias("purgatory"),
            F.lit(None).cast("string").alias("purgatory_outcome"),
            F.col("response_ms").alias("latency_ms"),
            *[F.lit(None).cast("double").alias(c) for c in BREAKDOWN],
            F.col("response_ms").alias("client_ms"),
            (F.col("actual_send_ms") / 1000.0).alias("t_s"),
        )
        return frame, None
    served = target.select(
        F.col("broker_id").alias("_t_broker"),
        connection_prefix().alias("_t_connection"),
        F.col("correlation_id").alias("_t_correlation"),
        F.col("purgatory").alias("_t_purgatory"),
        F.col("purgatory_outcome").alias("_t_outcome"),
        F.col("total_time_ms").alias("_t_total"),
        F.col("request_queue_time_ms").alias("_t_request_queue"),
        F.col("local_time_ms").alias("_t_local"),
        F.col("remote_time_ms").alias("_t_remote"),
        F.col("response_queue_time_ms").alias("_t_response_queue"),
        F.col("response_send_time_ms").alias("_t_send"),
    )
    joined = pairs.join(
        served,
        (pairs["replay_broker_id"] == served["_t_broker"])
        & (pairs["replay_connection"] == served["_t_connection"])
        & (pairs["replay_correlation_id"] == served["_t_correlation"]),
        "inner",
    ).cache()
    frame = joined.select(
        F.lit(side).alias("side"),
        "api_name",
        F.col("_t_purgatory").alias("purgatory"),
        F.col("_t_outcome").alias("purgatory_outcome"),
        F.col("_t_total").alias("latency_ms"),
        F.col("_t_request_queue").alias("request_queue_ms"),
        F.col("_t_local").alias("local_ms"),
        F.col("_t_remote").alias("remote_ms"),
        F.col("_t_response_queue").alias("response_queue_ms"),
        F.col("_t_send").alias("send_ms"),
        F.col("response_ms").alias("client_ms"),
        (F.col("actual_send_ms") / 1000.0).alias("t_s"),
    )
    matched = joined.select(*pairs.columns)
    return frame, matched


def side_from_analysis(analysis: DataFrame, side: str | None = None) -> DataFrame:
    """Client requests of a capture or request log (``ANALYSIS_SCHEMA``) as a side
    (named by their ``source`` unless ``side`` is given), time from its first request."""
    from pyspark.sql import functions as F

    client = analysis.where(traffic_column() == CLIENT)
    start = client.groupBy("source").agg(F.min("received_unix_us").alias("_start_us"))
    return client.join(start, "source").select(
        (F.lit(side) if side is not None else F.col("source")).alias("side"),
        "api_name",
        "purgatory",
        "purgatory_outcome",
        F.col("total_time_ms").alias("latency_ms"),
        F.col("request_queue_time_ms").alias("request_queue_ms"),
        F.col("local_time_ms").alias("local_ms"),
        F.col("remote_time_ms").alias("remote_ms"),
        F.col("response_queue_time_ms").alias("response_queue_ms"),
        F.col("response_send_time_ms").alias("send_ms"),
        F.lit(None).cast("double").alias("client_ms"),
        ((F.col("received_unix_us") - F.col("_start_us")) / 1e6).alias("t_s"),
    )


def inter_broker_sides(
    results: DataFrame | None, target: DataFrame | None, captured_name: str, target_name: str
) -> DataFrame | None:
    """Each cluster's own inter-broker requests as sides (not the same requests: the
    target's followers made their own)."""
    from pyspark.sql import functions as F

    frames = []
    if results is not None:
        own = results.where(F.col("traffic") == INTER_BROKER)
        frames.append(captured_side(own.withColumn("planned_send_ms", F.lit(0.0)), captured_name))
    if target is not None:
        own_target = target.where(traffic_column() == INTER_BROKER)
        frames.append(side_from_analysis_all(own_target, target_name))
    if not frames:
        return None
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def side_from_analysis_all(analysis: DataFrame, side: str) -> DataFrame:
    """Like ``side_from_analysis``, for any traffic, without the time axis."""
    from pyspark.sql import functions as F

    return analysis.select(
        F.lit(side).alias("side"),
        "api_name",
        "purgatory",
        "purgatory_outcome",
        F.col("total_time_ms").alias("latency_ms"),
        F.col("request_queue_time_ms").alias("request_queue_ms"),
        F.col("local_time_ms").alias("local_ms"),
        F.col("remote_time_ms").alias("remote_ms"),
        F.col("response_queue_time_ms").alias("response_queue_ms"),
        F.col("response_send_time_ms").alias("send_ms"),
        F.lit(None).cast("double").alias("client_ms"),
        F.lit(None).cast("double").alias("t_s"),
    )


def side_stats(frame: DataFrame, key: str) -> list[dict[str, Any]]:
    """Per (``key``, side): count, latency p50/p99/p99.9, max, the mean of each part of
    the breakdown, time parked (remote) p50/p99 of the requests that parked, the
    requests with a purgatory outcome and those expired, client latency p50. Rows whose
    ``key`` is null are left out."""
    from pyspark.sql import functions as F

    parked = F.when(F.col("purgatory").isNotNull(), F.col("remote_ms"))
    agg = (
        frame.where(F.col(key).isNotNull())
        .groupBy(key, "side")
        .agg(
            F.count("latency_ms").alias("count"),
            F.percentile_approx("latency_ms", list(QUANTILES), _ACCURACY).alias("_q"),
            F.max("latency_ms").alias("max"),
            *[F.avg(c).alias(f"mean_{c}") for c in BREAKDOWN],
            F.count(F.col("purgatory")).alias("parked"),
            F.percentile_approx(parked, [0.5, 0.99], _ACCURACY).alias("_parked_q"),
            F.count("purgatory_outcome").alias("with_outcome"),
            F.sum(F.when(F.col("purgatory_outcome") == "expired", 1).otherwise(0)).alias("expired"),
            F.percentile_approx("client_ms", [0.5], _ACCURACY).alias("_client_q"),
        )
    )
    rows = []
    for row in agg.collect():
        d = row.asDict()
        out: dict[str, Any] = {"key": d[key], "side": d["side"], "count": d["count"]}
        for i, name in enumerate(_Q_NAMES):
            out[name] = _clean(d["_q"][i]) if d["_q"] else None
        out["max"] = _clean(d["max"])
        for c in BREAKDOWN:
            out[f"mean_{c}"] = _clean(d[f"mean_{c}"])
        out["parked"] = d["parked"]
        parked_q = d["_parked_q"] or [None, None]
        out["parked_p50"], out["parked_p99"] = _clean(parked_q[0]), _clean(parked_q[1])
        out["with_outcome"], out["expired"] = d["with_outcome"], d["expired"]
        out["expiry_rate"] = d["expired"] / d["with_outcome"] if d["with_outcome"] else None
        out["client_p50"] = _clean(d["_client_q"][0]) if d["_client_q"] else None
        rows.append(out)
    rows.sort(key=lambda r: (str(r["key"]), str(r["side"])))
    return rows


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 3)
    return value


def ratio(new: float | None, base: float | None) -> float | None:
    if new is None or base is None or base <= 0:
        return None
    return round(new / base, 3)


def pivot(
    stats: Iterable[dict[str, Any]], sides: Sequence[str], baseline: str | None = None
) -> list[dict[str, Any]]:
    """One row per key: ``{"key", "sides": {side: stats or None}, "ratios": {side:
    {"p50", "p99", "p999"}}}`` with each side's percentiles over the ``baseline``
    side's (the first side by default; the baseline has no ratios)."""
    base = baseline or (sides[0] if sides else None)
    by_key: dict[Any, dict[str, dict[str, Any]]] = {}
    for row in stats:
        by_key.setdefault(row["key"], {})[row["side"]] = row
    out = []
    for key in sorted(by_key, key=str):
        per_side = by_key[key]
        reference = per_side.get(base) if base is not None else None
        ratios: dict[str, dict[str, float | None]] = {}
        for side in sides:
            if side == base or side not in per_side:
                continue
            ratios[side] = {
                q: ratio(per_side[side][q], reference[q] if reference else None) for q in _Q_NAMES
            }
        out.append(
            {
                "key": key,
                "sides": {side: per_side.get(side) for side in sides},
                "ratios": ratios,
                "total": sum(int(r["count"]) for r in per_side.values()),
            }
        )
    return out


def classify_events(events: DataFrame, requests: DataFrame | None) -> DataFrame:
    """Delayed-operation events with the traffic of the request that parked the
    operation (joined on broker, connection and correlation id); an operation parked by
    no request (DelayedHeartbeat: a member's session) or one whose request the capture
    lacks counts as client traffic."""
    from pyspark.sql import functions as F

    if requests is None:
        return events.withColumn("traffic", F.lit(CLIENT))
    keys = requests.select(
        F.col("broker_id").alias("_r_broker"),
        F.col("connection_id").alias("_r_connection"),
        F.col("correlation_id").alias("_r_correlation"),
        traffic_column().alias("_r_traffic"),
    ).dropDuplicates(["_r_broker", "_r_connection", "_r_correlation"])
    joined = events.join(
        keys,
        (events["broker_id"] == keys["_r_broker"])
        & (events["connection_id"] == keys["_r_connection"])
        & (events["correlation_id"] == keys["_r_correlation"]),
        "left",
    )
    return joined.withColumn("traffic", F.coalesce(F.col("_r_traffic"), F.lit(CLIENT))).drop(
        "_r_broker", "_r_connection", "_r_correlation", "_r_traffic"
    )


def delayed_operations_by_side(events: DataFrame) -> list[dict[str, Any]]:
    """Per (side, kind, traffic): created, completed, expired, expiry rate and the
    time operations spent parked (creation to completion or expiry) p50/p99/max.
    ``events`` has the event columns plus ``side`` and ``traffic``."""
    from pyspark.sql import functions as F

    ops = events.groupBy("side", "traffic", "broker_id", "operation_id", "kind").agg(
        F.min(F.when(F.col("event") == "created", F.col("at_monotonic_us"))).alias("created_us"),
        F.max(F.when(F.col("event") != "created", F.col("at_monotonic_us"))).alias("ended_us"),
        F.max(F.when(F.col("event") == "created", 1).otherwise(0)).alias("created"),
        F.max(F.when(F.col("event") == "completed", 1).otherwise(0)).alias("completed"),
        F.max(F.when(F.col("event") == "expired", 1).otherwise(0)).alias("expired"),
    )
    waited = (F.col("ended_us") - F.col("created_us")) / 1000.0
    agg = ops.groupBy("side", "kind", "traffic").agg(
        F.sum("created").alias("created"),
        F.sum("completed").alias("completed"),
        F.sum("expired").alias("expired"),
        F.percentile_approx(waited, [0.5, 0.99], _ACCURACY).alias("_q"),
        F.max(waited).alias("max_wait_ms"),
    )
    rows = []
    for row in agg.collect():
        d = row.asDict()
        ended = d["completed"] + d["expired"]
        q = d.pop("_q") or [None, None]
        d.update(
            expiry_rate=d["expired"] / ended if ended else None,
            p50_wait_ms=_clean(q[0]),
            p99_wait_ms=_clean(q[1]),
            max_wait_ms=_clean(d["max_wait_ms"]),
        )
        rows.append(d)
    rows.sort(key=lambda r: (r["kind"], r["traffic"], r["side"]))
    return rows
