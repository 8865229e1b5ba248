"""Capture directories as Spark DataFrames, read with ``protocol.capture_files``.

Files are listed on the driver and each file is read whole by one task with the same
Python reader the tests exercise, so a file cut by a crash is read up to the cut (with
a warning in that executor's log) instead of failing the job, as Spark's own gzip JSON
reader would. The directory must be visible to the executors at the same path (local
mode, or a shared volume as in docker-compose).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.capture import CaptureRequest, DelayedOperationEvent
from protocol.capture_files import capture_files, read_capture
from spark_jobs.schema import (
    ANALYSIS_SCHEMA,
    CAPTURE_REQUEST_SCHEMA,
    DELAYED_OPERATION_EVENT_SCHEMA,
)
from spark_jobs.traffic import REPLICA_ID_APIS, replica_id_of_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "capture_analysis_row",
    "read_capture_analysis_df",
    "read_capture_requests_df",
    "read_delayed_operations_df",
]


def capture_analysis_row(record: CaptureRequest) -> tuple[Any, ...]:
    """A captured request in ``ANALYSIS_SCHEMA`` column order."""
    return (
        "capture",
        record.broker_id,
        record.connection_id,
        record.sequence,
        record.api_key,
        record.api_name,
        record.api_version,
        record.correlation_id,
        record.client_id,
        record.received_unix_us,
        record.request_queue_time_ms,
        record.local_time_ms,
        record.remote_time_ms,
        record.throttle_time_ms,
        record.response_queue_time_ms,
        record.response_send_time_ms,
        record.total_time_ms,
        record.purgatory,
        record.purgatory_outcome,
        list(record.error_codes),
        _replica_id(record),
    )


def _replica_id(record: CaptureRequest) -> int | None:
    """The record's replica id; decoded from its bytes for captures older than the field."""
    if record.replica_id is not None or record.api_key not in REPLICA_ID_APIS:
        return record.replica_id
    return replica_id_of_frame(record.api_key, record.request)


def _requests_as_analysis_rows(path: str) -> Iterator[tuple[Any, ...]]:
    for record in read_capture(path):
        if isinstance(record, CaptureRequest):
            yield capture_analysis_row(record)


def _requests_as_full_rows(path: str) -> Iterator[tuple[Any, ...]]:
    names = CAPTURE_REQUEST_SCHEMA.fieldNames()
    for record in read_capture(path):
        if isinstance(record, CaptureRequest):
            values = {name: getattr(record, name) for name in names}
            values["replica_id"] = _replica_id(record)
            yield tuple(values[name] for name in names)


def _events_as_rows(path: str) -> Iterator[tuple[Any, ...]]:
    names = DELAYED_OPERATION_EVENT_SCHEMA.fieldNames()
    for record in read_capture(path):
        if isinstance(record, DelayedOperationEvent):
            yield tuple(getattr(record, name) for name in names)


def _per_file(spark: SparkSession, path: str | Path, reader: Any, schema: StructType) -> DataFrame:
    files = [str(f) for f in capture_files(path)]
    rdd = spark.sparkContext.parallelize(files, max(1, len(files))).flatMap(reader)
    return spark.createDataFrame(rdd, schema=schema)


def read_capture_analysis_df(spark: SparkSession, path: str | Path) -> DataFrame:
    """Captured requests projected onto ``ANALYSIS_SCHEMA`` (no request bytes)."""
    return _per_file(spark, path, _requests_as_analysis_rows, ANALYSIS_SCHEMA)


def read_capture_requests_df(spark: SparkSession, path: str | Path) -> DataFrame:
    """Captured requests with every field (``CAPTURE_REQUEST_SCHEMA``), bytes included."""
    return _per_file(spark, path, _requests_as_full_rows, CAPTURE_REQUEST_SCHEMA)


def read_delayed_operations_df(spark: SparkSession, path: str | Path) -> DataFrame:
    """Delayed-operation events (``DELAYED_OPERATION_EVENT_SCHEMA``)."""
    return _per_file(spark, path, _events_as_rows, DELAYED_OPERATION_EVENT_SCHEMA)
