"""Spark schemas: derived from the capture models, plus the replay-result and analysis schemas.

Captures are read with an explicit schema, never inferred. The capture schemas are built
from the pydantic models in ``protocol.capture`` by walking their field annotations, so
a field added to the model reaches Spark without a second, hand-kept list that could
drift. The replay RESULT schema and the ANALYSIS schema are written out here: they are
contracts of their own (the replay job produces the first; captures and Kafka request
logs are both projected onto the second so that the report takes either).
"""

from __future__ import annotations

import types
import typing
from typing import Any, Final, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from protocol.capture import CaptureRequest, DelayedOperationEvent
from spark_jobs.replay_result import ReplayResult

__all__ = [
    "ANALYSIS_SCHEMA",
    "CAPTURE_REQUEST_SCHEMA",
    "DELAYED_OPERATION_EVENT_SCHEMA",
    "PURGATORY_KIND",
    "RESULT_SCHEMA",
    "check_record_schema",
    "spark_schema_for",
    "spark_type_for",
]


def _strip_none(annotation: Any) -> tuple[Any, bool]:
    """(annotation without None, whether None was allowed)."""
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        args = [a for a in get_args(annotation) if a is not type(None)]
        nullable = len(args) != len(get_args(annotation))
        if len(args) == 1:
            return args[0], nullable
        raise TypeError(f"no Spark type for a union of several types: {annotation!r}")
    return annotation, False


def spark_type_for(annotation: Any) -> tuple[DataType, bool]:
    """The Spark type for one Python/pydantic annotation, and whether it is nullable.

    Integers map to LongType: Kafka's int16/int32 fields fit, and microsecond
    timestamps need 64 bits, so one integer type keeps the mapping simple and lossless.
    """
    annotation, nullable = _strip_none(annotation)
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        inner, inner_nullable = spark_type_for(get_args(annotation)[0])
        return inner, nullable or inner_nullable
    if origin is Literal:
        values = get_args(annotation)
        if all(isinstance(v, str) for v in values):
            return StringType(), nullable
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return LongType(), nullable
        raise TypeError(f"no Spark type for mixed literal {annotation!r}")
    if origin in (list, tuple) or annotation in (list, tuple):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        if len(args) != 1:
            raise TypeError(f"need one element type for {annotation!r}")
        element, element_nullable = spark_type_for(args[0])
        return ArrayType(element, containsNull=element_nullable), nullable
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return spark_schema_for(annotation), nullable
        if annotation is bool:  # before int: bool is an int subclass
            return BooleanType(), nullable
        if annotation is int:
            return LongType(), nullable
        if annotation is float:
            return DoubleType(), nullable
        if annotation is str:
            return StringType(), nullable
        if annotation is bytes:
            return BinaryType(), nullable
    raise TypeError(f"no Spark type for {annotation!r}")


def spark_schema_for(model: type[BaseModel]) -> StructType:
    """A StructType with one field per model field, in the model's field order."""
    fields = []
    for name, info in model.model_fields.items():
        # FieldInfo.annotation has Annotated metadata (validators) stripped already.
        data_type, nullable = spark_type_for(info.annotation)
        fields.append(StructField(name, data_type, nullable=nullable))
    return StructType(fields)


#: Every field of a captured request (request bytes as BinaryType).
CAPTURE_REQUEST_SCHEMA: Final = spark_schema_for(CaptureRequest)
#: Every field of a delayed-operation event.
DELAYED_OPERATION_EVENT_SCHEMA: Final = spark_schema_for(DelayedOperationEvent)

#: One row per captured request, the captured figures beside the replayed ones. Written
#: by the replay job, read by the report. Times are milliseconds; ``planned_send_ms`` and
#: ``actual_send_ms`` count from the start of the replay, so ``actual - planned`` is the
#: schedule lag. ``response_ms`` is send -> response latency, null when no response came
#: (acks=0, ``replay_skip`` says why it was not sent, or ``replay_error`` what failed).
#: ``traffic`` is "client" or "inter-broker" (``spark_jobs.traffic``); inter-broker
#: requests are skipped. ``captured_*_ms`` are Kafka's breakdown as captured. The
#: ``replay_*`` columns say where the request went: the target broker, the connection
#: as that broker names it (the ``LOCAL-REMOTE`` part of Kafka's connection id
#: ``local:port-remote:port-index``) and the correlation id the replay gave it -- the
#: key of the target's own capture record of it. ``run_kind`` says which kind of run
#: produced the row: ``REAL_TIME`` (the replay over TCP against running brokers) or
#: ``VIRTUAL_TIME`` (a simulated cluster on a virtual clock); null in results written
#: before the column existed, which were all real-time. ``client_id`` is the request
#: header's, as captured and as replayed (the replay sends it unchanged);
#: ``principal`` the user the request was replayed as (``User:x`` over the target's SASL
#: listener with ``--target-users``), null when it went over PLAINTEXT;
#: ``throttle_time_ms`` the replayed response's (a quota's throttle, KIP-219), null
#: without an answer or a field for it. The three are null in older results.
RESULT_SCHEMA: Final = StructType(
    [
        StructField("api_key", IntegerType(), nullable=False),
        StructField("api_name", StringType(), nullable=False),
        StructField("api_version", IntegerType(), nullable=False),
        StructField("connection_id", StringType(), nullable=False),
        StructField("sequence", LongType(), nullable=False),
        StructField("purgatory", StringType(), nullable=True),
        StructField("purgatory_outcome", StringType(), nullable=True),
        StructField("captured_total_ms", DoubleType(), nullable=False),
        StructField("captured_remote_ms", DoubleType(), nullable=False),
        StructField("planned_send_ms", DoubleType(), nullable=False),
        StructField("actual_send_ms", DoubleType(), nullable=True),
        StructField("response_ms", DoubleType(), nullable=True),
        StructField("error_codes", ArrayType(IntegerType(), containsNull=False), nullable=True),
        StructField("replay_error", StringType(), nullable=True),
        # -- added with the fidelity report (appended: positions above are kept) --
        StructField("broker_id", LongType(), nullable=False),
        StructField("traffic", StringType(), nullable=False),
        StructField("replay_skip", StringType(), nullable=True),
        StructField("captured_request_queue_ms", DoubleType(), nullable=True),
        StructField("captured_local_ms", DoubleType(), nullable=True),
        StructField("captured_response_queue_ms", DoubleType(), nullable=True),
        StructField("captured_send_ms", DoubleType(), nullable=True),
        StructField("replay_broker_id", LongType(), nullable=True),
        StructField("replay_connection", StringType(), nullable=True),
        StructField("replay_correlation_id", LongType(), nullable=True),
        StructField("captured_correlation_id", LongType(), nullable=True),
        # -- added with what-if in virtual time (issue 24) --
        StructField("run_kind", StringType(), nullable=True),
        # -- added with the replay's client ids, principals and quotas (issue 22) --
        StructField("client_id", StringType(), nullable=True),
        StructField("principal", StringType(), nullable=True),
        StructField("throttle_time_ms", LongType(), nullable=True),
    ]
)


def _same_kind(expected: DataType, actual: DataType) -> bool:
    """Whether a record field of Spark type ``expected`` (as ``spark_type_for`` maps it)
    fits a column of type ``actual``: integers fit either integer width."""
    integers = (IntegerType, LongType)
    if isinstance(expected, ArrayType) and isinstance(actual, ArrayType):
        return _same_kind(expected.elementType, actual.elementType)
    if isinstance(expected, integers):
        return isinstance(actual, integers)
    return type(expected) is type(actual)


def check_record_schema(record: type[tuple[Any, ...]], schema: StructType) -> None:
    """Raise TypeError unless the NamedTuple ``record`` has ``schema``'s columns in
    order, ``| None`` exactly on the nullable ones, and a type of each column's kind."""
    hints = typing.get_type_hints(record)
    names = list(getattr(record, "_fields", ()))
    if names != schema.fieldNames():
        raise TypeError(f"{record.__name__} fields {names} != columns {schema.fieldNames()}")
    problems = []
    for column in schema.fields:
        data_type, nullable = spark_type_for(hints[column.name])
        if nullable != column.nullable:
            problems.append(f"{column.name}: nullable {nullable} != {column.nullable}")
        if not _same_kind(data_type, column.dataType):
            problems.append(f"{column.name}: {data_type} does not fit {column.dataType}")
    if problems:
        raise TypeError(f"{record.__name__} does not match its schema: {'; '.join(problems)}")


check_record_schema(ReplayResult, RESULT_SCHEMA)

#: What the latency analysis needs of one served request, whichever source it came from
#: (a capture directory or Kafka's request log). ``source`` says which.
#: ``received_unix_us`` is when the broker received it (request log: log time minus
#: total time). ``sequence`` and ``broker_id`` are null for the request log, which has
#: neither. ``replica_id`` tells follower requests (``spark_jobs.traffic``).
ANALYSIS_SCHEMA: Final = StructType(
    [
        StructField("source", StringType(), nullable=False),
        StructField("broker_id", LongType(), nullable=True),
        StructField("connection_id", StringType(), nullable=False),
        StructField("sequence", LongType(), nullable=True),
        StructField("api_key", IntegerType(), nullable=False),
        StructField("api_name", StringType(), nullable=False),
        StructField("api_version", IntegerType(), nullable=True),
        StructField("correlation_id", LongType(), nullable=False),
        StructField("client_id", StringType(), nullable=True),
        StructField("received_unix_us", LongType(), nullable=True),
        StructField("request_queue_time_ms", DoubleType(), nullable=False),
        StructField("local_time_ms", DoubleType(), nullable=False),
        StructField("remote_time_ms", DoubleType(), nullable=False),
        StructField("throttle_time_ms", DoubleType(), nullable=False),
        StructField("response_queue_time_ms", DoubleType(), nullable=False),
        StructField("response_send_time_ms", DoubleType(), nullable=False),
        StructField("total_time_ms", DoubleType(), nullable=False),
        StructField("purgatory", StringType(), nullable=True),
        StructField("purgatory_outcome", StringType(), nullable=True),
        StructField("error_codes", ArrayType(IntegerType(), containsNull=False), nullable=True),
        StructField("replica_id", LongType(), nullable=True),
    ]
)

#: The delayed operation a request waits as in each purgatory, for the report's labels.
#: (The Rebalance purgatory also holds DelayedSync; requests that park there are joins.)
PURGATORY_KIND: Final[dict[str, str]] = {
    "Produce": "DelayedProduce",
    "Fetch": "DelayedFetch",
    "Rebalance": "DelayedJoin",
    "Heartbeat": "DelayedHeartbeat",
    "DeleteRecords": "DelayedDeleteRecords",
    "ShareFetch": "DelayedShareFetch",
    "RemoteFetch": "DelayedRemoteFetch",
    "RemoteListOffsets": "DelayedRemoteListOffsets",
}
