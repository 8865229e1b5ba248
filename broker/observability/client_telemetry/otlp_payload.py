"""A PushTelemetry payload read: decompressed with the client's codec, decoded as OTLP.

KIP-714 clients push an OpenTelemetry ``MetricsData`` protobuf (OTLP metrics v1),
compressed with one of the codecs GetTelemetrySubscriptions offered. The codecs are the
record batches' (``protocol.compression``, bounded by ``telemetry.max.bytes``: past it,
``TelemetryTooLarge``); the protobuf classes are the OpenTelemetry project's
(``opentelemetry-proto``), not written by hand. What comes out is flat: one
``MetricPoint`` per data point, with the metric's name and kind, the point's value (a
histogram's: its sum, with its count), its attributes as strings and its time.

librdkafka 2.16 pushes gauges (``...latency.avg``/``.max``, ``...assigned.partitions``)
and sums (``...connection.creation.total``, ``...rebalance.latency.total``), with delta
temporality for the sums, as the broker asks (``delta_temporality``); the attributes name
the node (``node.id``) where a metric is per broker. Resource attributes (the client's
``client_rack``, ``group_id``, ...) are the payload's, kept apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_DELTA,
    MetricsData,
)

from broker.observability.client_telemetry.client_metrics_manager import TelemetryTooLarge
from protocol.compression import DecompressedSizeExceeded, decompress_bounded

__all__ = ["MetricPoint", "TelemetryPayload", "decode_metrics_data", "decode_payload"]


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One data point of a pushed metric."""

    name: str
    #: ``gauge``, ``sum``, ``histogram``, ``exponential_histogram`` or ``summary``.
    kind: str
    value: float
    attributes: tuple[tuple[str, str], ...]
    time_unix_nano: int
    #: A sum's: whether it only grows, and whether each point is a delta.
    monotonic: bool = False
    delta: bool = False
    #: A histogram's or summary's count of observations.
    count: int | None = None


@dataclass(frozen=True, slots=True)
class TelemetryPayload:
    """What one push carried: the resource's attributes and every data point."""

    resource: tuple[tuple[str, str], ...]
    points: tuple[MetricPoint, ...]


def decode_payload(compression_type: int, data: bytes, max_bytes: int) -> TelemetryPayload:
    """Decompress (at most ``max_bytes``) and decode; ``TelemetryTooLarge`` past the
    bound, ``ValueError`` (CompressionError) or protobuf's ``DecodeError`` when bad."""
    try:
        raw = decompress_bounded(compression_type, data, max_bytes)
    except DecompressedSizeExceeded as exc:
        raise TelemetryTooLarge(str(exc)) from None
    if len(raw) > max_bytes:
        raise TelemetryTooLarge(f"metrics of {len(raw)} bytes, more than {max_bytes}")
    return decode_metrics_data(bytes(raw))


def decode_metrics_data(data: bytes) -> TelemetryPayload:
    """An OTLP ``MetricsData`` as flat points (module doc)."""
    message = MetricsData.FromString(data)
    resource: list[tuple[str, str]] = []
    points: list[MetricPoint] = []
    for resource_metrics in message.resource_metrics:
        resource.extend(_attributes(resource_metrics.resource.attributes))
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                points.extend(_points(metric))
    return TelemetryPayload(tuple(resource), tuple(points))


def _points(metric: Any) -> Iterable[MetricPoint]:
    kind = metric.WhichOneof("data")
    name = metric.name
    if kind == "gauge":
        for p in metric.gauge.data_points:
            yield MetricPoint(name, kind, _number(p), _attributes(p.attributes), p.time_unix_nano)
    elif kind == "sum":
        delta = metric.sum.aggregation_temporality == AGGREGATION_TEMPORALITY_DELTA
        for p in metric.sum.data_points:
            yield MetricPoint(
                name,
                kind,
                _number(p),
                _attributes(p.attributes),
                p.time_unix_nano,
                monotonic=metric.sum.is_monotonic,
                delta=delta,
            )
    elif kind in ("histogram", "exponential_histogram", "summary"):
        for p in getattr(metric, kind).data_points:
            yield MetricPoint(
                name, kind, p.sum, _attributes(p.attributes), p.time_unix_nano, count=p.count
            )


def _number(point: Any) -> float:
    if point.WhichOneof("value") == "as_int":
        return float(point.as_int)
    return float(point.as_double)


def _attributes(attributes: Iterable[KeyValue]) -> tuple[tuple[str, str], ...]:
    return tuple((kv.key, _text(kv.value)) for kv in attributes)


def _text(value: AnyValue) -> str:
    which = value.WhichOneof("value")
    if which is None:
        return ""
    if which == "bytes_value":
        return value.bytes_value.hex()
    if which in ("array_value", "kvlist_value"):
        return str(getattr(value, which)).replace("\n", " ").strip()
    return str(getattr(value, which))
