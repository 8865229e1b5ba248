"""A 3-broker cluster and aiokafka clients on the simulated loop, unchanged.

No sockets and no real time: the brokers listen on the in-memory network, aiokafka's idempotent
acks=all producer and a consumer group run on the virtual clock. That the same seed gives the
same run is `minikafka simulate`'s promise, tested across processes in
tests/integration/test_simulate_command.py (within one process the allocator's addresses —
which order sets of objects — are not promised to repeat).
"""

from __future__ import annotations

import asyncio
import hashlib
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from virtual_time.loop import run_simulated

RECORDS = 120


async def _produce_then_consume() -> str:
    loop = asyncio.get_running_loop()
    config = BrokerConfig.model_validate(
        {"group.initial.rebalance.delay.ms": "0", "default.replication.factor": "3"}
    )
    app = MiniKafka(config, brokers=3, port=0)
    await app.start()
    bootstrap = f"127.0.0.1:{app.brokers[0].port}"
    digest = hashlib.sha256()
    try:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True
        )
        await producer.start()
        for i in range(RECORDS):
            # aiokafka stamps records with a clock bound at import; give it the simulated one
            stamp = int(time.time() * 1000)
            meta = await producer.send_and_wait(
                "t", b"%d" % i, key=b"%d" % (i % 5), timestamp_ms=stamp
            )
            digest.update(b"%d:%d:%d;" % (meta.partition, meta.offset, i))
        await producer.stop()
        consumer = AIOKafkaConsumer(
            "t", bootstrap_servers=bootstrap, group_id="g", auto_offset_reset="earliest"
        )
        await consumer.start()
        seen: list[bytes] = []
        while len(seen) < RECORDS:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                seen.extend(r.value for r in records if r.value is not None)
        await consumer.commit()
        await consumer.stop()
        assert sorted(seen) == sorted(b"%d" % i for i in range(RECORDS))
        digest.update(b"t=%.9f;" % loop.time())
        digest.update(b"messages=%d" % loop.network.messages_delivered)  # type: ignore[attr-defined]
    finally:
        await app.stop()
    return digest.hexdigest()


def test_a_replicated_cluster_and_aiokafka_run_in_virtual_time() -> None:
    digest = run_simulated(_produce_then_consume(), seed=7)
    assert len(digest) == 64
