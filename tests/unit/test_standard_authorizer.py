"""The StandardAuthorizer's matcher on its own: Kafka's rules, one per test."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.security.authorizer.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from broker.security.authorizer.acl_store import AclStore
from broker.security.authorizer.standard_authorizer import StandardAuthorizer, parse_super_users
from broker.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
HOST = "127.0.0.1"
OP = AclOperation
TOPIC = ResourceType.TOPIC
ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
LITERAL = PatternType.LITERAL
PREFIXED = PatternType.PREFIXED


def acl(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = "User:alice",
    host: str = "*",
    pattern: PatternType = LITERAL,
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def authorizer(
    *acls: AclBinding, super_users: str = "", allow_everyone: bool = False
) -> StandardAuthorizer:
    store = AclStore()
    assert store.create(acls) == [None] * len(acls)
    return StandardAuthorizer(store, parse_super_users(super_users), allow_everyone)


def allowed(
    auth: StandardAuthorizer,
    operation: AclOperation,
    name: str,
    principal: KafkaPrincipal = ALICE,
    host: str = HOST,
) -> bool:
    return auth.authorize(principal, host, operation, TOPIC, name)


def test_no_acl_denies_unless_allow_everyone() -> None:
    assert not allowed(authorizer(), OP.READ, "t")
    assert allowed(authorizer(allow_everyone=True), OP.READ, "t")


def test_allow_everyone_applies_only_where_the_resource_has_no_acl() -> None:
    auth = authorizer(acl("t", OP.READ, principal="User:bob"), allow_everyone=True)
    assert not allowed(auth, OP.READ, "t")  # t has an ACL, none for alice
    assert allowed(auth, OP.READ, "other")


def test_deny_beats_allow() -> None:
    auth = authorizer(acl("t", OP.READ), acl("t", OP.READ, DENY))
    assert not allowed(auth, OP.READ, "t")


def test_prefixed_allow_and_literal_deny() -> None:
    auth = authorizer(acl("pay-", OP.READ, pattern=PREFIXED), acl("pay-secret", OP.READ, DENY))
    assert allowed(auth, OP.READ, "pay-orders")
    assert not allowed(auth, OP.READ, "pay-secret")
    # a DENY of READ implies nothing: the prefixed READ still allows DESCRIBE
    assert allowed(auth, OP.DESCRIBE, "pay-secret")
    assert not allowed(auth, OP.READ, "pa")


def test_implied_operations() -> None:
    for implying in (OP.READ, OP.WRITE, OP.DELETE, OP.ALTER):
        assert allowed(authorizer(acl("t", implying)), OP.DESCRIBE, "t")
    assert not allowed(authorizer(acl("t", OP.CREATE)), OP.DESCRIBE, "t")
    assert allowed(authorizer(acl("t", OP.ALTER_CONFIGS)), OP.DESCRIBE_CONFIGS, "t")
    assert not allowed(authorizer(acl("t", OP.DESCRIBE)), OP.READ, "t")
    everything = authorizer(acl("t", OP.ALL))
    assert all(allowed(everything, op, "t") for op in (OP.READ, OP.WRITE, OP.ALTER_CONFIGS))
    assert not allowed(authorizer(acl("t", OP.ALL), acl("t", OP.ALL, DENY)), OP.DESCRIBE, "t")


def test_wildcards_of_name_principal_and_host() -> None:
    auth = authorizer(acl("*", OP.WRITE, principal="User:*"))
    assert allowed(auth, OP.WRITE, "any", principal=BOB)
    hosted = authorizer(acl("t", OP.READ, host="10.0.0.1"))
    assert not allowed(hosted, OP.READ, "t")
    assert allowed(hosted, OP.READ, "t", host="10.0.0.1")


def test_super_users() -> None:
    auth = authorizer(
        acl("t", OP.ALL, DENY, principal="User:*"), super_users="User:admin; User:alice"
    )
    assert allowed(auth, OP.READ, "t")
    assert not allowed(auth, OP.READ, "t", principal=BOB)


def test_authorize_by_resource_type() -> None:
    auth = authorizer(
        acl("t", OP.WRITE), acl("x-", OP.WRITE, pattern=PREFIXED, principal="User:bob")
    )
    assert auth.authorize_by_resource_type(ALICE, HOST, OP.WRITE, TOPIC)
    assert auth.authorize_by_resource_type(BOB, HOST, OP.WRITE, TOPIC)
    assert not auth.authorize_by_resource_type(ALICE, HOST, OP.READ, TOPIC)
    denied = authorizer(acl("t", OP.WRITE), acl("*", OP.WRITE, DENY))
    assert not denied.authorize_by_resource_type(ALICE, HOST, OP.WRITE, TOPIC)


def test_filters_match_as_kafka() -> None:
    literal, prefixed, wildcard = (
        acl("pay-orders", OP.READ),
        acl("pay-", OP.READ, pattern=PREFIXED),
        acl("*", OP.READ),
    )

    def names(pattern: PatternType, name: str | None) -> set[str]:
        f = AclBindingFilter(TOPIC, name, pattern, None, None, OP.ANY, AclPermissionType.ANY)
        return {a.resource_name for a in (literal, prefixed, wildcard) if f.matches(a)}

    assert names(PatternType.MATCH, "pay-orders") == {"pay-orders", "pay-", "*"}
    assert names(PatternType.ANY, "pay-orders") == {"pay-orders"}
    assert names(LITERAL, None) == {"pay-orders", "*"}
    assert names(PatternType.ANY, None) == {"pay-orders", "pay-", "*"}


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (acl("t", OP.ANY), "Invalid operation ANY"),
        (acl("t", OP.READ, AclPermissionType.ANY), "Invalid permissionType ANY"),
        (acl("t", OP.READ, pattern=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl("", OP.READ), "Invalid empty resource name"),
        (acl("c", OP.ALTER, resource_type=ResourceType.CLUSTER), "The only valid name"),
        (acl("t", OP.READ, resource_type=ResourceType.ANY), "Invalid resourceType ANY"),
        (acl("t", OP.READ, principal="alice"), "Could not parse principal"),
    ],
)
def test_create_validates_as_kafka(binding: AclBinding, message: str) -> None:
    (error,) = AclStore().create([binding])
    assert error is not None and error.error is ErrorCode.invalid_request
    assert error.message.startswith(message)


def test_store_survives_a_restart_and_delete_returns_what_it_removed(tmp_path: Path) -> None:
    store = AclStore(tmp_path)
    store.create([acl("t", OP.READ), acl("u", OP.WRITE), acl("t", OP.READ)])
    assert len(AclStore(tmp_path)) == 2
    by_name = AclBindingFilter(TOPIC, "t", LITERAL, None, None, OP.ANY, AclPermissionType.ANY)
    unknown = AclBindingFilter(TOPIC, "t", PatternType.UNKNOWN, None, None, OP.ANY, ALLOW)
    removed, refused = store.delete([by_name, unknown])
    assert removed.deleted == (acl("t", OP.READ),)
    assert refused.error is not None and refused.error.message == "Unknown patternFilter."
    assert AclStore(tmp_path).acls() == (acl("u", OP.WRITE),)
