"""Capture's fast path: lines generated from the models, written in batches on the loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from broker.observability.capture import BrokerCapture, CaptureSet
from broker.server.context import ConnectionInfo, RequestContext
from broker.server.purgatories import PurgatoryName, PurgatoryOutcome
from broker.server.request_timing import RequestTiming
from protocol.builders import response_builder
from protocol.capture import CaptureRequest, DelayedOperationEvent
from protocol.capture_files import CaptureWriter, line_encoder, read_capture
from protocol.codec import RequestHeader
from purgatory import ManualClock
from purgatory.delayed_operation import DelayedOperation
from tests.helpers.captures import make_event, make_request

texts = st.text(max_size=20)
ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
ms = st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False)


@st.composite
def requests(draw: st.DrawFn) -> CaptureRequest:
    return make_request(
        connection_id=draw(texts),
        sequence=draw(ints),
        client_id=draw(st.none() | texts),
        request=draw(st.binary(max_size=64)),
        local_time_ms=draw(ms),
        remote_time_ms=draw(ms),
        purgatory=draw(st.sampled_from([None, "Produce", "Fetch", "Rebalance", "Heartbeat"])),
        purgatory_outcome=draw(st.sampled_from([None, "completed", "expired"])),
        error_codes=draw(st.lists(st.integers(-1, 120), max_size=5)),
        replica_id=draw(st.none() | st.integers(-1, 5)),
        principal=draw(st.none() | st.sampled_from(["User:ANONYMOUS", "User:alice"])),
        listener_name=draw(st.none() | st.sampled_from(["PLAINTEXT", "SASL_PLAINTEXT"])),
    )


def _values(record: BaseModel) -> dict[str, Any]:
    return {name: getattr(record, name) for name in type(record).model_fields if name != "type"}


@settings(max_examples=200, deadline=None)
@given(requests())
def test_request_lines_read_back_as_pydantic_writes_them(record: CaptureRequest) -> None:
    line = line_encoder(CaptureRequest)(**_values(record))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == json.loads(record.model_dump_json())
    assert CaptureRequest.model_validate_json(line) == record


def test_event_lines_and_positional_order() -> None:
    record = make_event(keys=["a-0", 'q"uote'], delay_ms=None, connection_id="c-1")
    values = _values(record)
    names = list(values)[::-1]
    by_keyword = line_encoder(DelayedOperationEvent)(**values)
    positional = line_encoder(DelayedOperationEvent, names)(*[values[n] for n in names])
    assert by_keyword == positional
    assert DelayedOperationEvent.model_validate_json(positional) == record


def test_a_field_left_out_of_the_order_writes_its_default() -> None:
    names = [n for n in CaptureRequest.model_fields if n not in ("type", "throttle_time_ms")]
    record = make_request()
    line = line_encoder(CaptureRequest, names)(*[getattr(record, n) for n in names])
    assert json.loads(line)["throttle_time_ms"] == 0.0
    assert CaptureRequest.model_validate_json(line) == record


def test_order_is_checked_against_the_model() -> None:
    with pytest.raises(TypeError, match="unknown"):
        line_encoder(DelayedOperationEvent, ["broker_id", "nope"])
    with pytest.raises(TypeError, match="required"):
        line_encoder(DelayedOperationEvent, ["broker_id"])


def test_a_type_without_a_json_form_is_refused_up_front() -> None:
    class Odd(BaseModel):
        type: Literal["odd"] = "odd"
        when: dict[str, int]

    with pytest.raises(TypeError, match="when"):
        line_encoder(Odd)


# -- BrokerCapture: queued on the loop, written by drain -------------------------------------


def _context(sequence: int, timing: RequestTiming) -> RequestContext:
    connection = ConnectionInfo("127.0.0.1:9092-127.0.0.1:5000-0", "127.0.0.1", 5000, 9092)
    connection.sequence = sequence + 1
    header = RequestHeader(api_key=0, api_version=9, correlation_id=40 + sequence, client_id="c")
    return RequestContext(header, connection, None, timing, 64)  # type: ignore[arg-type]


def _produce_response() -> Any:
    b = response_builder(0, 9)
    partition = b.PartitionProduceResponse(
        index=0,
        error_code=0,
        base_offset=0,
        log_append_time=None,
        log_start_offset=0,
        record_errors=(),
        error_message=None,
    )
    return b.ProduceResponse(
        responses=(b.TopicProduceResponse(name="t", partition_responses=(partition,)),),
        throttle_time=0,
    )


class _Fetch(DelayedOperation):
    def __init__(self) -> None:
        super().__init__(500)
        self.parked_request = _context(0, RequestTiming())

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass


def _serve(capture: BrokerCapture, sequence: int) -> RequestTiming:
    timing = RequestTiming(
        received_ns=1_000_000_000,
        local_start_ns=1_000_012_400,
        local_end_ns=1_000_050_000,
        remote_end_ns=1_003_050_600,
        send_start_ns=1_003_051_000,
        send_end_ns=1_003_060_000,
        purgatory=PurgatoryName.PRODUCE,
        purgatory_outcome=PurgatoryOutcome.COMPLETED,
        throttle_time_ms=250 * sequence,
    )
    ctx = _context(sequence, timing)
    capture.request_received(ctx, object(), b"frame-%d" % sequence)
    capture.request_completed(ctx, _produce_response(), 77)
    return timing


def test_queued_records_are_written_in_order(tmp_path: Path) -> None:
    capture = BrokerCapture(CaptureWriter(tmp_path, 3), 3)
    timings = [_serve(capture, i) for i in range(3)]
    operation = _Fetch()
    listener = capture.purgatory_listeners()[PurgatoryName.FETCH]
    listener.on_watch(operation, (("orders", 0),))
    listener.on_expire(operation)
    capture.close()
    records = list(read_capture(tmp_path))
    requests = [r for r in records if isinstance(r, CaptureRequest)]
    assert [r.sequence for r in requests] == [0, 1, 2]
    first = requests[0]
    expected = timings[0].breakdown_ms()
    assert first.request == b"frame-0" and first.request_size == 64
    assert (first.api_name, first.response_size, first.error_codes) == ("Produce", 77, [0])
    assert (first.purgatory, first.purgatory_outcome) == ("Produce", "completed")
    assert first.request_queue_time_ms == expected["request_queue_ms"]
    assert first.local_time_ms == expected["local_ms"]
    assert first.remote_time_ms == expected["remote_ms"]
    assert first.response_queue_time_ms == expected["response_queue_ms"]
    assert first.response_send_time_ms == expected["send_ms"]
    assert first.total_time_ms == expected["total_ms"]
    assert first.received_monotonic_us == 1_000_000
    # A quota's throttle time (KIP-219) is part of the breakdown, as in Kafka's request log.
    assert [r.throttle_time_ms for r in requests] == [0.0, 250.0, 500.0]
    events = [r for r in records if isinstance(r, DelayedOperationEvent)]
    assert [(e.event, e.keys, e.kind) for e in events] == [
        ("created", ["orders-0"], "DelayedFetch"),
        ("expired", ["orders-0"], "DelayedFetch"),
    ]
    assert events[0].operation_id == events[1].operation_id
    assert events[0].connection_id == "127.0.0.1:9092-127.0.0.1:5000-0"


def test_records_are_written_in_batches_on_the_timer(tmp_path: Path) -> None:
    clock = ManualClock(0)
    captures = CaptureSet(tmp_path, clock=clock)
    capture = captures.for_broker(1)
    for i in range(3):
        _serve(capture, i)
    clock.advance(4)
    captures.timer.advance_clock()
    assert capture.writer.records_written == 0  # queued: a batch waits 5 ms
    clock.advance(1)
    captures.timer.advance_clock()
    assert capture.writer.records_written == 3
    for i in range(3, 3 + 64):  # a full batch is written at once
        _serve(capture, i)
    assert capture.writer.records_written == 3 + 64
    _serve(capture, 67)
    capture.close()  # a clean stop writes what is queued
    sequences = [r.sequence for r in read_capture(tmp_path) if isinstance(r, CaptureRequest)]
    assert sequences == list(range(68))


async def test_a_capture_set_stopped_cleanly_loses_nothing(tmp_path: Path) -> None:
    clock = ManualClock(0)
    captures = CaptureSet(tmp_path, clock=clock, flush_interval_ms=20)
    capture = captures.for_broker(0)
    captures.start()
    for i in range(200):
        _serve(capture, i)
    for _ in range(5):  # the batch delay, then flush periods of 10 ms: a flush is due
        clock.advance(10)
        captures.timer.advance_clock()
    assert capture.writer.records_written == 200
    flushed = list(read_capture(tmp_path))  # the file has them, not only the writer
    assert len([r for r in flushed if isinstance(r, CaptureRequest)]) == 200
    for i in range(200, 300):
        _serve(capture, i)
    await captures.stop()
    sequences = [r.sequence for r in read_capture(tmp_path) if isinstance(r, CaptureRequest)]
    assert sequences == list(range(300))


def test_a_line_written_before_principals_reads_with_none() -> None:
    """Captures written before ``principal``/``listener_name`` existed still read."""
    record = make_request(principal="User:alice", listener_name="SASL_PLAINTEXT")
    fields = json.loads(record.model_dump_json())
    del fields["principal"], fields["listener_name"]
    old = CaptureRequest.model_validate_json(json.dumps(fields))
    assert old.principal is None and old.listener_name is None
    assert old.client_id == record.client_id
