"""Kafka 4's ``StandardAuthorizer``: may this principal, from this host, do this to that?

The rules (``StandardAuthorizerData.authorize`` / ``findAclRule`` / ``findResult``):

1. A principal named in ``super.users`` (``;``-separated, e.g. ``User:admin;User:broker``)
   may do anything.
2. The ACLs that apply to the resource are its LITERAL ACLs, the LITERAL ``*`` ones and the
   PREFIXED ones whose prefix the name starts with. Of those, an ACL *matches* when its
   principal is the caller's or ``User:*``, its host is the caller's address or ``*``, and
   its operation is the one asked, or ALL; an ALLOW of READ, WRITE, DELETE or ALTER also
   allows DESCRIBE, an ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS (DENY has no
   such implication).
3. A matching DENY wins over any ALLOW. Else a matching ALLOW allows.
4. Else, when no ACL at all applies to the resource (whoever its principal), the answer
   is ``allow.everyone.if.no.acl.found`` (default false); otherwise denied.

``authorize_by_resource_type`` is Kafka's ``Authorizer.authorizeByResourceType`` default:
whether some resource of the type may be acted on (InitProducerId's "WRITE on any topic").

Each denial of an explicitly asked resource is logged at INFO on ``kafka.authorizer.logger``
with Kafka's audit line; allowed requests at DEBUG.

Differences from Kafka: the ACLs are read from the cluster's ``AclStore`` (indexed by
resource type, rebuilt when its version moves) rather than from a metadata image; no
``AuthorizerNotReadyException`` (the store is loaded before any listener opens).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from broker.security.authorizer.acl import (
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    STANDARD_AUTHORIZER,
    WILDCARD,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from broker.security.authorizer.acl_store import AclStore
from broker.security.principal import KafkaPrincipal

__all__ = ["STANDARD_AUTHORIZER", "StandardAuthorizer", "parse_super_users"]

audit_log = logging.getLogger("kafka.authorizer.logger")

WILDCARD_PRINCIPAL = "User:*"

ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (Kafka's ``getConfiguredSuperUsers``)."""
    return frozenset(p.strip() for p in text.split(";") if p.strip())


def entry_matches(
    acl: AclBinding, principals: tuple[str, str], host: str, operation: AclOperation
) -> AclPermissionType | None:
    """``findResult``: the ACL's permission when it matches the caller and the operation."""
    if acl.principal not in principals:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation is not AclOperation.ALL:
        if acl.permission_type is ALLOW:
            if operation is AclOperation.DESCRIBE:
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation is AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif acl.operation is not operation:
                return None
        elif acl.operation is not operation:
            return None
    return acl.permission_type


class StandardAuthorizer:
    """The ACL matcher over the cluster's store, with ``super.users`` and the default."""

    def __init__(
        self,
        store: AclStore,
        super_users: frozenset[str] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self._store = store
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        self._indexed_version = -1

    def _acls_of(self, resource_type: ResourceType) -> Sequence[AclBinding]:
        if self._indexed_version != self._store.version:
            by_type: dict[ResourceType, list[AclBinding]] = {}
            for acl in self._store.acls():
                by_type.setdefault(acl.resource_type, []).append(acl)
            self._by_type = by_type
            self._indexed_version = self._store.version
        return self._by_type.get(resource_type, ())

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        api_name: str = "",
        log_if_denied: bool = True,
    ) -> bool:
        text = str(principal)
        if text in self.super_users:
            rule = "SuperUserRule"
            allowed = True
        else:
            allowed, rule = self._find_acl_rule(
                (text, WILDCARD_PRINCIPAL), host, operation, resource_type, name
            )
        if allowed:
            if audit_log.isEnabledFor(logging.DEBUG):
                self._audit(
                    logging.DEBUG, text, True, operation, host, resource_type, name, api_name, rule
                )
        elif log_if_denied:
            self._audit(
                logging.INFO, text, False, operation, host, resource_type, name, api_name, rule
            )
        return allowed

    def _find_acl_rule(
        self,
        principals: tuple[str, str],
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> tuple[bool, str]:
        has_resource_acls = False
        allow: AclBinding | None = None
        for acl in self._acls_of(resource_type):
            if not acl.applies_to(resource_type, name):
                continue
            has_resource_acls = True
            permission = entry_matches(acl, principals, host, operation)
            if permission is DENY:
                return False, f"MatchingAcl(acl={acl}, result=DENIED)"
            if permission is ALLOW and allow is None:
                allow = acl
        if allow is not None:
            return True, f"MatchingAcl(acl={allow}, result=ALLOWED)"
        if not has_resource_acls:
            result = self.allow_everyone_if_no_acl_found
            return result, f"DefaultRule[result={'ALLOWED' if result else 'DENIED'}]"
        return False, "DenyRule"

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Kafka's ``authorizeByResourceType``: allowed when some resource of the type is
        allowed by a LITERAL or PREFIXED ALLOW that no DENY of the caller covers (ALL counts
        for the operation; implied operations do not)."""
        if self.authorize(
            principal, host, operation, resource_type, "hardcode", log_if_denied=False
        ):
            return True
        principals = (str(principal), WILDCARD_PRINCIPAL)
        allowed: dict[PatternType, set[str]] = {
            PatternType.LITERAL: set(),
            PatternType.PREFIXED: set(),
        }
        denied: dict[PatternType, set[str]] = {
            PatternType.LITERAL: set(),
            PatternType.PREFIXED: set(),
        }
        for acl in self._acls_of(resource_type):
            if acl.principal not in principals or acl.host not in (WILDCARD, host):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            target = allowed if acl.permission_type is ALLOW else denied
            target[acl.pattern_type].add(acl.resource_name)
        if WILDCARD in denied[PatternType.LITERAL]:
            return False
        denied_prefixes = denied[PatternType.PREFIXED]
        for name in allowed[PatternType.LITERAL]:
            if name == WILDCARD or (
                name not in denied[PatternType.LITERAL]
                and not any(name.startswith(p) for p in denied_prefixes)
            ):
                return True
        return any(
            not any(prefix.startswith(p) for p in denied_prefixes)
            for prefix in allowed[PatternType.PREFIXED]
        )

    @staticmethod
    def _audit(
        level: int,
        principal: str,
        allowed: bool,
        operation: AclOperation,
        host: str,
        resource_type: ResourceType,
        name: str,
        api_name: str,
        rule: str,
    ) -> None:
        audit_log.log(
            level,
            "Principal = %s is %s operation = %s from host = %s on resource = %s:LITERAL:%s "
            "for request = %s with resourceRefCount = 1 based on rule %s",
            principal,
            "Allowed" if allowed else "Denied",
            operation.name,
            host,
            resource_type.name.title().replace("_", ""),
            name,
            api_name,
            rule,
        )
