"""The cluster's ACLs, as Kafka's controller keeps them (``AclControlManager``).

Kafka 4 keeps ACLs in the metadata log (``AccessControlEntryRecord``s) and every broker's
``StandardAuthorizer`` serves them from its cache. Here one ``AclStore`` is shared by all
brokers of a ``MiniKafka`` (like ``ClientQuotaStore``) and, with a data directory, it is
the JSON document ``acls.json`` beside ``cluster-metadata.json``, replaced atomically on
every change and read at start: ACLs survive a restart and a kill -9.

Validation and messages are Kafka's: the broker's (``AclApis``: a CLUSTER resource named
anything but ``kafka-cluster``, an empty name) then the controller's (``validateNewAcl``:
UNKNOWN/ANY resource type, a pattern type other than LITERAL/PREFIXED, UNKNOWN/ANY
operation, a permission other than ALLOW/DENY), all INVALID_REQUEST; an ACL that exists
already is a success that adds nothing. A DeleteAcls filter with an unknown part is
INVALID_REQUEST, as ``validateFilter``; a filter removing more than 10,000 ACLs at once is
refused as Kafka's ``MAX_RECORDS_PER_USER_OP``.

Differences from Kafka: a principal that is not ``type:name`` is refused at creation
(INVALID_REQUEST) — Kafka stores it and fails when authorizing against it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.atomic_file import read_json, write_json_atomic
from broker.security.authorizer.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    enum_of,
)

log = logging.getLogger("broker.security.authorizer")

ACLS_FILE = "acls.json"
#: ``QuorumController.MAX_RECORDS_PER_USER_OP``.
MAX_RECORDS_PER_USER_OP = 10_000


@dataclass(frozen=True, slots=True)
class AclError:
    """An ACL operation's failure, Kafka's ``ApiError``."""

    error: ErrorCode
    message: str


@dataclass(frozen=True, slots=True)
class AclDeleteResult:
    error: AclError | None
    deleted: tuple[AclBinding, ...] = ()


def _invalid(message: str) -> AclError:
    return AclError(ErrorCode.invalid_request, message)


def validate_new_acl(acl: AclBinding) -> AclError | None:
    """``AclApis.handleCreateAcls``'s checks, then ``AclControlManager.validateNewAcl``."""
    if acl.resource_type is ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not acl.resource_name:
        return _invalid("Invalid empty resource name")
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return _invalid(f"Invalid resourceType {acl.resource_type.name}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return _invalid(f"Invalid patternType {acl.pattern_type.name}")
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return _invalid(f"Invalid operation {acl.operation.name}")
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return _invalid(f"Invalid permissionType {acl.permission_type.name}")
    principal_type, sep, name = acl.principal.partition(":")
    if not sep or not principal_type or not name:
        return _invalid(
            f"Could not parse principal from `{acl.principal}` (no colon is present "
            f"separating the principal type from the principal name)"
        )
    return None


def binding_of(
    resource_type: int,
    resource_name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission_type: int,
) -> AclBinding:
    """An ``AclBinding`` from a request's codes (unknown codes become UNKNOWN)."""
    return AclBinding(
        enum_of(ResourceType, resource_type),
        resource_name,
        enum_of(PatternType, pattern_type),
        principal,
        host,
        enum_of(AclOperation, operation),
        enum_of(AclPermissionType, permission_type),
    )


class AclStore:
    """The cluster's ACLs in creation order, durable when given a directory.

    ``version`` moves on every change: whoever caches a decision made from the ACLs
    (the Metadata answer cache) keys it on the version.
    """

    def __init__(self, data_dir: Path | None = None) -> None:
        self._path = data_dir / ACLS_FILE if data_dir is not None else None
        self._acls: dict[AclBinding, None] = {}
        self.version = 0
        if self._path is not None:
            self._load(self._path)

    def _load(self, path: Path) -> None:
        document = read_json(path)
        if not document:
            return
        for entry in document.get("acls", []):
            self._acls[_binding_from_json(entry)] = None
        log.info("Loaded %d ACLs from %s", len(self._acls), path)

    def _save(self) -> None:
        self.version += 1
        if self._path is None:
            return
        document = {"version": 1, "acls": [_binding_to_json(acl) for acl in self._acls]}
        self._path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self._path, document, indent=1)

    def acls(self) -> Sequence[AclBinding]:
        return tuple(self._acls)

    def __len__(self) -> int:
        return len(self._acls)

    def create(self, acls: Iterable[AclBinding]) -> list[AclError | None]:
        """Each ACL validated and added (an existing one is a success); one write."""
        results: list[AclError | None] = []
        changed = False
        for acl in acls:
            error = validate_new_acl(acl)
            if error is None and acl not in self._acls:
                self._acls[acl] = None
                changed = True
            results.append(error)
        if changed:
            self._save()
        return results

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [acl for acl in self._acls if acl_filter.matches(acl)]

    def delete(self, filters: Iterable[AclBindingFilter]) -> list[AclDeleteResult]:
        """Per filter the ACLs it removed (an ACL matched by two filters is reported by
        both, as Kafka's); one write."""
        results: list[AclDeleteResult] = []
        removed: set[AclBinding] = set()
        for acl_filter in filters:
            if acl_filter.is_unknown:
                unknown = "Unknown patternFilter." if _pattern_unknown(acl_filter) else None
                results.append(AclDeleteResult(_invalid(unknown or "Unknown entryFilter.")))
                continue
            matched = tuple(acl for acl in self._acls if acl_filter.matches(acl))
            if len(removed | set(matched)) > MAX_RECORDS_PER_USER_OP:
                message = (
                    f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single "
                    f"delete operation."
                )
                results.append(AclDeleteResult(AclError(ErrorCode.unknown_server_error, message)))
                continue
            removed.update(matched)
            results.append(AclDeleteResult(None, matched))
        if removed:
            for acl in removed:
                del self._acls[acl]
            self._save()
        return results


def _pattern_unknown(acl_filter: AclBindingFilter) -> bool:
    return (
        acl_filter.resource_type is ResourceType.UNKNOWN
        or acl_filter.pattern_type is PatternType.UNKNOWN
    )


def _binding_to_json(acl: AclBinding) -> dict[str, Any]:
    return {
        "resource_type": acl.resource_type.name,
        "resource_name": acl.resource_name,
        "pattern_type": acl.pattern_type.name,
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation.name,
        "permission_type": acl.permission_type.name,
    }


def _binding_from_json(entry: dict[str, Any]) -> AclBinding:
    return AclBinding(
        ResourceType[entry["resource_type"]],
        str(entry["resource_name"]),
        PatternType[entry["pattern_type"]],
        str(entry["principal"]),
        str(entry["host"]),
        AclOperation[entry["operation"]],
        AclPermissionType[entry["permission_type"]],
    )
