"""The ACL APIs' enums with Kafka's wire codes (``org.apache.kafka.common.acl`` and
``...common.resource``): what CreateAcls, DescribeAcls and DeleteAcls carry, shared by the
broker's authorizer (``broker/security/authorizer/``) and the command line tools
(``kafka_tools/admin_acls.py``)."""

from __future__ import annotations

from enum import IntEnum
from typing import TypeVar

#: The wildcard resource name and host (``ResourcePattern.WILDCARD_RESOURCE``).
WILDCARD = "*"
#: The one name of the CLUSTER resource (``Resource.CLUSTER_NAME``).
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_E = TypeVar("_E", bound=IntEnum)


def enum_of(kind: type[_E], code: int) -> _E:
    """The member with this wire code; UNKNOWN for a code Kafka does not know (its
    ``fromCode``)."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)
