"""Brokers that talk to each other over a SASL_SSL listener (inter.broker.listener.name):
followers fetch and the transaction coordinator writes its markers through TLS and SASL,
as the broker's own user, and the cluster replicates, elects and commits as over
PLAINTEXT."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from broker.server.context import RequestContext
from testkit.polling import wait_until
from tests.integration.conftest import running_cluster
from tests.integration.security_setup import make_pki, security_overrides

ADMIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)


class InterBrokerRequests:
    """Which APIs arrived on which listener as whom (a RequestObserver)."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, str, str]] = set()

    def request_received(self, ctx: RequestContext, request: Any, frame: bytes) -> None:
        c = ctx.connection
        api = ctx.header.api_key
        if api == 1:  # Fetch: a follower's carries its replica id
            replica_state = getattr(request, "replica_state", None)
            replica = getattr(request, "replica_id", -1)
            if replica_state is not None:
                replica = replica_state.replica_id
            kind = "replica fetch" if replica >= 0 else "consumer fetch"
        elif api == 27:
            kind = "WriteTxnMarkers"
        else:
            return
        self.seen.add((c.listener_name, str(c.principal), kind))

    def request_completed(self, ctx: RequestContext, response: Any, size: int) -> None:
        pass


async def test_three_brokers_replicate_elect_and_commit_over_sasl_ssl(tmp_path: Path) -> None:
    observer = InterBrokerRequests()
    overrides = {
        **security_overrides(make_pki(tmp_path)),
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": ADMIN_JAAS,
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "offsets.topic.replication.factor": "3",
    }
    async with running_cluster(3, observers=[observer], **overrides) as app:
        producer = AIOKafkaProducer(
            bootstrap_servers=app.bootstrap, acks="all", transactional_id="tx-secure"
        )
        await producer.start()
        try:
            async with asyncio.timeout(60):
                async with producer.transaction():
                    await producer.send("secure-rf3", b"committed", partition=0)
        finally:
            await producer.stop()
        # an election: the leader stops, another leads; it comes back and catches up
        state = app.cluster.topics["secure-rf3"].partitions[0]
        old_leader = state.leader
        await app.stop_broker(old_leader)
        assert app.cluster.topics["secure-rf3"].partitions[0].leader != old_leader
        again = AIOKafkaProducer(bootstrap_servers=app.bootstrap, acks="all")
        await again.start()
        try:
            async with asyncio.timeout(60):
                await again.send_and_wait("secure-rf3", b"after election", partition=0)
        finally:
            await again.stop()
        await app.start_broker(old_leader)
        await wait_until(  # the state: back in the ISR, fetching over SASL_SSL
            lambda: old_leader in app.cluster.topics["secure-rf3"].partitions[0].isr,
            "the old leader back in the ISR",
            attempts=1200,
        )
        consumer = AIOKafkaConsumer(
            "secure-rf3",
            bootstrap_servers=app.bootstrap,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        await consumer.start()
        try:
            async with asyncio.timeout(60):
                record = await consumer.getone()
            assert record.value == b"committed"
        finally:
            await consumer.stop()
    inter_broker = {(who, kind) for listener, who, kind in observer.seen if listener == "SASL_SSL"}
    assert inter_broker == {("User:admin", "replica fetch"), ("User:admin", "WriteTxnMarkers")}
    plaintext = {kind for listener, _, kind in observer.seen if listener == "PLAINTEXT"}
    assert plaintext == {"consumer fetch"}  # the application's, never a broker's
