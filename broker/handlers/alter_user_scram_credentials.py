"""AlterUserScramCredentials (key 51): add, replace or remove users' SCRAM credentials.

As Kafka 4's controller (``ScramControlManager.alterCredentials``): a user may appear once
per request (deletions and upsertions together), else DUPLICATE_RESOURCE "A user
credential cannot be altered twice in the same request"; an empty name is
UNACCEPTABLE_CREDENTIAL "Username must not be empty", an unknown mechanism
UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM mechanism"; iterations below 4096 or above
16384 are UNACCEPTABLE_CREDENTIAL ("Too few iterations" / "Too many iterations"); deleting
a credential that does not exist is RESOURCE_NOT_FOUND "Attempt to delete a user
credential that does not exist". An upsertion carries the salt and the client's salted
password; the store keeps StoredKey and ServerKey derived from it, as Kafka does. The
accepted changes are applied together and written once (``scram_credentials.py``).
Results: deletions, then upsertions, then the refused users.

Differences from Kafka: no authorizer (no CLUSTER_AUTHORIZATION_FAILED); the change is
applied at once rather than through a controller. Throttle time 0.

With an authorizer, ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.handlers.base import error_message
from broker.security.authorizer.authorization import AclOperation, cluster_denied
from broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    credential_from_salted_password,
)
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0

TWICE = "A user credential cannot be altered twice in the same request"


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in MECHANISM_NAMES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_denied(ctx, AclOperation.ALTER):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    b = response_builder(API_KEY, ctx.api_version)
    store = ctx.services.security.scram_credentials
    deletions: dict[str, Any] = {}
    upsertions: dict[str, Any] = {}
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for deletion in request.deletions:
        name = deletion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None:
            errors[name] = (ErrorCode.duplicate_resource, TWICE)
            continue
        problem = _check_name_and_mechanism(name, deletion.mechanism)
        if problem is None and store.credential(name, MECHANISM_NAMES[deletion.mechanism]) is None:
            problem = (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
        if problem is not None:
            errors[name] = problem
        else:
            deletions[name] = deletion
    for upsertion in request.upsertions:
        name = upsertion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
            errors[name] = (ErrorCode.duplicate_resource, TWICE)
            continue
        problem = _check_name_and_mechanism(name, upsertion.mechanism)
        if problem is None and upsertion.iterations < MIN_ITERATIONS:
            problem = (ErrorCode.unacceptable_credential, "Too few iterations")
        elif problem is None and upsertion.iterations > MAX_ITERATIONS:
            problem = (ErrorCode.unacceptable_credential, "Too many iterations")
        if problem is not None:
            errors[name] = problem
        else:
            upsertions[name] = upsertion
    store.delete_many([(d.name, MECHANISM_NAMES[d.mechanism]) for d in deletions.values()])
    store.upsert_many(
        [
            (
                u.name,
                MECHANISM_NAMES[u.mechanism],
                credential_from_salted_password(
                    MECHANISM_NAMES[u.mechanism],
                    bytes(u.salted_password),
                    bytes(u.salt),
                    u.iterations,
                ),
            )
            for u in upsertions.values()
        ]
    )
    results = [_result(b, name, ErrorCode.none, None) for name in (*deletions, *upsertions)]
    results += [_result(b, name, error, message) for name, (error, message) in errors.items()]
    return b.AlterUserScramCredentialsResponse(throttle_time=0, results=tuple(results))


def _result(b: Any, user: str, error: ErrorCode, message: str | None) -> Any:
    return b.AlterUserScramCredentialsResult(user=user, error_code=error, error_message=message)


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    names = dict.fromkeys(
        [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    )
    return b.AlterUserScramCredentialsResponse(
        throttle_time=0,
        results=tuple(_result(b, name, error, error_message(error)) for name in names),
    )
