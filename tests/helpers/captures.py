"""Capture records with plausible values, for the capture, schema and report tests."""

from __future__ import annotations

from typing import Any

from protocol.capture import CaptureRequest, DelayedOperationEvent, kafka_connection_id


def make_request(**overrides: Any) -> CaptureRequest:
    fields: dict[str, Any] = {
        "broker_id": 1,
        "connection_id": kafka_connection_id("127.0.0.1", 9092, "127.0.0.1", 53422, 0),
        "sequence": 0,
        "api_key": 0,
        "api_name": "Produce",
        "api_version": 9,
        "correlation_id": 12,
        "client_id": "producer-1",
        "request_size": 6,
        "response_size": 50,
        "request": b"\xfb\xff\x00\x01\x02\x03",
        "received_unix_us": 1_714_564_800_123_456,
        "received_monotonic_us": 987_654_321,
        "request_queue_time_ms": 0.05,
        "local_time_ms": 1.2,
        "remote_time_ms": 10.901,
        "response_queue_time_ms": 0.02,
        "response_send_time_ms": 0.1,
        "total_time_ms": 12.271,
        "purgatory": "Produce",
        "purgatory_outcome": "completed",
        "error_codes": [0, 0],
    }
    fields.update(overrides)
    return CaptureRequest(**fields)


def make_event(**overrides: Any) -> DelayedOperationEvent:
    fields: dict[str, Any] = {
        "broker_id": 1,
        "operation_id": 7,
        "kind": "DelayedFetch",
        "purgatory": "Fetch",
        "keys": ["orders-0"],
        "event": "expired",
        "at_unix_us": 1_714_564_800_623_456,
        "at_monotonic_us": 988_154_321,
        "delay_ms": 500,
    }
    fields.update(overrides)
    return DelayedOperationEvent(**fields)
