"""Several ``log.dirs`` per broker: kafka-python moves a replica between two of them.

A broker started with ``log.dirs=A,B`` has the log dirs ``A/broker-0`` and
``B/broker-0``; ``describe_log_dirs`` lists both with the partitions in each,
``alter_replica_log_dirs`` moves a replica to the other, and its records are still
there, from the new directory, after the move and after a restart.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kafka.admin import KafkaAdminClient
from kafka.errors import NoError
from kafka.structs import TopicPartitionReplica
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from tests.helpers.cluster import raw_to_leader
from tests.integration.conftest import running_cluster

TOPIC = "moved"


def dirs_of(described: list[dict[str, Any]]) -> dict[str, set[tuple[str, int]]]:
    """log dir -> the (topic, partition) pairs in it, from describe_log_dirs."""
    out: dict[str, set[tuple[str, int]]] = {}
    for broker in described:
        for log_dir in broker["log_dirs"]:
            pairs = out.setdefault(log_dir["log_dir"], set())
            for topic in log_dir["topics"]:
                for p in topic["partitions"]:
                    pairs.add((topic["name"], p["partition_index"]))
    return out


def move(bootstrap: str, destination: str) -> tuple[Any, Any, Any, Any]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        before = admin.describe_log_dirs()
        moved = admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, 0): destination})
        unknown = admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, 0): "/nowhere"})
        after = admin.describe_log_dirs()
        return before, moved, unknown, after
    finally:
        admin.close()


async def test_kafka_python_moves_a_replica_to_another_log_dir(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    log_dirs = f"{first},{second}"
    async with running_cluster(1, **{"log.dirs": log_dirs}) as app:
        app.cluster.create_topic(TOPIC, 2, 1, {})
        await _produce(app, 3)
        start = app.brokers[0].replica_manager.log_manager.log_dir_of(TOPIC, 0)
        assert start is not None
        # Two partitions over two dirs: one in each (the fewest partitions first).
        dirs = {str((first / "broker-0").resolve()), str((second / "broker-0").resolve())}
        [destination] = dirs - {str(start.resolve())}

        before, moved, unknown, after = await asyncio.to_thread(move, app.bootstrap, destination)
        assert set(dirs_of(before)) == dirs
        assert (TOPIC, 0) in dirs_of(before)[str(start.resolve())]
        assert moved == {TopicPartitionReplica(TOPIC, 0, 0): NoError}
        [refused] = unknown.values()
        assert refused.errno == 57  # LOG_DIR_NOT_FOUND
        assert dirs_of(after)[destination] >= {(TOPIC, 0)}
        assert (TOPIC, 0) not in dirs_of(after)[str(start.resolve())]
        assert (Path(destination) / f"{TOPIC}-0").is_dir()
        assert not (start / f"{TOPIC}-0").exists()
        # The records moved with it, and the log goes on from there.
        assert await _produce(app, 1) == 3
    async with running_cluster(1, **{"log.dirs": log_dirs}) as app:
        log_dir = app.brokers[0].replica_manager.log_manager.log_dir_of(TOPIC, 0)
        assert log_dir is not None and str(log_dir.resolve()) == destination
        assert app.brokers[0].replica_manager.partitions[(TOPIC, 0)].log_end_offset == 4


async def _produce(app: MiniKafka, count: int) -> int:
    raw = await raw_to_leader(app, TOPIC, 0)
    try:
        offset = -1
        for i in range(count):
            error, offset = await raw.produce(TOPIC, 0, f"r{i}".encode())
            assert error is ErrorCode.none
        return offset
    finally:
        await raw.close()
