"""What the request path costs in-process: dispatch + handler + encode, no sockets.

``request_cost.py`` measures a broker over TCP, where the event loop and the kernel
add their share and a busy machine blurs the figures. This one feeds pre-encoded frames
straight to one broker's ``RequestDispatcher`` (built by the composition root, as in
production) and encodes the answers, so it isolates the Python work per request that
the broker itself controls. It reports CPU microseconds per request (process time, so
other processes on the machine matter little), min and median over rounds::

    .venv/bin/python -m bench.request_cost.dispatch_cost [--requests 20000] [--rounds 5]
        [--kinds api-versions,metadata,produce,heartbeat] [--profile api-versions]
        [--produce-records 1] [--produce-compression 0] [--config KEY=VALUE ...]

The produce request carries one batch of ``--produce-records`` 100-byte records
(codec id ``--produce-compression``: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd) dated at
the wall clock when the run starts, acks=1; ``--config`` sets a broker config (e.g.
``log.message.timestamp.before.max.ms=86400000``, which makes every batch's records be
walked for their timestamps).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

from broker.app import build_standalone_broker
from broker.config.broker_config import BrokerConfig
from broker.control.faults import NoFaults
from broker.server.broker_server import Broker
from broker.server.context import ConnectionInfo
from broker.server.dispatch import InFlight
from protocol.builders import request_builder
from protocol.client import ClientConnection
from protocol.record_builder import build_record_batch
from purgatory import LoopClock

API_VERSIONS, METADATA, PRODUCE, HEARTBEAT, JOIN_GROUP, SYNC_GROUP = 18, 3, 0, 12, 11, 14
TOPIC = "bench"


def _broker(configs: dict[str, str]) -> Broker:
    return build_standalone_broker(
        LoopClock(asyncio.get_running_loop().time),
        config=BrokerConfig.model_validate({"group.initial.rebalance.delay.ms": "0", **configs}),
        faults=NoFaults(),
    )


def _frame(api_key: int, version: int, body: Any) -> bytes:
    return ClientConnection("bench").send(api_key, version, body).data[4:]


def _api_versions() -> bytes:
    b = request_builder(API_VERSIONS, 3)
    return _frame(
        API_VERSIONS,
        3,
        b.ApiVersionsRequest(client_software_name="bench", client_software_version="1"),
    )


def _metadata() -> bytes:
    b = request_builder(METADATA, 9)
    return _frame(
        METADATA,
        9,
        b.MetadataRequest(
            topics=(b.MetadataRequestTopic(name=TOPIC),),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        ),
    )


def _produce(records: int, compression: int) -> bytes:
    b = request_builder(PRODUCE, 9)
    now_ms = int(time.time() * 1000)
    batch = build_record_batch(
        [(None, b"x" * 100, ())] * records,
        timestamp_ms=now_ms,
        record_timestamps=[now_ms + i for i in range(records)],
        compression=compression,
    )
    return _frame(
        PRODUCE,
        9,
        b.ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout=5000,
            topic_data=(
                b.TopicProduceData(
                    name=TOPIC,
                    partition_data=(b.PartitionProduceData(index=0, records=batch),),
                ),
            ),
        ),
    )


async def _heartbeat(run: Callable[[bytes], Any]) -> bytes:
    """Join a group (one member, no delay) so that heartbeats are answered NONE."""
    jb = request_builder(JOIN_GROUP, 7)
    join = await _answer(
        run(
            _frame(
                JOIN_GROUP,
                7,
                jb.JoinGroupRequest(
                    group_id="g",
                    session_timeout=30000,
                    rebalance_timeout=30000,
                    member_id="",
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=(jb.JoinGroupRequestProtocol(name="range", metadata=b""),),
                    reason=None,
                ),
            )
        )
    )
    if not join.member_id:  # v4+: the first join only assigns the member id
        join = await _answer(
            run(
                _frame(
                    JOIN_GROUP,
                    7,
                    jb.JoinGroupRequest(
                        group_id="g",
                        session_timeout=30000,
                        rebalance_timeout=30000,
                        member_id=join.member_id,
                        group_instance_id=None,
                        protocol_type="consumer",
                        protocols=(jb.JoinGroupRequestProtocol(name="range", metadata=b""),),
                        reason=None,
                    ),
                )
            )
        )
    member, generation = join.member_id, join.generation_id
    sb = request_builder(SYNC_GROUP, 5)
    await _answer(
        run(
            _frame(
                SYNC_GROUP,
                5,
                sb.SyncGroupRequest(
                    group_id="g",
                    generation_id=generation,
                    member_id=member,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocol_name="range",
                    assignments=(sb.SyncGroupRequestAssignment(member_id=member, assignment=b""),),
                ),
            )
        )
    )
    hb = request_builder(HEARTBEAT, 4)
    return _frame(
        HEARTBEAT,
        4,
        hb.HeartbeatRequest(
            group_id="g", generation_id=generation, member_id=member, group_instance_id=None
        ),
    )


async def _answer(in_flight: InFlight) -> Any:
    if in_flight.future is not None:
        return await in_flight.future
    return in_flight.response


async def measure(
    kinds: list[str],
    requests: int,
    rounds: int,
    profile: str | None,
    produce_records: int = 1,
    produce_compression: int = 0,
    configs: dict[str, str] | None = None,
) -> None:
    broker = _broker(configs or {})
    await broker.services.replica_manager.start()
    await broker.services.coordinators.group.start()
    broker.purgatories.start()
    broker.services.metadata.create_topic(TOPIC, 1, 1, {})
    broker.services.metadata.create_topic("__consumer_offsets", 1, 1, {"cleanup.policy": "compact"})
    await asyncio.sleep(0.05)
    dispatcher = broker.dispatcher
    connection = ConnectionInfo("bench", "127.0.0.1", 1, 9092)
    now = time.perf_counter_ns

    def run(frame: bytes) -> InFlight:
        return dispatcher.dispatch(frame, now(), connection)

    frames = {
        "api-versions": _api_versions(),
        "metadata": _metadata(),
        "produce": _produce(produce_records, produce_compression),
    }
    if "heartbeat" in kinds:
        frames["heartbeat"] = await _heartbeat(run)
    print(f"{'kind':<14} {'requests':>9} {'min µs/req':>11} {'median µs/req':>14}")
    for kind in kinds:
        frame = frames[kind]

        def once(frame: bytes = frame) -> None:
            for _ in range(requests):
                in_flight = dispatcher.dispatch(frame, now(), connection)
                if in_flight.future is not None:
                    continue  # produce acks=1 answers at once; nothing parks here
                dispatcher.encode(in_flight)
                dispatcher.completed(in_flight, 0)

        figures = []
        for _ in range(rounds):
            start = time.process_time()
            once()
            figures.append((time.process_time() - start) / requests * 1e6)
            await asyncio.sleep(0)
        print(f"{kind:<14} {requests:>9} {min(figures):>11.1f} {statistics.median(figures):>14.1f}")
        if profile == kind:
            profiler = cProfile.Profile()
            profiler.enable()
            once()
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
    await broker.services.coordinators.group.stop()
    await broker.services.replica_manager.stop()
    await broker.purgatories.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kinds", default="api-versions,metadata,produce,heartbeat")
    parser.add_argument("--profile", default=None, help="a kind to profile (cProfile)")
    parser.add_argument("--produce-records", type=int, default=1, help="records a batch (1)")
    parser.add_argument("--produce-compression", type=int, default=0, help="codec id (0)")
    parser.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="a broker config"
    )
    args = parser.parse_args()
    configs = dict(item.split("=", 1) for item in args.config)
    asyncio.run(
        measure(
            args.kinds.split(","),
            args.requests,
            args.rounds,
            args.profile,
            args.produce_records,
            args.produce_compression,
            configs,
        )
    )


if __name__ == "__main__":
    main()
