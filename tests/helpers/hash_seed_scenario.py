"""A simulated 3-broker run driven only by the project's own client (no aiokafka), printing a
digest of everything it saw: ``python -m tests.helpers.hash_seed_scenario SEED``.

tests/integration/test_broker_determinism.py runs it under different ``PYTHONHASHSEED``s (and
with address-space randomisation on): the brokers take time from the injected clocks, ids from
the seeded `IdSource` and iterate nothing in a hash-seeded order, so the digest depends on the
seed alone. (`minikafka simulate` still fixes ``PYTHONHASHSEED`` for aiokafka's sake.)
"""

from __future__ import annotations

import asyncio
import hashlib
import sys

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.ids import IdSource
from broker.server.request_timing import RequestClock
from kafka_tools.client import GroupMember, KafkaClient, fetch, join_group, leave_group, produce
from virtual_time.determinism import DEFAULT_EPOCH_S
from virtual_time.loop import SimulatedEventLoop, run_simulated

TOPICS = ("alpha", "beta", "gamma")


async def _scenario(seed: int) -> str:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, SimulatedEventLoop)
    config = BrokerConfig.model_validate(
        {
            "group.initial.rebalance.delay.ms": "0",
            "default.replication.factor": "3",
            "offsets.topic.num.partitions": "3",
            "num.partitions": "3",
        }
    )
    clocks = RequestClock(
        monotonic_ns=lambda: round(loop.time() * 1e9),
        wall_ms=lambda: (DEFAULT_EPOCH_S + loop.time()) * 1000,
    )
    app = MiniKafka(config, brokers=3, port=0, request_clock=clocks, ids=IdSource.seeded(seed))
    await app.start()
    digest = hashlib.sha256()
    try:
        async with KafkaClient(app.bootstrap) as client:
            for topic in TOPICS:
                acked = await produce(client, topic, [(b"k%d" % i, b"v%d" % i) for i in range(30)])
                digest.update(b"%s:%d;" % (topic.encode(), acked))
            positions = {(t, p): 0 for t in TOPICS for p in range(3)}
            digest.update(repr(await fetch(client, positions)).encode())
            member = GroupMember("g", list(TOPICS))
            await join_group(client, member)
            digest.update(repr(sorted(member.assignment.items())).encode())
            digest.update(member.member_id.encode())
            await leave_group(client, member)
        digest.update(app.cluster.cluster_id.encode())
        digest.update(repr(sorted((n, t.topic_id) for n, t in app.cluster.topics.items())).encode())
        digest.update(b"t=%.9f;m=%d" % (loop.time(), loop.network.messages_delivered))
    finally:
        await app.stop()
    return digest.hexdigest()[:16]


def main() -> None:
    seed = int(sys.argv[1])
    print(run_simulated(_scenario(seed), seed=seed))


if __name__ == "__main__":
    main()
