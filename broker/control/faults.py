"""Fault injection: slow a broker's responses, or fail its next N requests of an API.

One ``FaultInjector`` serves a whole simulated cluster (rules are per broker id, so they
survive a broker's restart). The connection asks it two things on the request path:

* ``intercept(ctx, request, topic_partitions)`` before the handler runs: the error to
  answer with when a rule matches (the dispatcher then answers with the API's own
  ``error_response`` and does *not* run the handler, so a failed produce appends
  nothing), else None. With no rule for the broker this is one dict lookup. The
  (topic, partition) pairs a request names come from its API's handler module
  (``topic_partitions``), asked only when a rule is limited to a topic.
* ``response_delay_ms(broker_id)`` before writing a response: the injected latency.

Validation lives here too (``parse_error_code``, ``parse_api_key``, ``add_failure``),
so the control endpoint and the command line reject the same things with the same
message, and a rejected fault changes nothing. Which APIs can be failed, and which can
be limited to a topic, is the handler registry's knowledge, given as data at
construction: this module knows no API.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from protocol.api_registry import KIO_VERSIONS, api_name

if TYPE_CHECKING:
    from broker.handlers.base import TopicPartitions
    from broker.server.context import RequestContext

__all__ = [
    "MAX_LATENCY_MS",
    "FailureRule",
    "FaultError",
    "FaultInjector",
    "NoFaults",
    "parse_api_key",
    "parse_error_code",
]

MAX_LATENCY_MS = 600_000
MAX_COUNT = 1_000_000


class FaultError(ValueError):
    """A fault that cannot be injected as asked; the message names the problem."""


def parse_error_code(value: object) -> ErrorCode:
    """Kafka's error code from its number or its name (``NOT_LEADER_OR_FOLLOWER``,
    case-insensitive). NONE is refused: failing with "no error" is no fault."""
    code: ErrorCode | None = None
    if isinstance(value, bool):
        code = None
    elif isinstance(value, int):
        try:
            code = ErrorCode(value)
        except ValueError:
            raise FaultError(f"{value} is not a Kafka error code") from None
    elif isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return parse_error_code(int(text))
        try:
            code = ErrorCode[text.lower()]
        except KeyError:
            raise FaultError(f"unknown Kafka error name {value!r}") from None
    if code is None:
        raise FaultError(f"error code must be an integer or a Kafka error name, not {value!r}")
    if code is ErrorCode.none:
        raise FaultError("error code NONE (0) is not an error")
    return code


def parse_api_key(value: object) -> int:
    """A Kafka API key from its number or Kafka's name (``Produce``, case-insensitive).
    Whether this broker serves it is ``FaultInjector.add_failure``'s question."""
    key: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        key = value
    elif isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            key = int(text)
        else:
            names = {api_name(k).lower(): k for k in KIO_VERSIONS}
            key = names.get(text.lower())
            if key is None:
                raise FaultError(f"unknown API name {value!r}")
    if key is None:
        raise FaultError(f"api_key must be an integer or an API name, not {value!r}")
    if key not in KIO_VERSIONS:
        raise FaultError(f"unknown API key {key}")
    return key


@dataclass(slots=True)
class FailureRule:
    """Fail the next ``remaining`` requests of ``api_key`` on ``broker_id`` with
    ``error`` (only those naming ``topic``/``partition`` when given)."""

    rule_id: int
    broker_id: int
    api_key: int
    error: ErrorCode
    remaining: int
    topic: str | None = None
    partition: int | None = None
    fired: int = 0

    def matches(
        self, ctx: RequestContext, request: Any, topic_partitions: TopicPartitions | None
    ) -> bool:
        if self.topic is None:
            return True
        if topic_partitions is None:
            return False
        for topic, partition in topic_partitions(ctx, request):
            if topic == self.topic and (
                self.partition is None or partition is None or partition == self.partition
            ):
                return True
        return False

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.rule_id,
            "broker": self.broker_id,
            "api_key": self.api_key,
            "api": api_name(self.api_key),
            "error_code": int(self.error),
            "error": self.error.name.upper(),
            "remaining": self.remaining,
            "fired": self.fired,
            "topic": self.topic,
            "partition": self.partition,
        }


class NoFaults:
    """The default injector of a broker built without one: never intervenes."""

    def intercept(
        self, ctx: RequestContext, request: Any, topic_partitions: TopicPartitions | None
    ) -> ErrorCode | None:
        return None

    def response_delay_ms(self, broker_id: int) -> int:
        return 0


class FaultInjector(NoFaults):
    """The cluster's injected faults, by broker id.

    ``failable_api_keys``: the APIs a rule may fail (those served, each with its error
    response); ``topic_api_keys``: those whose requests name topics, so a rule may be
    limited to a topic(-partition). The composition root gives both from the handler
    registry.
    """

    def __init__(self, failable_api_keys: Iterable[int], topic_api_keys: Iterable[int]) -> None:
        self._failable = frozenset(failable_api_keys)
        self._topic_keys = frozenset(topic_api_keys)
        if not self._topic_keys <= self._failable:
            raise ValueError("topic_api_keys must be failable API keys")
        self._rules: dict[int, list[FailureRule]] = {}
        self._latency_ms: dict[int, int] = {}
        self._ids = itertools.count(1)
        self.injected: dict[int, int] = {}
        """Requests answered with an injected error so far, by broker."""

    # -- the request path ---------------------------------------------------------------

    def intercept(
        self, ctx: RequestContext, request: Any, topic_partitions: TopicPartitions | None
    ) -> ErrorCode | None:
        """The error to answer ``request`` with instead of handling it, if a rule says so;
        the dispatcher builds the answer with the API's own ``error_response``.
        ``topic_partitions`` is the API's (None when its requests name no topic)."""
        rules = self._rules.get(ctx.services.broker_id)
        if not rules:
            return None
        api_key = ctx.header.api_key
        for rule in rules:
            if rule.api_key == api_key and rule.matches(ctx, request, topic_partitions):
                rule.remaining -= 1
                rule.fired += 1
                if rule.remaining <= 0:
                    rules.remove(rule)
                broker_id = rule.broker_id
                self.injected[broker_id] = self.injected.get(broker_id, 0) + 1
                return rule.error
        return None

    def response_delay_ms(self, broker_id: int) -> int:
        return self._latency_ms.get(broker_id, 0)

    # -- control ------------------------------------------------------------------------

    def set_latency(self, broker_id: int, ms: int) -> None:
        """Delay every response of ``broker_id`` by ``ms`` (0 removes the delay)."""
        if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= MAX_LATENCY_MS:
            raise FaultError(f"latency must be an integer 0..{MAX_LATENCY_MS} ms, not {ms!r}")
        if ms == 0:
            self._latency_ms.pop(broker_id, None)
        else:
            self._latency_ms[broker_id] = ms

    def add_failure(
        self,
        broker_id: int,
        api_key: object,
        error: object,
        count: object,
        topic: object = None,
        partition: object = None,
    ) -> FailureRule:
        """Validate everything first, then add the rule: a bad one changes nothing."""
        key = parse_api_key(api_key)
        if key not in self._failable:
            served = ", ".join(f"{k} ({api_name(k)})" for k in sorted(self._failable))
            raise FaultError(
                f"cannot fail API key {key} ({api_name(key)}): this broker does not serve it; "
                f"it serves {served}"
            )
        code = parse_error_code(error)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
            raise FaultError(f"count must be an integer 1..{MAX_COUNT}, not {count!r}")
        if topic is not None and (not isinstance(topic, str) or not topic):
            raise FaultError(f"topic must be a non-empty string, not {topic!r}")
        if partition is not None:
            if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
                raise FaultError(f"partition must be an integer >= 0, not {partition!r}")
            if topic is None:
                raise FaultError("partition given without topic")
        if topic is not None and key not in self._topic_keys:
            raise FaultError(f"{api_name(key)} requests name no topics; drop topic/partition")
        rule = FailureRule(next(self._ids), broker_id, key, code, count, topic, partition)
        self._rules.setdefault(broker_id, []).append(rule)
        return rule

    def clear(self, broker_id: int | None = None) -> None:
        """Remove failure rules and latency, of one broker or of all."""
        if broker_id is None:
            self._rules.clear()
            self._latency_ms.clear()
        else:
            self._rules.pop(broker_id, None)
            self._latency_ms.pop(broker_id, None)

    def rules(self, broker_id: int | None = None) -> list[FailureRule]:
        if broker_id is not None:
            return list(self._rules.get(broker_id, ()))
        return [rule for b in sorted(self._rules) for rule in self._rules[b]]

    def to_json(self) -> dict[str, object]:
        return {
            "latency_ms": {str(b): ms for b, ms in sorted(self._latency_ms.items())},
            "failures": [rule.to_json() for rule in self.rules()],
            "injected": {str(b): n for b, n in sorted(self.injected.items())},
        }
