"""The Spark schemas stay in step with the capture models (no JVM needed)."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructType,
)

from protocol.capture import CaptureRequest, DelayedOperationEvent
from spark_jobs.captures import capture_analysis_row
from spark_jobs.schema import (
    ANALYSIS_SCHEMA,
    CAPTURE_REQUEST_SCHEMA,
    DELAYED_OPERATION_EVENT_SCHEMA,
    RESULT_SCHEMA,
    spark_schema_for,
)
from tests.helpers.captures import make_request


def test_capture_schemas_have_every_model_field_in_order() -> None:
    assert CAPTURE_REQUEST_SCHEMA.fieldNames() == list(CaptureRequest.model_fields)
    assert DELAYED_OPERATION_EVENT_SCHEMA.fieldNames() == list(DelayedOperationEvent.model_fields)


def test_capture_request_types() -> None:
    fields = {f.name: f for f in CAPTURE_REQUEST_SCHEMA.fields}
    assert fields["request"].dataType == BinaryType()
    assert fields["error_codes"].dataType == ArrayType(LongType(), containsNull=False)
    assert fields["total_time_ms"].dataType == DoubleType()
    assert fields["received_unix_us"].dataType == LongType()
    assert fields["purgatory"].dataType == StringType() and fields["purgatory"].nullable
    assert fields["client_id"].nullable
    assert not fields["api_key"].nullable
    for name in ("principal", "listener_name"):
        assert fields[name].dataType == StringType() and fields[name].nullable
    events = {f.name: f for f in DELAYED_OPERATION_EVENT_SCHEMA.fields}
    assert events["keys"].dataType == ArrayType(StringType(), containsNull=False)
    assert events["delay_ms"].nullable and not events["kind"].nullable


def test_a_new_model_field_reaches_the_spark_schema() -> None:
    class Inner(BaseModel):
        x: float

    class Extended(CaptureRequest):
        flag: bool = False
        labels: list[str] | None = None
        inner: Inner | None = None
        level: Literal[1, 2] = 1

    schema = spark_schema_for(Extended)
    fields = {f.name: f for f in schema.fields}
    assert schema.fieldNames()[: len(CAPTURE_REQUEST_SCHEMA)] == CAPTURE_REQUEST_SCHEMA.fieldNames()
    assert fields["flag"].dataType == BooleanType()
    assert fields["labels"].dataType == ArrayType(StringType(), containsNull=False)
    assert fields["labels"].nullable
    assert fields["inner"].dataType == StructType().add("x", DoubleType(), nullable=False)
    assert fields["level"].dataType == LongType()


def test_unsupported_annotation_is_an_error() -> None:
    class Bad(BaseModel):
        either: int | str

    with pytest.raises(TypeError):
        spark_schema_for(Bad)


def test_analysis_columns_come_from_the_capture_record() -> None:
    # Every analysis column but "source" is a capture field of the same name, so a
    # captured request projects onto it without renaming.
    capture_fields = set(CaptureRequest.model_fields)
    assert set(ANALYSIS_SCHEMA.fieldNames()) - capture_fields == {"source"}
    row = capture_analysis_row(make_request())
    assert len(row) == len(ANALYSIS_SCHEMA.fields)
    named = dict(zip(ANALYSIS_SCHEMA.fieldNames(), row, strict=True))
    record = make_request()
    for name in ANALYSIS_SCHEMA.fieldNames():
        if name != "source":
            expected = getattr(record, name)
            assert named[name] == (list(expected) if isinstance(expected, list) else expected)


def test_result_schema_is_the_replay_contract() -> None:
    assert RESULT_SCHEMA.fieldNames() == [
        "api_key",
        "api_name",
        "api_version",
        "connection_id",
        "sequence",
        "purgatory",
        "purgatory_outcome",
        "captured_total_ms",
        "captured_remote_ms",
        "planned_send_ms",
        "actual_send_ms",
        "response_ms",
        "error_codes",
        "replay_error",
        # appended with the fidelity report: the positions above are kept
        "broker_id",
        "traffic",
        "replay_skip",
        "captured_request_queue_ms",
        "captured_local_ms",
        "captured_response_queue_ms",
        "captured_send_ms",
        "replay_broker_id",
        "replay_connection",
        "replay_correlation_id",
        "captured_correlation_id",
        # appended with what-if in virtual time
        "run_kind",
        # appended with the replay's client ids, principals and quotas (issue 22)
        "client_id",
        "principal",
        "throttle_time_ms",
    ]
    nullable = {f.name for f in RESULT_SCHEMA.fields if f.nullable}
    assert {"purgatory", "purgatory_outcome", "response_ms", "replay_error"} <= nullable
    assert {"replay_skip", "replay_connection", "replay_correlation_id"} <= nullable
    assert "traffic" not in nullable


def test_analysis_schema_tells_follower_requests() -> None:
    fields = {f.name: f for f in ANALYSIS_SCHEMA.fields}
    assert fields["replica_id"].dataType == LongType() and fields["replica_id"].nullable
    assert CAPTURE_REQUEST_SCHEMA["replica_id"].nullable


def test_the_replay_result_record_is_the_result_schema() -> None:
    from spark_jobs.replay_result import ReplayResult
    from spark_jobs.schema import check_record_schema

    check_record_schema(ReplayResult, RESULT_SCHEMA)  # also done when schema is imported
    assert list(ReplayResult._fields) == RESULT_SCHEMA.fieldNames()


def test_a_record_that_drifts_from_its_schema_is_caught() -> None:
    from typing import NamedTuple

    from pyspark.sql.types import IntegerType, StructField

    from spark_jobs.schema import check_record_schema

    schema = StructType(
        [StructField("a", IntegerType(), nullable=False), StructField("b", StringType())]
    )

    class Good(NamedTuple):
        a: int
        b: str | None

    class Reordered(NamedTuple):
        b: str | None
        a: int

    class NotNullable(NamedTuple):
        a: int
        b: str

    class WrongKind(NamedTuple):
        a: float
        b: str | None

    check_record_schema(Good, schema)
    with pytest.raises(TypeError, match="fields"):
        check_record_schema(Reordered, schema)
    with pytest.raises(TypeError, match="b: nullable"):
        check_record_schema(NotNullable, schema)
    with pytest.raises(TypeError, match="a: DoubleType"):
        check_record_schema(WrongKind, schema)
