"""The shape every API handler module has, and the result types it may return.

A handler is a plain function: it runs to completion on the event loop without awaiting,
so the state it reads and changes is consistent (the single thread is our lock). When
the answer must wait — a fetch for data, a produce for followers, a join for the other
members — it parks an operation in a purgatory and returns a Future that the operation
completes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.server.context import RequestContext

HandlerResult = Any | asyncio.Future[Any] | None
Handle = Callable[[RequestContext, Any], HandlerResult]
ErrorResponse = Callable[[RequestContext, Any, ErrorCode], Any]
#: Kafka's ``Errors`` messages of the authorization failures.
AUTHORIZATION_MESSAGES = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
}
TopicPartitionPairs = list[tuple[str | None, int | None]]
TopicPartitions = Callable[[RequestContext, Any], TopicPartitionPairs]


class HandlerModule(Protocol):
    """A module in ``broker/handlers`` (checked by the registry at import time)."""

    API_KEY: int
    MIN_VERSION: int
    MAX_VERSION: int

    def handle(self, ctx: RequestContext, request: Any) -> HandlerResult: ...

    def error_response(self, ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
        """The API's answer to ``request`` carrying ``error`` everywhere it can go, built
        without handling it (injected faults, and a handler that raised). Required.

        A module whose requests name topics also has ``topic_partitions(ctx, request)``:
        the (topic, partition) pairs the request names (partition None for a whole
        topic, topic None for an unknown topic id), for faults limited to a topic."""


def error_message(error: ErrorCode) -> str | None:
    """The ``error_message`` of an error response built without handling the request:
    none for UNKNOWN_SERVER_ERROR (as Kafka, which does not show a server bug's message
    to clients), Kafka's message for an authorization failure (the authorizer's refusals
    are answered with these responses too), else one naming the error."""
    if error is ErrorCode.unknown_server_error:
        return None
    if error in AUTHORIZATION_MESSAGES:
        return AUTHORIZATION_MESSAGES[error]
    return f"injected fault: {error.name.upper()}"


@dataclass(frozen=True, slots=True)
class ApiHandler:
    """A registered API: its key, the versions we serve, its two functions, and (for
    APIs whose requests name topics) the topic-partitions a request names."""

    api_key: int
    name: str
    min_version: int
    max_version: int
    handle: Handle
    error_response: ErrorResponse
    topic_partitions: TopicPartitions | None = None


def partition_errors_by_topic(
    errors: Iterable[tuple[tuple[str, int], ErrorCode]],
    partition_response: Callable[..., Any],
    topic_response: Callable[..., Any],
) -> tuple[Any, ...]:
    """The ``topics`` of a response that answers an error per partition: a
    ``topic_response(name, partitions)`` per topic, in the order topics first appear,
    each with a ``partition_response(partition_index, error_code)`` per partition."""
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), error in errors:
        by_topic.setdefault(topic, []).append(
            partition_response(partition_index=partition, error_code=error)
        )
    return tuple(
        topic_response(name=name, partitions=tuple(parts)) for name, parts in by_topic.items()
    )
