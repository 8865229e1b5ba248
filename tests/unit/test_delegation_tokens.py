"""Delegation tokens (KIP-48) on the manual clock: Kafka's lifetimes and errors, the HMAC,
the expiry sweep on the scheduler, durability, SCRAM logins with ``tokenauth=true`` and
the handlers' authorizer and channel checks."""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import hmac
import itertools
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers import (
    create_delegation_token,
    describe_delegation_token,
    expire_delegation_token,
    renew_delegation_token,
)
from broker.security.authorizer.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from broker.security.authorizer.acl_store import AclStore
from broker.security.authorizer.standard_authorizer import StandardAuthorizer
from broker.security.delegation_token_manager import (
    DelegationTokenExpiry,
    DelegationTokenManager,
)
from broker.security.delegation_token_store import DelegationTokenStore
from broker.security.principal import KafkaPrincipal
from broker.security.sasl import SaslException
from broker.security.sasl_client import scram_exchange
from broker.security.scram import ScramSaslServer
from broker.server.context import ConnectionInfo, RequestContext
from protocol.builders import request_builder
from protocol.codec import RequestHeader
from purgatory import ManualClock, SystemTimer

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
CAROL = KafkaPrincipal("User", "carol")
SECRET = "s3cret"
DAY, WEEK, HOUR = 86_400_000, 604_800_000, 3_600_000
T0 = 1_700_000_000_000


def _random_bytes() -> Any:
    counter = itertools.count(1)
    return lambda n: bytes([next(counter) % 256]) * n


def manager(
    clock: ManualClock, secret: str | None = SECRET, data_dir: Path | None = None
) -> DelegationTokenManager:
    return DelegationTokenManager(
        DelegationTokenStore(data_dir), secret, WEEK, DAY, clock, _random_bytes()
    )


def test_create_follows_kafkas_lifetimes_and_hmac() -> None:
    clock = ManualClock(T0)
    tokens = manager(clock)
    result = tokens.create(ALICE, ALICE, [BOB], -1)
    token = result.token
    assert result.error is ErrorCode.none and token is not None
    assert (token.issue_timestamp_ms, token.expiry_timestamp_ms, token.max_timestamp_ms) == (
        T0,
        T0 + DAY,
        T0 + WEEK,
    )
    assert len(token.token_id) == 22 and "=" not in token.token_id  # Kafka's Uuid string
    expected = hmac.new(SECRET.encode(), token.token_id.encode(), hashlib.sha512).digest()
    assert result.hmac == expected
    short = tokens.create(ALICE, ALICE, [], HOUR).token  # a max lifetime under expiry.time
    assert short is not None and short.expiry_timestamp_ms == short.max_timestamp_ms == T0 + HOUR


def test_disabled_without_secret_and_renewers_must_be_users() -> None:
    clock = ManualClock(T0)
    assert manager(clock, None).create(ALICE, ALICE, [], -1).error is (
        ErrorCode.delegation_token_auth_disabled
    )
    group = KafkaPrincipal("Group", "g")
    assert manager(clock).create(ALICE, ALICE, [group], -1).error is (
        ErrorCode.invalid_principal_type
    )


def test_renew_stops_at_max_lifetime_and_checks_owner_and_expiry() -> None:
    clock = ManualClock(T0)
    tokens = manager(clock)
    made = tokens.create(ALICE, ALICE, [BOB], -1)
    assert made.token is not None
    h = made.hmac
    assert tokens.renew(CAROL, h, -1).error is ErrorCode.delegation_token_owner_mismatch
    assert tokens.renew(ALICE, b"nope", -1).error is ErrorCode.delegation_token_not_found
    for _day in range(1, 7):  # renewed daily by the renewer: always a day ahead
        clock.advance(DAY - 1)
        renewed = tokens.renew(BOB, h, -1)
        assert renewed.token is not None
        assert renewed.token.expiry_timestamp_ms == min(clock.now_ms() + DAY, T0 + WEEK)
    clock.set(T0 + WEEK - 10)
    last = tokens.renew(ALICE, h, DAY).token
    assert last is not None and last.expiry_timestamp_ms == T0 + WEEK  # never past max
    clock.set(T0 + WEEK + 1)
    assert tokens.renew(ALICE, h, -1).error is ErrorCode.delegation_token_expired
    assert tokens.expire(ALICE, h, -1) == (ErrorCode.delegation_token_expired, -1)


def test_expire_later_or_now() -> None:
    clock = ManualClock(T0)
    tokens = manager(clock)
    made = tokens.create(ALICE, ALICE, [], -1)
    assert tokens.expire(BOB, made.hmac, 0)[0] is ErrorCode.delegation_token_owner_mismatch
    assert tokens.expire(ALICE, made.hmac, HOUR) == (ErrorCode.none, T0 + HOUR)
    assert tokens.expire(ALICE, made.hmac, -1) == (ErrorCode.none, -1)  # Kafka answers the period
    assert tokens.tokens(lambda t: True) == []
    assert tokens.renew(ALICE, made.hmac, -1).error is ErrorCode.delegation_token_not_found


def test_expiry_check_runs_on_the_scheduler_clock(caplog: pytest.LogCaptureFixture) -> None:
    wall = ManualClock(T0)
    tokens = manager(wall)
    keep = tokens.create(ALICE, ALICE, [], -1).token
    gone = tokens.create(BOB, BOB, [], HOUR).token
    assert keep is not None and gone is not None
    scheduler = ManualClock(0)
    timer = SystemTimer(scheduler)
    expiry = DelegationTokenExpiry(timer, tokens, HOUR)
    asyncio.run(expiry.start())
    wall.advance(HOUR + 1)  # past the short token's expiry, before the first check
    assert [t.token_id for t, _ in tokens.tokens(lambda t: True)] == [
        keep.token_id,
        gone.token_id,
    ]
    with caplog.at_level(logging.INFO, "broker.security.delegation_tokens"):
        scheduler.advance(HOUR)
        timer.advance_clock()
    assert [t.token_id for t, _ in tokens.tokens(lambda t: True)] == [keep.token_id]
    assert f"Delegation token expired for token: {gone.token_id} for owner: User:bob" in (
        caplog.text
    )
    asyncio.run(expiry.stop())


def test_tokens_survive_a_restart_from_the_data_dir(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    made = manager(clock, data_dir=tmp_path).create(BOB, ALICE, [CAROL], -1)
    again = manager(clock, data_dir=tmp_path)
    [(token, token_hmac)] = again.tokens(lambda t: True)
    assert token == made.token and token_hmac == made.hmac
    assert token.token_requester == BOB and token.renewers == (CAROL,)
    assert b"hmac" not in (tmp_path / "delegation-tokens.json").read_bytes().lower()


async def _token_login(
    tokens: DelegationTokenManager, mechanism: str, token_id: str, password: str
) -> ScramSaslServer:
    server = ScramSaslServer(mechanism, lambda u, m: None, _random_bytes(), tokens.login)

    async def send(token: bytes) -> bytes:
        return server.evaluate_response(token)

    await scram_exchange(
        send, mechanism, token_id, password, "fyko+d2lbbFgONRv9qkxdawL", "tokenauth=true"
    )
    return server


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_with_a_token_is_its_owner_until_it_expires(mechanism: str) -> None:
    clock = ManualClock(T0)
    tokens = manager(clock)
    made = tokens.create(BOB, ALICE, [], -1)
    assert made.token is not None
    token_id, password = made.token.token_id, base64.b64encode(made.hmac).decode()
    server = asyncio.run(_token_login(tokens, mechanism, token_id, password))
    assert server.is_complete() and server.authorization_id() == "alice"
    assert server.token_authenticated()
    assert server.credential_expiration_ms() == T0 + DAY
    with pytest.raises(SaslException, match="Invalid client credentials"):
        asyncio.run(_token_login(tokens, mechanism, token_id, "wrong"))
    with pytest.raises(SaslException, match=f"Invalid tokenId : {token_id}x"):
        asyncio.run(_token_login(tokens, mechanism, token_id + "x", password))
    clock.advance(DAY + 1)
    with pytest.raises(SaslException, match="Token Authentication failed"):
        asyncio.run(_token_login(tokens, mechanism, token_id, password))


# -- the handlers: channel checks and the authorizer -----------------------------------


def _ctx(
    api_key: int,
    version: int,
    tokens: DelegationTokenManager | None,
    principal: KafkaPrincipal = ALICE,
    protocol: str = "SASL_PLAINTEXT",
    acls: tuple[AclBinding, ...] | None = None,
) -> RequestContext:
    authorizer = None
    if acls is not None:
        store = AclStore()
        store.create(acls)
        authorizer = StandardAuthorizer(store, frozenset(), False)
    security = SimpleNamespace(authorizer=authorizer, delegation_tokens=tokens)
    info = ConnectionInfo(
        "c", "127.0.0.1", 1, 9092, principal=principal, security_protocol=protocol
    )
    return RequestContext(
        RequestHeader(api_key, version, 1, "t"),
        info,
        SimpleNamespace(security=security),  # type: ignore[arg-type]
    )


def _create(owner: str | None = None, version: int = 3) -> Any:
    return request_builder(38, version).CreateDelegationTokenRequest(
        owner_principal_type="User" if owner else None,
        owner_principal_name=owner,
        renewers=(),
        max_lifetime=datetime.timedelta(milliseconds=-1),
    )


def _acl(principal: str, op: AclOperation, resource: ResourceType, name: str) -> AclBinding:
    return AclBinding(
        resource, name, PatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW
    )


def test_token_requests_need_an_authenticated_channel_that_is_not_a_token() -> None:
    tokens = manager(ManualClock(T0))
    token_user = KafkaPrincipal("User", "alice", token_authenticated=True)
    for principal, protocol in [
        (ALICE, "PLAINTEXT"),
        (KafkaPrincipal("User", "ANONYMOUS"), "SSL"),
        (token_user, "SASL_SSL"),
    ]:
        ctx = _ctx(38, 3, tokens, principal, protocol)
        answer = create_delegation_token.handle(ctx, _create())
        assert answer.error_code is ErrorCode.delegation_token_request_not_allowed
        assert answer.token_id == "" and answer.principal_name == principal.name
        renew = request_builder(39, 2).RenewDelegationTokenRequest(
            hmac=b"x", renew_period=datetime.timedelta(0)
        )
        ctx = _ctx(39, 2, tokens, principal, protocol)
        assert renew_delegation_token.handle(ctx, renew).error_code is (
            ErrorCode.delegation_token_request_not_allowed
        )
    two_way = _ctx(38, 3, tokens, KafkaPrincipal("User", "CN=alice"), "SSL")
    assert create_delegation_token.handle(two_way, _create()).error_code is ErrorCode.none
    off = _ctx(38, 3, manager(ManualClock(T0), None))
    assert create_delegation_token.handle(off, _create()).error_code is (
        ErrorCode.delegation_token_auth_disabled
    )
    describe = request_builder(41, 3).DescribeDelegationTokenRequest(owners=None)
    assert describe_delegation_token.handle(_ctx(41, 3, None), describe).error_code is (
        ErrorCode.delegation_token_auth_disabled
    )


def test_creating_for_another_owner_needs_create_tokens_on_the_user() -> None:
    tokens = manager(ManualClock(T0))
    denied = create_delegation_token.handle(_ctx(38, 3, tokens, acls=()), _create("bob"))
    assert denied.error_code is ErrorCode.delegation_token_authorization_failed
    assert (denied.principal_name, denied.token_requester_principal_name) == ("bob", "alice")
    grant = (_acl("User:alice", AclOperation.CREATE_TOKENS, ResourceType.USER, "User:bob"),)
    made = create_delegation_token.handle(_ctx(38, 3, tokens, acls=grant), _create("bob"))
    assert made.error_code is ErrorCode.none
    assert (made.principal_name, made.token_requester_principal_name) == ("bob", "alice")
    own = create_delegation_token.handle(_ctx(38, 3, tokens, acls=()), _create())
    assert own.error_code is ErrorCode.none and own.principal_name == "alice"


def test_describe_shows_owners_renewers_and_authorized_principals_only() -> None:
    tokens = manager(ManualClock(T0))
    alices = tokens.create(ALICE, ALICE, [BOB], -1).token
    carols = tokens.create(CAROL, CAROL, [], -1).token
    assert alices is not None and carols is not None

    def seen(principal: KafkaPrincipal, owners: Any = None, acls: Any = ()) -> list[str]:
        request = request_builder(41, 3).DescribeDelegationTokenRequest(owners=owners)
        answer = describe_delegation_token.handle(
            _ctx(41, 3, tokens, principal, acls=acls), request
        )
        assert answer.error_code is ErrorCode.none
        return [t.token_id for t in answer.tokens]

    b = request_builder(41, 3)
    assert seen(ALICE) == [alices.token_id]
    assert seen(BOB) == [alices.token_id]  # a renewer
    assert seen(KafkaPrincipal("User", "dave")) == []
    assert seen(ALICE, ()) == []  # an empty owners list describes nothing
    by_user = (_acl("User:dave", AclOperation.DESCRIBE_TOKENS, ResourceType.USER, "User:carol"),)
    assert seen(KafkaPrincipal("User", "dave"), acls=by_user) == [carols.token_id]
    by_token = (
        _acl("User:dave", AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, alices.token_id),
    )
    assert seen(KafkaPrincipal("User", "dave"), acls=by_token) == [alices.token_id]
    carol_only = (b.DescribeDelegationTokenOwner(principal_type="User", principal_name="carol"),)
    assert seen(CAROL, carol_only) == [carols.token_id]
    assert seen(ALICE, carol_only) == []
    [described] = describe_delegation_token.handle(
        _ctx(41, 3, tokens, BOB, acls=()),
        b.DescribeDelegationTokenRequest(owners=None),
    ).tokens
    assert described.hmac == tokens.hmac(alices.token_id)
    assert [r.principal_name for r in described.renewers] == ["bob"]


def test_expire_handler_answers_kafkas_timestamps() -> None:
    tokens = manager(ManualClock(T0))
    made = tokens.create(ALICE, ALICE, [], -1)
    b = request_builder(40, 2)

    def expire(period_ms: int, principal: KafkaPrincipal = ALICE) -> Any:
        request = b.ExpireDelegationTokenRequest(
            hmac=made.hmac, expiry_time_period=datetime.timedelta(milliseconds=period_ms)
        )
        return expire_delegation_token.handle(_ctx(40, 2, tokens, principal), request)

    mismatch = expire(0, BOB)
    assert mismatch.error_code is ErrorCode.delegation_token_owner_mismatch
    assert int(mismatch.expiry_timestamp.timestamp() * 1000) == -1
    later = expire(HOUR)
    assert later.error_code is ErrorCode.none
    assert int(later.expiry_timestamp.timestamp() * 1000) == T0 + HOUR
    assert expire(-1).error_code is ErrorCode.none
    assert expire(-1).error_code is ErrorCode.delegation_token_not_found


def test_fuzzed_token_requests_reach_the_manager_without_a_handler_failure() -> None:
    """testkit.fuzz_frames' frames of 38-41, decoded as the dispatcher decodes them, handled
    on an authenticated channel with tokens on (the integration fuzz runs over PLAINTEXT,
    where the handlers stop at DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)."""
    from broker.handlers.registry import api_specs, build_registry
    from protocol.codec import decode_request, encode_response, parse_request_header
    from protocol.errors import ProtocolError
    from testkit.fuzz_frames import fuzzed

    modules = (
        create_delegation_token,
        renew_delegation_token,
        expire_delegation_token,
        describe_delegation_token,
    )
    registry = build_registry(modules)
    tokens = manager(ManualClock(T0))
    handled = 0
    for _how, frame in fuzzed(api_specs(registry), 31, 2000):
        try:
            header, offset = parse_request_header(frame[4:])
            request = decode_request(header, frame[4:], offset)
        except (ProtocolError, ValueError):
            continue
        handler = registry.get(header.api_key)
        if handler is None or not handler.min_version <= header.api_version <= handler.max_version:
            continue
        ctx = _ctx(header.api_key, header.api_version, tokens, acls=())
        answer = handler.handle(ctx, request)
        assert encode_response(header.api_key, header.api_version, 1, answer)
        handled += 1
    assert handled > 100
