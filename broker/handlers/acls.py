"""The ACL APIs' shared answers: DescribeAcls, CreateAcls and DeleteAcls (``AclApis``).

Without an authorizer (``authorizer.class.name`` unset) Kafka advertises the three APIs
and answers every request SECURITY_DISABLED, "No Authorizer is configured.". With one, the
caller needs CLUSTER ALTER to create or delete and CLUSTER DESCRIBE to describe (else
CLUSTER_AUTHORIZATION_FAILED, the error response of the request); the ACLs are the
cluster's ``AclStore`` (``broker/security/authorizer/``). Shared by ``describe_acls``,
``create_acls`` and ``delete_acls``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from broker.security.authorizer.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    enum_of,
)
from broker.security.authorizer.acl_store import AclDeleteResult, AclError
from protocol.builders import response_builder

NO_AUTHORIZER = "No Authorizer is configured."
CLUSTER_DENIED = "Cluster authorization failed."


def describe_acls(
    api_key: int,
    version: int,
    error: ErrorCode,
    message: str | None,
    acls: Sequence[AclBinding] = (),
) -> Any:
    """The ACLs grouped by resource pattern, in the order patterns first appear."""
    b = response_builder(api_key, version)
    by_pattern: dict[tuple[int, str, int], list[Any]] = {}
    for acl in acls:
        key = (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))
        by_pattern.setdefault(key, []).append(
            b.AclDescription(
                principal=acl.principal,
                host=acl.host,
                operation=int(acl.operation),
                permission_type=int(acl.permission_type),
            )
        )
    resources = tuple(
        b.DescribeAclsResource(
            resource_type=rtype, resource_name=name, pattern_type=ptype, acls=tuple(entries)
        )
        for (rtype, name, ptype), entries in by_pattern.items()
    )
    return b.DescribeAclsResponse(
        throttle_time=0, error_code=error, error_message=message, resources=resources
    )


def create_acls(
    api_key: int, version: int, request: Any, error: ErrorCode, message: str | None
) -> Any:
    return create_acls_results(
        api_key, version, [AclError(error, message or "")] * len(request.creations)
    )


def create_acls_results(api_key: int, version: int, results: Iterable[AclError | None]) -> Any:
    b = response_builder(api_key, version)
    return b.CreateAclsResponse(
        throttle_time=0,
        results=tuple(
            b.AclCreationResult(error_code=ErrorCode.none, error_message=None)
            if r is None
            else b.AclCreationResult(error_code=r.error, error_message=r.message or None)
            for r in results
        ),
    )


def delete_acls(
    api_key: int, version: int, request: Any, error: ErrorCode, message: str | None
) -> Any:
    failed = AclDeleteResult(AclError(error, message or ""))
    return delete_acls_results(api_key, version, [failed] * len(request.filters))


def delete_acls_results(api_key: int, version: int, results: Iterable[AclDeleteResult]) -> Any:
    b = response_builder(api_key, version)

    def matching(acl: AclBinding) -> Any:
        return b.DeleteAclsMatchingAcl(
            error_code=ErrorCode.none,
            error_message=None,
            resource_type=int(acl.resource_type),
            resource_name=acl.resource_name,
            pattern_type=int(acl.pattern_type),
            principal=acl.principal,
            host=acl.host,
            operation=int(acl.operation),
            permission_type=int(acl.permission_type),
        )

    return b.DeleteAclsResponse(
        throttle_time=0,
        filter_results=tuple(
            b.DeleteAclsFilterResult(
                error_code=r.error.error if r.error else ErrorCode.none,
                error_message=(r.error.message or None) if r.error else None,
                matching_acls=tuple(matching(acl) for acl in r.deleted),
            )
            for r in results
        ),
    )


def binding_filter(f: Any) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls filter as Kafka's ``AclBindingFilter``."""
    return AclBindingFilter(
        enum_of(ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        enum_of(PatternType, f.pattern_type_filter),
        f.principal_filter,
        f.host_filter,
        enum_of(AclOperation, f.operation),
        enum_of(AclPermissionType, f.permission_type),
    )
