"""The ACL APIs' answers without an authorizer: what a Kafka broker without
``authorizer.class.name`` says to DescribeAcls, CreateAcls and DeleteAcls.

Kafka advertises the three APIs and answers every request SECURITY_DISABLED with the
message "No Authorizer is configured." (``AclApis``): DescribeAcls at the top with no
resources, CreateAcls for each creation, DeleteAcls for each filter with no matching
ACLs. Shared by ``describe_acls``, ``create_acls`` and ``delete_acls``.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from protocol.builders import response_builder

NO_AUTHORIZER = "No Authorizer is configured."


def describe_acls(api_key: int, version: int, error: ErrorCode, message: str | None) -> Any:
    b = response_builder(api_key, version)
    return b.DescribeAclsResponse(
        throttle_time=0, error_code=error, error_message=message, resources=()
    )


def create_acls(
    api_key: int, version: int, request: Any, error: ErrorCode, message: str | None
) -> Any:
    b = response_builder(api_key, version)
    return b.CreateAclsResponse(
        throttle_time=0,
        results=tuple(
            b.AclCreationResult(error_code=error, error_message=message) for _ in request.creations
        ),
    )


def delete_acls(
    api_key: int, version: int, request: Any, error: ErrorCode, message: str | None
) -> Any:
    b = response_builder(api_key, version)
    return b.DeleteAclsResponse(
        throttle_time=0,
        filter_results=tuple(
            b.DeleteAclsFilterResult(error_code=error, error_message=message, matching_acls=())
            for _ in request.filters
        ),
    )
