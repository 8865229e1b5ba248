"""ACLs with Kafka's StandardAuthorizer, through real clients on a SASL_PLAINTEXT listener.

The cluster has a PLAINTEXT listener (its connections are ``User:ANONYMOUS``, a super user
here as the inter-broker principal is in Kafka deployments: the tests set up topics and
records through it) and a SASL_PLAINTEXT one with PLAIN users ``admin`` (a super user),
``alice`` and ``bob``. Topics: ``orders``, ``secret``, ``pay-orders``, ``pay-secret``.
Alice may READ ``orders`` and the group ``g-alice``, READ every ``pay-`` topic (PREFIXED)
but is DENIED READ on ``pay-secret`` (LITERAL); bob has no ACL unless a test gives him one.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
)
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding as CkAclBinding,
)
from confluent_kafka.admin import (
    AclBindingFilter as CkAclBindingFilter,
)
from confluent_kafka.admin import (
    AclOperation as CkAclOperation,
)
from confluent_kafka.admin import (
    AclPermissionType as CkAclPermissionType,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.admin import (
    ResourcePatternType as CkResourcePatternType,
)
from confluent_kafka.admin import (
    ResourceType as CkResourceType,
)
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.security.authorizer.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from broker.security.authorizer.standard_authorizer import STANDARD_AUTHORIZER
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from testkit.requests import FETCH, FETCH_V, fetch_fields
from tests.helpers.cluster import isr
from tests.integration.conftest import running_cluster
from tests.integration.security_setup import jaas
from tests.integration.test_share_state_apis import _read as read_share_state

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
TOPICS = ("orders", "secret", "pay-orders", "pay-secret")
DEADLINE_S = 60
SASL = "SASL_PLAINTEXT"

OVERRIDES = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(USERS),
    "authorizer.class.name": STANDARD_AUTHORIZER,
    "super.users": "User:admin;User:ANONYMOUS",
}


def acl(
    resource_type: ResourceType,
    name: str,
    principal: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


ALICE_ACLS = [
    acl(ResourceType.TOPIC, "orders", "User:alice", AclOperation.READ),
    acl(ResourceType.GROUP, "g-alice", "User:alice", AclOperation.READ),
    acl(ResourceType.TOPIC, "pay-", "User:alice", AclOperation.READ, pattern=PatternType.PREFIXED),
    acl(ResourceType.TOPIC, "pay-secret", "User:alice", AclOperation.READ, AclPermissionType.DENY),
]


async def _setup(app: MiniKafka) -> None:
    for topic in TOPICS:
        app.cluster.create_topic(topic, 1, 1, {})
    assert app.acls.create(ALICE_ACLS) == [None] * len(ALICE_ACLS)
    producer = AIOKafkaProducer(bootstrap_servers=app.bootstrap)  # ANONYMOUS: a super user
    await producer.start()
    try:
        for topic in TOPICS:
            for i in range(3):
                await producer.send_and_wait(topic, f"{topic}-{i}".encode())
    finally:
        await producer.stop()


@pytest.fixture
async def secured() -> AsyncIterator[MiniKafka]:
    async with running_cluster(**OVERRIDES) as app:
        await _setup(app)
        yield app


def aiokafka_sasl(user: str) -> dict[str, Any]:
    return {
        "security_protocol": SASL,
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
    }


def confluent_sasl(app: MiniKafka, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": app.listener_bootstrap(SASL),
        "security.protocol": SASL,
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


# -- aiokafka ------------------------------------------------------------------------


async def test_aiokafka_reader_consumes_and_commits(secured: MiniKafka) -> None:
    consumer = AIOKafkaConsumer(
        "orders",
        bootstrap_servers=secured.listener_bootstrap(SASL),
        group_id="g-alice",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **aiokafka_sasl("alice"),
    )
    await consumer.start()
    try:
        values = [(await asyncio.wait_for(consumer.getone(), DEADLINE_S)).value for _ in range(3)]
        assert values == [b"orders-0", b"orders-1", b"orders-2"]
        await consumer.commit()
        assert await consumer.committed(TopicPartition("orders", 0)) == 3
    finally:
        await consumer.stop()


async def test_aiokafka_without_read_gets_topic_authorization_failed(secured: MiniKafka) -> None:
    # DESCRIBE lets bob see the topic and its offsets, not read it.
    secured.acls.create([acl(ResourceType.TOPIC, "orders", "User:bob", AclOperation.DESCRIBE)])
    consumer = AIOKafkaConsumer(
        bootstrap_servers=secured.listener_bootstrap(SASL),
        auto_offset_reset="earliest",
        **aiokafka_sasl("bob"),
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition("orders", 0)])
        with pytest.raises(TopicAuthorizationFailedError):
            await asyncio.wait_for(consumer.getone(), DEADLINE_S)
    finally:
        await consumer.stop()


async def test_aiokafka_without_group_read_gets_group_authorization_failed(
    secured: MiniKafka,
) -> None:
    secured.acls.create([acl(ResourceType.TOPIC, "orders", "User:bob", AclOperation.READ)])
    consumer = AIOKafkaConsumer(
        "orders",
        bootstrap_servers=secured.listener_bootstrap(SASL),
        group_id="g-bob",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **aiokafka_sasl("bob"),
    )
    try:
        # aiokafka looks its coordinator up in start() once subscribed: refused there
        with pytest.raises(GroupAuthorizationFailedError):
            await consumer.start()
            await asyncio.wait_for(consumer.getone(), DEADLINE_S)
    finally:
        await consumer.stop()


async def test_metadata_hides_what_may_not_be_described(secured: MiniKafka) -> None:
    seen = {}
    for user in ("alice", "bob", "admin"):
        consumer = AIOKafkaConsumer(
            bootstrap_servers=secured.listener_bootstrap(SASL), **aiokafka_sasl(user)
        )
        await consumer.start()
        try:
            seen[user] = await asyncio.wait_for(consumer.topics(), DEADLINE_S)
        finally:
            await consumer.stop()
    # a DENY of READ does not deny DESCRIBE: alice still sees pay-secret (Kafka's rule)
    assert seen["alice"] == {"orders", "pay-orders", "pay-secret"}
    assert seen["bob"] == set()
    assert set(TOPICS) <= seen["admin"]
    # the same question after an ACL change: a new answer, not a cached one
    secured.acls.create([acl(ResourceType.TOPIC, "secret", "User:bob", AclOperation.WRITE)])
    consumer = AIOKafkaConsumer(
        bootstrap_servers=secured.listener_bootstrap(SASL), **aiokafka_sasl("bob")
    )
    await consumer.start()
    try:
        assert await asyncio.wait_for(consumer.topics(), DEADLINE_S) == {"secret"}
    finally:
        await consumer.stop()


async def test_prefixed_allow_and_literal_deny(secured: MiniKafka) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=secured.listener_bootstrap(SASL),
        auto_offset_reset="earliest",
        **aiokafka_sasl("alice"),
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition("pay-orders", 0)])
        record = await asyncio.wait_for(consumer.getone(), DEADLINE_S)
        assert record.value == b"pay-orders-0"
        consumer.assign([TopicPartition("pay-secret", 0)])
        with pytest.raises(TopicAuthorizationFailedError):
            await asyncio.wait_for(consumer.getone(), DEADLINE_S)
    finally:
        await consumer.stop()


# -- confluent-kafka (librdkafka) ----------------------------------------------------


def _confluent_consume_and_commit(conf: dict[str, Any], group: str) -> tuple[list[bytes], int]:
    consumer = Consumer(
        {**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    try:
        consumer.subscribe(["orders"])
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            values.append(bytes(msg.value() or b""))
        consumer.commit(asynchronous=False)
        (committed,) = consumer.committed([CkTopicPartition("orders", 0)], timeout=DEADLINE_S)
        return values, committed.offset
    finally:
        consumer.close()


def _confluent_first_error(conf: dict[str, Any], group: str, topic: str) -> int:
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error():
                return int(msg.error().code())
        raise AssertionError("no error reported")
    finally:
        consumer.close()


async def test_confluent_kafka_reader_consumes_and_commits(secured: MiniKafka) -> None:
    values, committed = await asyncio.to_thread(
        _confluent_consume_and_commit, confluent_sasl(secured, "alice"), "g-alice"
    )
    assert values == [b"orders-0", b"orders-1", b"orders-2"]
    assert committed == 3


async def test_confluent_kafka_refusals(secured: MiniKafka) -> None:
    conf = confluent_sasl(secured, "bob")
    assert (
        await asyncio.to_thread(_confluent_first_error, conf, "g-bob", "orders")
        == KafkaError.GROUP_AUTHORIZATION_FAILED
    )
    secured.acls.create([acl(ResourceType.GROUP, "g-bob", "User:bob", AclOperation.READ)])
    assert (
        await asyncio.to_thread(_confluent_first_error, conf, "g-bob", "orders")
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )


def _confluent_admin_acls(admin_conf: dict[str, Any], bob_conf: dict[str, Any]) -> None:
    binding = CkAclBinding(
        CkResourceType.TOPIC,
        "secret",
        CkResourcePatternType.LITERAL,
        "User:bob",
        "*",
        CkAclOperation.READ,
        CkAclPermissionType.ALLOW,
    )
    secret_filter = CkAclBindingFilter(
        CkResourceType.TOPIC,
        "secret",
        CkResourcePatternType.MATCH,
        None,
        None,
        CkAclOperation.ANY,
        CkAclPermissionType.ANY,
    )
    bob_admin = AdminClient(bob_conf)
    with pytest.raises(KafkaException) as refused:
        bob_admin.create_acls([binding])[binding].result(timeout=DEADLINE_S)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    admin = AdminClient(admin_conf)
    admin.create_acls([binding])[binding].result(timeout=DEADLINE_S)
    assert admin.describe_acls(secret_filter).result(timeout=DEADLINE_S) == [binding]
    deleted = admin.delete_acls([secret_filter])[secret_filter].result(timeout=DEADLINE_S)
    assert deleted == [binding]
    assert admin.describe_acls(secret_filter).result(timeout=DEADLINE_S) == []


async def test_confluent_kafka_admin_acls(secured: MiniKafka) -> None:
    await asyncio.to_thread(
        _confluent_admin_acls, confluent_sasl(secured, "admin"), confluent_sasl(secured, "bob")
    )
    assert secured.acls.acls() == tuple(ALICE_ACLS)


# -- kafka-python's admin --------------------------------------------------------------


def _kafka_python_admin_acls(bootstrap: str) -> None:
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap,
        security_protocol=SASL,
        sasl_mechanism="PLAIN",
        sasl_plain_username="admin",
        sasl_plain_password=USERS["admin"],
    )
    try:
        pattern = ResourcePattern(KpResourceType.GROUP, "g-", ACLResourcePatternType.PREFIXED)
        wanted = ACL("User:bob", "*", ACLOperation.READ, ACLPermissionType.ALLOW, pattern)
        result = admin.create_acls([wanted])
        assert not result["failed"], result
        # Kafka's validation: the CLUSTER resource has one name
        cluster = ResourcePattern(KpResourceType.CLUSTER, "my-cluster")
        invalid = ACL("User:bob", "*", ACLOperation.ALTER, ACLPermissionType.ALLOW, cluster)
        (refused,) = admin.create_acls([invalid])["failed"]
        assert refused.errno == ErrorCode.invalid_request.value
        groups = ACLFilter(
            None,
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(KpResourceType.GROUP, None, ACLResourcePatternType.ANY),
        )
        described, error = admin.describe_acls(groups)
        assert error.errno == 0
        assert {(a.principal, a.resource_pattern.resource_name) for a in described} == {
            ("User:alice", "g-alice"),
            ("User:bob", "g-"),
        }
        ((_, removed, error),) = admin.delete_acls([groups])
        assert error.errno == 0 and len(removed) == 2
    finally:
        admin.close()


async def test_kafka_python_admin_acls(secured: MiniKafka) -> None:
    await asyncio.to_thread(_kafka_python_admin_acls, secured.listener_bootstrap(SASL))
    assert not any(a.resource_type is ResourceType.GROUP for a in secured.acls.acls())


# -- durability ----------------------------------------------------------------------


async def test_acls_and_scram_credentials_survive_a_restart(tmp_path: Path) -> None:
    async with running_cluster(data_dir=tmp_path, **OVERRIDES) as app:
        await _setup(app)
        app.scram_credentials.add_scram("SCRAM-SHA-256=[name=alice,password=scram-pw]", bytes)
    async with running_cluster(data_dir=tmp_path, **OVERRIDES) as app:
        assert app.acls.acls() == tuple(ALICE_ACLS)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=app.listener_bootstrap(SASL),
            security_protocol=SASL,
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username="alice",
            sasl_plain_password="scram-pw",
        )
        await consumer.start()
        try:
            topics = await asyncio.wait_for(consumer.topics(), DEADLINE_S)
        finally:
            await consumer.stop()
        assert topics == {"orders", "pay-orders", "pay-secret"}


# -- producers and admin APIs ----------------------------------------------------------


async def test_producers_need_write(secured: MiniKafka) -> None:
    bootstrap = secured.listener_bootstrap(SASL)
    idempotent = AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=True, **aiokafka_sasl("bob")
    )
    try:
        # InitProducerId: no IDEMPOTENT_WRITE on the cluster and no WRITE on any topic
        with pytest.raises(ClusterAuthorizationFailedError):
            await asyncio.wait_for(idempotent.start(), DEADLINE_S)
    finally:
        await idempotent.stop()
    secured.acls.create([acl(ResourceType.TOPIC, "orders", "User:bob", AclOperation.WRITE)])
    idempotent = AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=True, **aiokafka_sasl("bob")
    )
    await idempotent.start()
    try:
        sent = await asyncio.wait_for(idempotent.send_and_wait("orders", b"bob"), DEADLINE_S)
        assert sent.offset == 3
    finally:
        await idempotent.stop()
    transactional = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id="tx-bob", **aiokafka_sasl("bob")
    )
    try:
        with pytest.raises(TransactionalIdAuthorizationFailed):
            await asyncio.wait_for(transactional.start(), DEADLINE_S)
    finally:
        await transactional.stop()


def _confluent_admin_refusals(bob_conf: dict[str, Any]) -> tuple[int, int]:
    admin = AdminClient(bob_conf)
    created = admin.create_topics([NewTopic("bobs", 1, 1)])["bobs"]
    with pytest.raises(KafkaException) as refused_create:
        created.result(timeout=DEADLINE_S)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "orders")])
    with pytest.raises(KafkaException) as refused_describe:
        next(iter(described.values())).result(timeout=DEADLINE_S)
    return refused_create.value.args[0].code(), refused_describe.value.args[0].code()


async def test_admin_apis_need_their_acls(secured: MiniKafka) -> None:
    codes = await asyncio.to_thread(_confluent_admin_refusals, confluent_sasl(secured, "bob"))
    assert codes == (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert "bobs" not in secured.cluster.topics


# -- inter-broker ------------------------------------------------------------------------


async def test_replication_with_the_inter_broker_principal_a_super_user() -> None:
    async with running_cluster(3, **OVERRIDES) as app:
        app.cluster.create_topic("replicated", 1, 3, {})
        app.acls.create([acl(ResourceType.TOPIC, "replicated", "User:alice", AclOperation.WRITE)])
        producer = AIOKafkaProducer(
            bootstrap_servers=app.listener_bootstrap(SASL), acks="all", **aiokafka_sasl("alice")
        )
        await producer.start()
        try:
            for i in range(3):
                await asyncio.wait_for(producer.send_and_wait("replicated", b"%d" % i), DEADLINE_S)
        finally:
            await producer.stop()

        def replicated() -> bool:
            hosted = [
                broker.replica_manager.online_partition(("replicated", 0)) for broker in app.brokers
            ]
            return sorted(isr(app, "replicated")) == [0, 1, 2] and all(
                p is not None and p.log_end_offset == 3 for p in hosted
            )

        await wait_until(replicated, "every replica at offset 3", attempts=1200)


async def test_a_follower_fetch_needs_cluster_action() -> None:
    overrides = {**OVERRIDES, "super.users": "User:admin"}  # ANONYMOUS is nobody special
    async with running_cluster(**overrides) as app:
        app.cluster.create_topic("t", 1, 1, {})
        raw = await RawClient.connect(app.brokers[0].host, app.brokers[0].port)
        try:

            async def follower_fetch_error() -> ErrorCode:
                fields = {**fetch_fields("t", 0, 0), "replica_id": 1}
                response = await raw.request(FETCH, FETCH_V, "FetchRequest", **fields)
                return ErrorCode(response.responses[0].partitions[0].error_code)

            assert await follower_fetch_error() is ErrorCode.topic_authorization_failed
            app.acls.create(
                [
                    acl(
                        ResourceType.CLUSTER,
                        "kafka-cluster",
                        "User:ANONYMOUS",
                        AclOperation.CLUSTER_ACTION,
                    )
                ]
            )
            assert await follower_fetch_error() is not ErrorCode.topic_authorization_failed
        finally:
            await raw.close()


def _create_acl(bootstrap: str, binding: CkAclBinding) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_acls([binding])[binding].result(timeout=DEADLINE_S)


def _describe_acls(bootstrap: str) -> list[CkAclBinding]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    everything = CkAclBindingFilter(
        CkResourceType.ANY,
        None,
        CkResourcePatternType.ANY,
        None,
        None,
        CkAclOperation.ANY,
        CkAclPermissionType.ANY,
    )
    return list(admin.describe_acls(everything).result(timeout=DEADLINE_S))


async def test_acls_survive_kill_9(tmp_path: Path, broker_process: Any) -> None:
    args = [
        "--data-dir",
        str(tmp_path),
        "--override",
        f"authorizer.class.name={STANDARD_AUTHORIZER}",
        "--override",
        "super.users=User:ANONYMOUS",
    ]
    binding = CkAclBinding(
        CkResourceType.GROUP,
        "g-",
        CkResourcePatternType.PREFIXED,
        "User:alice",
        "*",
        CkAclOperation.READ,
        CkAclPermissionType.ALLOW,
    )
    first = broker_process(args)
    await asyncio.to_thread(_create_acl, first.bootstrap, binding)
    first.kill9()
    second = broker_process(args)
    assert await asyncio.to_thread(_describe_acls, second.bootstrap) == [binding]


async def test_a_transaction_with_its_acls_commits(secured: MiniKafka) -> None:
    secured.acls.create(
        [
            acl(ResourceType.TRANSACTIONAL_ID, "tx-alice", "User:alice", AclOperation.WRITE),
            acl(ResourceType.TOPIC, "orders", "User:alice", AclOperation.WRITE),
        ]
    )
    bootstrap = secured.listener_bootstrap(SASL)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id="tx-alice", **aiokafka_sasl("alice")
    )
    await asyncio.wait_for(producer.start(), DEADLINE_S)
    try:
        async with producer.transaction():
            await producer.send_and_wait("orders", b"in a transaction")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        **aiokafka_sasl("admin"),
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition("orders", 0)])
        values = [(await asyncio.wait_for(consumer.getone(), DEADLINE_S)).value for _ in range(4)]
        assert values[-1] == b"in a transaction"
    finally:
        await consumer.stop()


async def test_share_state_apis_need_cluster_action() -> None:
    """ReadShareGroupState (84) is a broker's call on the share coordinator: with an
    authorizer a principal without CLUSTER_ACTION gets CLUSTER_AUTHORIZATION_FAILED."""
    overrides = {**OVERRIDES, "super.users": "User:admin"}  # ANONYMOUS is nobody special
    async with running_cluster(**overrides) as app:
        raw = await RawClient.connect(app.brokers[0].host, app.brokers[0].port)
        try:
            response = await read_share_state(raw, 84, uuid.uuid4())
            errors = [p.error_code for t in response.results for p in t.partitions]
            assert errors == [ErrorCode.cluster_authorization_failed]
        finally:
            await raw.close()
