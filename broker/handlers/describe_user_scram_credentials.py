"""DescribeUserScramCredentials (key 50): each user's SCRAM mechanisms and iterations.

As Kafka 4's broker answers from its metadata image (``ScramImage.describe``): no users
named (null or empty) describes every user with a credential; a user named twice is
DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND, with Kafka's messages. Mechanism
types are Kafka's ``ScramMechanism`` codes (1 SCRAM-SHA-256, 2 SCRAM-SHA-512). Never the
salt or keys.

Differences from Kafka: no authorizer, so no CLUSTER_AUTHORIZATION_FAILED. Throttle time 0.

With an authorizer, DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import error_message
from broker.security.authorizer.authorization import AclOperation, cluster_denied
from broker.security.scram import MECHANISM_TYPES
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0

DESCRIBE_DUPLICATE_USER = (
    "Cannot describe SCRAM credentials for the same user twice in a single request: "
)
DESCRIBE_USER_THAT_DOES_NOT_EXIST = "Attempt to describe a user credential that does not exist: "


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_denied(ctx, AclOperation.DESCRIBE):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    b = response_builder(API_KEY, ctx.api_version)
    store = ctx.services.security.scram_credentials
    named = [u.name for u in request.users or ()]
    duplicated: dict[str, bool] = {}
    for name in named or store.users():
        duplicated[name] = name in duplicated
    results = []
    for user, twice in duplicated.items():
        if twice:
            results.append(
                _result(b, user, ErrorCode.duplicate_resource, DESCRIBE_DUPLICATE_USER + user)
            )
            continue
        infos = tuple(
            b.CredentialInfo(mechanism=MECHANISM_TYPES[mechanism], iterations=credential.iterations)
            for mechanism, credential in store.mechanisms_of(user)
        )
        if infos:
            results.append(_result(b, user, ErrorCode.none, None, infos))
        else:
            results.append(
                _result(
                    b, user, ErrorCode.resource_not_found, DESCRIBE_USER_THAT_DOES_NOT_EXIST + user
                )
            )
    return b.DescribeUserScramCredentialsResponse(
        throttle_time=0, error_code=ErrorCode.none, error_message=None, results=tuple(results)
    )


def _result(
    b: Any, user: str, error: ErrorCode, message: str | None, infos: tuple[Any, ...] = ()
) -> Any:
    return b.DescribeUserScramCredentialsResult(
        user=user, error_code=error, error_message=message, credential_infos=infos
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    return b.DescribeUserScramCredentialsResponse(
        throttle_time=0, error_code=error, error_message=error_message(error), results=()
    )
