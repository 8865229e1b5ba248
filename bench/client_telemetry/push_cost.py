"""The broker's CPU per accepted PushTelemetry, on the manual clock (no socket).

    .venv/bin/python -m bench.client_telemetry.push_cost [--pushes 5000]

Pushes librdkafka 2.16's own payloads (``tests/data/client_telemetry/``: zstd, a
producer's 10 metrics and a consumer's 13) through ``ClientMetricsManager`` as the
PushTelemetry handler does, and prints the microseconds per push of each step: the
zstd decompression, the protobuf parse (``opentelemetry-proto``), the whole decode into
flat points, and the whole push (checks, decode, the receiver keeping the series). Best
of five rounds. A client pushes once per interval (librdkafka: 5 minutes by default),
so the figure times clients / interval is the broker's share.
"""

from __future__ import annotations

import argparse
import timeit
import uuid
from collections.abc import Callable
from pathlib import Path

from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from broker.ids import IdSource
from broker.observability.client_telemetry.client_metrics_instance import ClientAttributes
from broker.observability.client_telemetry.client_metrics_manager import ClientMetricsManager
from broker.observability.client_telemetry.client_metrics_store import ClientMetricsStore
from broker.observability.client_telemetry.client_telemetry_receiver import (
    ClientTelemetryReceiver,
)
from broker.observability.client_telemetry.otlp_payload import decode_metrics_data
from protocol.compression import ZSTD, decompress, decompress_bounded
from purgatory import ManualClock

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "client_telemetry"


def _best_us(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def measure(kind: str, n: int) -> None:
    """Print one payload's sizes and the cost of each step."""
    payload = (DATA / f"librdkafka_2_16_{kind}.otlp.zst").read_bytes()
    raw = decompress(ZSTD, payload)
    clock = ManualClock(0)
    store = ClientMetricsStore()
    store.put("all", {"metrics": "*", "interval.ms": "100"})
    manager = ClientMetricsManager(
        store, clock, IdSource.seeded(1), 1 << 20, ClientTelemetryReceiver()
    )
    who = ClientAttributes("c", kind, "librdkafka", "2.16.1", "127.0.0.1", 1)
    _, instance = manager.get_telemetry_subscriptions(uuid.UUID(int=0), who)

    def push() -> None:
        clock.advance(100)
        manager.push_telemetry(
            instance.instance_id, instance.subscription_id, False, ZSTD, payload, who
        )

    steps: list[tuple[str, Callable[[], object]]] = [
        ("decompress (zstd)", lambda: decompress_bounded(ZSTD, payload, 1 << 20)),
        ("protobuf parse", lambda: MetricsData.FromString(raw)),
        ("decode to points", lambda: decode_metrics_data(raw)),
        ("whole push", push),
    ]
    points = len(decode_metrics_data(raw).points)
    print(f"{kind}: {len(payload)} bytes zstd, {len(raw)} bytes OTLP, {points} points")
    for name, fn in steps:
        print(f"  {name:<20} {_best_us(fn, n):8.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pushes", type=int, default=5000)
    n = parser.parse_args().pushes
    for kind in ("producer", "consumer"):
        measure(kind, n)


if __name__ == "__main__":
    main()
