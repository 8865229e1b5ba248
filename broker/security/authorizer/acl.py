"""ACLs as Kafka models them: a resource pattern, an access-control entry, and filters.

Kafka's ``org.apache.kafka.common.acl`` and ``...common.resource``: the enums with Kafka's
wire codes (``AclOperation``, ``AclPermissionType``, ``ResourceType``, ``PatternType``) are
``protocol/acl_types.py``'s (the command line tools speak them too), an
``AclBinding`` is a pattern (type, name, LITERAL or PREFIXED) with an entry (principal,
host, operation, permission), and an ``AclBindingFilter`` matches bindings as Kafka's
``ResourcePatternFilter.matches`` and ``AccessControlEntryFilter.matches`` do: ANY matches
every value, a None name/principal/host matches any, and MATCH matches the patterns that
would apply to the named resource (the name itself, the LITERAL ``*`` and the PREFIXED
patterns it starts with).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.acl_types import (
    CLUSTER_NAME,
    WILDCARD,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    enum_of,
)

__all__ = [
    "CLUSTER_NAME",
    "STANDARD_AUTHORIZER",
    "WILDCARD",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "enum_of",
]

#: The ``authorizer.class.name`` that turns the authorizer on.
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


#: ``StandardAuthorizerData.IMPLIES_DESCRIBE`` / ``IMPLIES_DESCRIBE_CONFIGS``: an ALLOW of
#: one of these operations also allows DESCRIBE (DESCRIBE_CONFIGS).
IMPLIES_DESCRIBE = frozenset(
    {
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    }
)
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL (Kafka's ``StandardAcl``: the pattern and the entry, flat)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(pattern=ResourcePattern(resourceType={self.resource_type.name}, "
            f"name={self.resource_name}, patternType={self.pattern_type.name}), "
            f"entry=(principal={self.principal}, host={self.host}, "
            f"operation={self.operation.name}, permissionType={self.permission_type.name}))"
        )

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this ACL's pattern covers the resource (``checkSection``'s walk)."""
        if self.resource_type is not resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name == name or self.resource_name == WILDCARD


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's ``AclBindingFilter``: None matches any name, principal or host."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    @property
    def is_unknown(self) -> bool:
        """``patternFilter().isUnknown()`` or ``entryFilter().isUnknown()``."""
        return (
            self.resource_type is ResourceType.UNKNOWN
            or self.pattern_type is PatternType.UNKNOWN
            or self.operation is AclOperation.UNKNOWN
            or self.permission_type is AclPermissionType.UNKNOWN
        )

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
            return False
        name = self.resource_name
        if name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return name == acl.resource_name
        if acl.pattern_type is PatternType.LITERAL:
            return name == acl.resource_name or acl.resource_name == WILDCARD
        return name.startswith(acl.resource_name)

    def _matches_entry(self, acl: AclBinding) -> bool:
        return (
            (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and self.operation in (AclOperation.ANY, acl.operation)
            and self.permission_type in (AclPermissionType.ANY, acl.permission_type)
        )
