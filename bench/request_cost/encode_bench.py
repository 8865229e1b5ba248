"""What encoding a response body costs: kio's ``entity_writer`` against our generated
writers (``protocol.fast_writers``), on the responses the broker sends most.

Each row times one body encode (no header, no length prefix) both ways and checks
that the bytes are the same before timing anything. kio writes into an ``io.BytesIO``
and takes its value, as ``codec`` used to; the fast writer appends to a ``bytearray``
and copies it out once, as ``codec`` does now. A third column is the whole framed
``codec.encode_response`` (header and length prefix included, fast writer inside). The
figure is the best of ``--repeat`` timings of an auto-ranged loop, in µs per encode::

    .venv/bin/python -m bench.request_cost.encode_bench [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import io
import json
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from bench.lib.tables import table_lines
from protocol.api_registry import ApiSpec
from protocol.builders import response_builder
from protocol.codec import encode_response
from protocol.fast_writers import writer_for

API_VERSIONS, METADATA, PRODUCE, FETCH, HEARTBEAT, OFFSET_COMMIT = 18, 3, 0, 1, 12, 8


def _advertised_apis() -> tuple[ApiSpec, ...]:
    """The broker's real ApiVersions list (its handler registry)."""
    try:
        from broker.handlers.registry import api_specs, build_registry
    except ImportError:  # pragma: no cover - broker absent: the same shape, 26 entries
        return tuple(ApiSpec(key, f"api{key}", 0, 9) for key in range(26))
    return api_specs(build_registry())


def api_versions_v3(limit: int | None = None) -> Any:
    """The broker's ApiVersions v3 answer (its first ``limit`` entries if given)."""
    b = response_builder(API_VERSIONS, 3)
    return b.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(
            b.ApiVersion(api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
            for s in _advertised_apis()[:limit]
        ),
        throttle_time=0,
    )


def metadata_v9(topics: int, partitions: int) -> Any:
    b = response_builder(METADATA, 9)
    return b.MetadataResponse(
        throttle_time=0,
        brokers=(b.MetadataResponseBroker(node_id=0, host="localhost", port=9092, rack=None),),
        cluster_id="minikafka-cluster",
        controller_id=0,
        topics=tuple(
            b.MetadataResponseTopic(
                error_code=ErrorCode.none,
                name=f"topic-{t}",
                is_internal=False,
                partitions=tuple(
                    b.MetadataResponsePartition(
                        error_code=ErrorCode.none,
                        partition_index=p,
                        leader_id=0,
                        leader_epoch=0,
                        replica_nodes=(0,),
                        isr_nodes=(0,),
                        offline_replicas=(),
                    )
                    for p in range(partitions)
                ),
            )
            for t in range(topics)
        ),
    )


def produce_v9() -> Any:
    b = response_builder(PRODUCE, 9)
    return b.ProduceResponse(
        responses=(
            b.TopicProduceResponse(
                name="bench",
                partition_responses=(
                    b.PartitionProduceResponse(
                        index=0,
                        error_code=ErrorCode.none,
                        base_offset=1234,
                        log_append_time=-1,
                        log_start_offset=0,
                        record_errors=(),
                        error_message=None,
                    ),
                ),
            ),
        ),
        throttle_time=0,
    )


def fetch_v12() -> Any:
    b = response_builder(FETCH, 12)
    return b.FetchResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        session_id=0,
        responses=(
            b.FetchableTopicResponse(
                topic="bench",
                partitions=(
                    b.PartitionData(
                        partition_index=0,
                        error_code=ErrorCode.none,
                        high_watermark=10,
                        last_stable_offset=10,
                        log_start_offset=0,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=bytes(1024),
                    ),
                ),
            ),
        ),
    )


def heartbeat_v4() -> Any:
    b = response_builder(HEARTBEAT, 4)
    return b.HeartbeatResponse(throttle_time=0, error_code=ErrorCode.none)


def offset_commit_v8() -> Any:
    b = response_builder(OFFSET_COMMIT, 8)
    return b.OffsetCommitResponse(
        throttle_time=0,
        topics=(
            b.OffsetCommitResponseTopic(
                name="bench",
                partitions=(
                    b.OffsetCommitResponsePartition(partition_index=0, error_code=ErrorCode.none),
                ),
            ),
        ),
    )


@dataclass(frozen=True)
class Case:
    name: str
    api_key: int
    version: int
    build: Callable[[], Any]


CASES = (
    Case("ApiVersions v3 (the broker's list)", API_VERSIONS, 3, api_versions_v3),
    Case("ApiVersions v3 (26 of them)", API_VERSIONS, 3, lambda: api_versions_v3(26)),
    Case("Metadata v9 1 topic x 1 partition", METADATA, 9, lambda: metadata_v9(1, 1)),
    Case("Metadata v9 100 topics x 10 partitions", METADATA, 9, lambda: metadata_v9(100, 10)),
    Case("Produce v9 1 partition", PRODUCE, 9, produce_v9),
    Case("Fetch v12 1 partition, 1 KiB records", FETCH, 12, fetch_v12),
    Case("Heartbeat v4", HEARTBEAT, 4, heartbeat_v4),
    Case("OffsetCommit v8 1 partition", OFFSET_COMMIT, 8, offset_commit_v8),
)


def _best_us(fn: Callable[[], object], repeat: int) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(number, 1)
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e6


def measure(case: Case, repeat: int) -> dict[str, Any]:
    payload = case.build()
    kio_write = entity_writer(type(payload))
    fast_write = writer_for(type(payload))

    def kio() -> bytes:
        buf = io.BytesIO()
        kio_write(buf, payload)
        return buf.getvalue()

    def fast() -> bytes:
        out = bytearray()
        fast_write(out, payload)
        return bytes(out)

    def framed() -> bytes:
        return encode_response(case.api_key, case.version, 1, payload)

    if kio() != fast():  # pragma: no cover - the unit tests check it everywhere
        raise AssertionError(f"{case.name}: fast writer bytes differ from kio's")
    kio_us = _best_us(kio, repeat)
    fast_us = _best_us(fast, repeat)
    name = case.name
    if case.api_key == API_VERSIONS:
        name = f"ApiVersions v3 ({len(payload.api_keys)} APIs)"
    return {
        "case": name,
        "bytes": len(fast()),
        "kio_us": round(kio_us, 2),
        "fast_us": round(fast_us, 2),
        "ratio": round(kio_us / fast_us, 1),
        "framed_us": round(_best_us(framed, repeat), 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="also one JSON line per row")
    args = parser.parse_args(argv)
    rows = [measure(case, args.repeat) for case in CASES]
    header = ("response", "bytes", "kio µs", "fast µs", "kio/fast", "framed µs")
    table = [
        (
            r["case"],
            str(r["bytes"]),
            f"{r['kio_us']:.2f}",
            f"{r['fast_us']:.2f}",
            f"{r['ratio']:.1f}x",
            f"{r['framed_us']:.2f}",
        )
        for r in rows
    ]
    for line in table_lines(header, table, rule=True):
        print(line)
    if args.json:
        for r in rows:
            print(json.dumps(r))


if __name__ == "__main__":
    main()
