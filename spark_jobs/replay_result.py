"""One replayed request's result: the typed record behind ``schema.RESULT_SCHEMA``.

The replay client builds one ``ReplayResult`` per captured row; Spark writes it as a row
of ``RESULT_SCHEMA`` (a NamedTuple is a tuple, so Spark reads it by position with no
conversion). The record's fields are the schema's columns, in the schema's order, and
a field is ``| None`` exactly where the column is nullable: ``schema`` checks that when
it is imported (``check_record_schema``), so the two cannot drift apart. Spark-free:
the replay's executor side and its tests use it without a JVM.

Column meanings are documented once, on ``RESULT_SCHEMA``.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["REAL_TIME", "VIRTUAL_TIME", "ReplayResult"]

#: ``run_kind`` of a replay over TCP against running brokers, on the wall clock.
REAL_TIME: Final = "real-time"
#: ``run_kind`` of a replay inside a simulated cluster, on a virtual clock (issue 24).
VIRTUAL_TIME: Final = "virtual-time"


class ReplayResult(NamedTuple):
    """A row of ``RESULT_SCHEMA``; see there for what each column means."""

    api_key: int
    api_name: str
    api_version: int
    connection_id: str
    sequence: int
    purgatory: str | None
    purgatory_outcome: str | None
    captured_total_ms: float
    captured_remote_ms: float
    planned_send_ms: float
    actual_send_ms: float | None
    response_ms: float | None
    error_codes: list[int] | None
    replay_error: str | None
    broker_id: int
    traffic: str
    replay_skip: str | None
    captured_request_queue_ms: float | None
    captured_local_ms: float | None
    captured_response_queue_ms: float | None
    captured_send_ms: float | None
    replay_broker_id: int | None
    replay_connection: str | None
    replay_correlation_id: int | None
    captured_correlation_id: int | None
    run_kind: str | None = REAL_TIME
    client_id: str | None = None
    principal: str | None = None
    throttle_time_ms: int | None = None
