"""Delegation tokens (KIP-48) through the wire: made by a SASL user, logged in with over
SCRAM (``tokenauth=true``) as their owner, renewed, described, expired, refused where Kafka
refuses them, and kept in the data directory across a restart.

No client in the environment speaks keys 38-41 or sends SCRAM's ``tokenauth`` extension
(kafka-python 3.0, aiokafka 0.14 and confluent-kafka 2.16 have neither), so the project's
own SCRAM client (``broker.security.sasl_client.scram_exchange``) drives them.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
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
from broker.security.sasl_client import InterBrokerAuthenticationError, scram_exchange
from protocol.builders import request_builder
from protocol.codec import encode_request
from tests.integration.conftest import running_cluster
from tests.integration.security_setup import USERS, jaas
from tests.integration.test_security_protocol import RawConnection

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41
HANDSHAKE, AUTHENTICATE, METADATA = 17, 36, 3
OVERRIDES = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(USERS),
    "delegation.token.secret.key": "the-cluster-secret",
    "authorizer.class.name": STANDARD_AUTHORIZER,
    "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener (topic set-up)
    "allow.everyone.if.no.acl.found": "false",
}


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[MiniKafka]:
    async with running_cluster(data_dir=tmp_path, **OVERRIDES) as running:
        _grant_alice(running)
        yield running


def _grant_alice(app: MiniKafka) -> None:
    app.cluster.create_topic("alices", 1, 1, {})
    binding = AclBinding(
        ResourceType.TOPIC,
        "alices",
        PatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.ALLOW,
    )
    app.acls.create([binding])


async def _connect(app: MiniKafka, listener: str = "SASL_PLAINTEXT") -> RawConnection:
    host, port = app.listener_bootstrap(listener).split(",")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    return RawConnection(reader, writer)


async def _plain_login(app: MiniKafka, user: str) -> RawConnection:
    conn = await _connect(app)
    await conn.call(
        HANDSHAKE, 1, request_builder(HANDSHAKE, 1).SaslHandshakeRequest(mechanism="PLAIN")
    )
    token = f"\x00{user}\x00{USERS[user]}".encode()
    answer = await conn.call(
        AUTHENTICATE, 2, request_builder(AUTHENTICATE, 2).SaslAuthenticateRequest(auth_bytes=token)
    )
    assert answer.error_code == ErrorCode.none
    return conn


async def _token_login(
    app: MiniKafka, token_id: str, token_hmac: bytes, mechanism: str = "SCRAM-SHA-512"
) -> RawConnection:
    """SCRAM with ``tokenauth=true``: user = token id, password = base64(HMAC)."""
    conn = await _connect(app)
    shake = request_builder(HANDSHAKE, 1).SaslHandshakeRequest(mechanism=mechanism)
    assert (await conn.call(HANDSHAKE, 1, shake)).error_code == ErrorCode.none

    async def send(token: bytes) -> bytes:
        request = request_builder(AUTHENTICATE, 2).SaslAuthenticateRequest(auth_bytes=token)
        answer = await conn.call(AUTHENTICATE, 2, request)
        if answer is None or answer.error_code != ErrorCode.none:
            raise InterBrokerAuthenticationError(str(answer and answer.error_message))
        return bytes(answer.auth_bytes)

    password = base64.b64encode(token_hmac).decode()
    await scram_exchange(send, mechanism, token_id, password, "clientnonce123", "tokenauth=true")
    return conn


async def _refused(conn: RawConnection, api_key: int, version: int, payload: Any) -> ErrorCode:
    """The error code of an answer kio's reader refuses to decode: Kafka's error answers
    carry -1 timestamps, which kio reads as out of range (Java's client reads them)."""
    conn.correlation_id += 1
    await conn.send_frame(encode_request(api_key, version, conn.correlation_id, "raw", payload))
    frame = await conn.read_frame()
    assert frame is not None
    # flexible versions: correlation id, an empty tagged-field section, then error_code
    return ErrorCode(struct.unpack_from(">h", frame, 5)[0])


def _create(owner: str | None = None, renewers: tuple[str, ...] = ()) -> Any:
    b = request_builder(CREATE, 3)
    return b.CreateDelegationTokenRequest(
        owner_principal_type="User" if owner else None,
        owner_principal_name=owner,
        renewers=tuple(
            b.CreatableRenewers(principal_type="User", principal_name=r) for r in renewers
        ),
        max_lifetime=datetime.timedelta(milliseconds=-1),
    )


def _describe(owners: tuple[str, ...] | None = None) -> Any:
    b = request_builder(DESCRIBE, 3)
    return b.DescribeDelegationTokenRequest(
        owners=None
        if owners is None
        else tuple(
            b.DescribeDelegationTokenOwner(principal_type="User", principal_name=o) for o in owners
        )
    )


async def _can_see_alices_topic(conn: RawConnection) -> bool:
    metadata = request_builder(METADATA, 12).MetadataRequest(
        topics=(request_builder(METADATA, 12).MetadataRequestTopic(name="alices", topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    [topic] = (await conn.call(METADATA, 12, metadata)).topics
    return bool(topic.error_code == ErrorCode.none)


async def test_token_lifecycle_and_login_as_its_owner(app: MiniKafka) -> None:
    alice = await _plain_login(app, "alice")
    made = await alice.call(CREATE, 3, _create(renewers=("bob",)))
    assert made.error_code == ErrorCode.none
    assert (made.principal_name, made.token_requester_principal_name) == ("alice", "alice")
    token_id, token_hmac = made.token_id, bytes(made.hmac)

    # The token logs in as alice: alice's ACLs apply, and it cannot make tokens itself.
    as_token = await _token_login(app, token_id, token_hmac)
    assert await _can_see_alices_topic(as_token)
    refused = await _refused(as_token, CREATE, 3, _create())
    assert refused == ErrorCode.delegation_token_request_not_allowed
    bob = await _plain_login(app, "bob")
    assert not await _can_see_alices_topic(bob)

    # Not over PLAINTEXT; not for another owner without CREATE_TOKENS on User:alice.
    plaintext = await _connect(app, "PLAINTEXT")
    assert await _refused(plaintext, CREATE, 3, _create()) == (
        ErrorCode.delegation_token_request_not_allowed
    )
    for_alice = await _refused(bob, CREATE, 3, _create(owner="alice"))
    assert for_alice == ErrorCode.delegation_token_authorization_failed

    # bob renews (a renewer) and sees it; describing by owner filters.
    renew = request_builder(RENEW, 2).RenewDelegationTokenRequest(
        hmac=token_hmac, renew_period=datetime.timedelta(hours=1)
    )
    renewed = await bob.call(RENEW, 2, renew)
    assert renewed.error_code == ErrorCode.none
    assert renewed.expiry_timestamp < made.expiry_timestamp  # an hour, not a day
    [seen] = (await bob.call(DESCRIBE, 3, _describe())).tokens
    assert (seen.token_id, bytes(seen.hmac)) == (token_id, token_hmac)
    assert [r.principal_name for r in seen.renewers] == ["bob"]
    assert (await bob.call(DESCRIBE, 3, _describe(("carol",)))).tokens == ()

    # alice expires it now: the token no longer logs in.
    expire = request_builder(EXPIRE, 2).ExpireDelegationTokenRequest(
        hmac=token_hmac, expiry_time_period=datetime.timedelta(milliseconds=-1)
    )
    assert await _refused(alice, EXPIRE, 2, expire) == ErrorCode.none  # expiry -1: now
    with pytest.raises(InterBrokerAuthenticationError, match="invalid credentials"):
        await _token_login(app, token_id, token_hmac, "SCRAM-SHA-256")
    assert (await alice.call(DESCRIBE, 3, _describe())).tokens == ()
    for conn in (alice, as_token, bob, plaintext):
        conn.close()


async def test_tokens_survive_a_restart_from_the_data_dir(tmp_path: Path) -> None:
    async with running_cluster(data_dir=tmp_path, **OVERRIDES) as first:
        _grant_alice(first)
        alice = await _plain_login(first, "alice")
        made = await alice.call(CREATE, 3, _create())
        alice.close()
        assert (tmp_path / "delegation-tokens.json").exists()  # written at the change
    async with running_cluster(data_dir=tmp_path, **OVERRIDES) as second:
        as_token = await _token_login(second, made.token_id, bytes(made.hmac))
        assert await _can_see_alices_topic(as_token)
        as_token.close()
        alice = await _plain_login(second, "alice")
        [kept] = (await alice.call(DESCRIBE, 3, _describe(("alice",)))).tokens
        assert kept.token_id == made.token_id
        alice.close()


async def test_without_a_secret_key_tokens_are_disabled(tmp_path: Path) -> None:
    overrides = {k: v for k, v in OVERRIDES.items() if k != "delegation.token.secret.key"}
    async with running_cluster(**overrides) as app:
        alice = await _plain_login(app, "alice")
        answer = await _refused(alice, CREATE, 3, _create())
        assert answer == ErrorCode.delegation_token_auth_disabled
        assert (await alice.call(DESCRIBE, 3, _describe())).error_code == (
            ErrorCode.delegation_token_auth_disabled
        )
        alice.close()
