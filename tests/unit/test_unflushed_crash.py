"""A crash that loses what was not flushed: flush.messages and flush.ms move a memory log's
recovery point; a power loss drops what lies above it; what acks=all acknowledged survives on
the other in-sync replicas, what a lone leader acknowledged with acks=1 may go."""

from __future__ import annotations

import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.log import LogConfig, LogManager
from broker.log.memory_log import MemoryLog
from protocol.record_builder import build_record_batch
from purgatory import ManualClock
from virtual_time.loop import run_simulated


def _batch(value: bytes) -> bytes:
    return bytes(build_record_batch([(None, value, [])], timestamp_ms=0))


def test_flush_messages_moves_the_recovery_point_and_a_power_loss_drops_the_rest() -> None:
    log = MemoryLog(LogConfig(flush_messages=3))
    for i in range(2):
        log.append_as_leader(_batch(b"%d" % i))
    assert log.recovery_point == 0  # two unflushed: under flush.messages
    log.append_as_leader(_batch(b"2"))
    assert log.recovery_point == 3  # the third flushed all three
    for i in range(3, 5):
        log.append_as_leader(_batch(b"%d" % i))
    assert log.lose_unflushed() == 2
    assert (log.log_end_offset, log.recovery_point) == (3, 3)


def test_the_log_flusher_flushes_a_log_whose_last_flush_is_flush_ms_old() -> None:
    clock = ManualClock()
    logs = LogManager(None)
    log = logs.get_or_create("t", 0, LogConfig(flush_ms=1000))
    assert logs.flush_dirty_logs(clock.now_ms()) == 0  # first seen: as if just flushed
    log.append_as_leader(_batch(b"a"))
    clock.advance(999)
    assert logs.flush_dirty_logs(clock.now_ms()) == 0
    clock.advance(1)
    assert logs.flush_dirty_logs(clock.now_ms()) == 1
    log.append_as_leader(_batch(b"b"))
    assert isinstance(log, MemoryLog) and log.lose_unflushed() == 1  # "b" was not flushed
    assert log.log_end_offset == 1


def test_kafkas_default_flushes_nothing_but_a_roll() -> None:
    log = MemoryLog(LogConfig(segment_bytes=200))
    for i in range(6):
        log.append_as_leader(_batch(b"x" * 60 + b"%d" % i))
    assert 0 < log.recovery_point == log.active_segment_base_offset < log.log_end_offset


async def _acks_all_survives_acks_one_may_go() -> tuple[list[bytes], list[bytes], int]:
    config = BrokerConfig.model_validate(
        {
            "group.initial.rebalance.delay.ms": "0",
            "default.replication.factor": "3",
            "min.insync.replicas": "2",
        }
    )
    app = MiniKafka(config, brokers=3, port=0)
    await app.start()
    app.cluster.create_topic("t", 1, 3, {})
    try:
        all_producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks="all")
        one_producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks=1)
        await all_producer.start()
        await one_producer.start()
        stamp = int(time.time() * 1000)  # the simulated wall clock
        for i in range(10):
            await all_producer.send_and_wait("t", b"all-%d" % i, partition=0, timestamp_ms=stamp)
        leader = app.cluster.topics["t"].partitions[0].leader
        for follower in range(3):  # the followers stop: what follows is on the leader alone
            if follower != leader:
                app.pause_replication(follower)
        for i in range(5):
            await one_producer.send_and_wait("t", b"one-%d" % i, partition=0, timestamp_ms=stamp)
        lost = await app.crash_broker(leader)  # nothing was ever flushed (Kafka's default)
        for follower in range(3):
            app.resume_replication(follower)
        await app.start_broker(leader)
        await all_producer.stop()
        await one_producer.stop()
        return await _read_all(app.bootstrap), [b"all-%d" % i for i in range(10)], lost
    finally:
        await app.stop()


async def _read_all(bootstrap: str) -> list[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    tp = TopicPartition("t", 0)
    consumer.assign([tp])
    end = (await consumer.end_offsets([tp]))[tp]
    values: list[bytes] = []
    while await consumer.position(tp) < end:
        for records in (await consumer.getmany(tp, timeout_ms=1000)).values():
            values.extend(r.value for r in records if r.value is not None)
    await consumer.stop()
    return values


def test_a_crash_keeps_what_acks_all_acknowledged_and_may_lose_a_lone_leaders_acks_one() -> None:
    final, acknowledged, lost = run_simulated(_acks_all_survives_acks_one_may_go(), seed=3)
    assert lost == 15  # the leader flushed nothing: its whole log was unflushed
    assert final[:10] == acknowledged  # on the other in-sync replicas, which lead now
    assert not [v for v in final if v.startswith(b"one-")]  # the lone leader's acks=1 went
