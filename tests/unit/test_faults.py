"""Fault injection without a network: rules, validation, and the error responses.

Every registered API's error response (its handler module's ``error_response``) is
encoded and decoded again for every version kio knows of it, so a version whose shape
differs (FindCoordinator v4, OffsetFetch v8, Produce v13's topic ids) cannot break only
at run time.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.control.faults import (
    FaultError,
    FaultInjector,
    NoFaults,
    parse_api_key,
    parse_error_code,
)
from broker.handlers.registry import build_registry
from broker.server.context import ConnectionInfo, RequestContext
from protocol.api_registry import KIO_VERSIONS, request_class, response_header_version
from protocol.codec import RequestHeader, decode_response, encode_response

TOPIC = "orders"
REGISTRY = build_registry()


def _faults() -> FaultInjector:
    """The injector as the composition root builds it, from the handler registry."""
    topic_keys = frozenset(k for k, h in REGISTRY.items() if h.topic_partitions is not None)
    return FaultInjector(frozenset(REGISTRY), topic_keys)


def _intercept(faults: NoFaults, ctx: RequestContext, request: Any) -> ErrorCode | None:
    """As the dispatcher asks: with the API's own ``topic_partitions``."""
    return faults.intercept(ctx, request, REGISTRY[ctx.header.api_key].topic_partitions)


def _error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return REGISTRY[ctx.header.api_key].error_response(ctx, request, error)


class _Broker:
    """What the fault path reads of a broker's services: its id and the cluster metadata."""

    def __init__(self, broker_id: int = 0) -> None:
        self.broker_id = broker_id
        self.metadata = ClusterMetadata()
        self.metadata.register_broker(0, "127.0.0.1", 9092)


def _ctx(api_key: int, version: int, broker: _Broker | None = None) -> RequestContext:
    closed: list[str] = []
    info = ConnectionInfo("c", "127.0.0.1", 1, 9092, close=closed.append)
    ctx = RequestContext(RequestHeader(api_key, version, 7, "test"), info, broker or _Broker())  # type: ignore[arg-type]
    return ctx


def _fill(cls: type[Any], topic: str = TOPIC, partition: int = 2) -> Any:
    """An instance of a kio request class: required fields get a plain value, every
    nested list one element (topic ``topic``, partition ``partition``)."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        has_default = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        if has_default and typing.get_origin(hints[f.name]) is not tuple:
            continue
        kwargs[f.name] = _value(hints[f.name], f.name, topic, partition)
    return cls(**kwargs)


def _value(tp: Any, name: str, topic: str, partition: int) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        (inner,) = [a for a in args if a is not type(None)]
        return _value(inner, name, topic, partition)
    if origin is tuple:
        return (_value(args[0], name, topic, partition),)
    if dataclasses.is_dataclass(tp):
        return _fill(typing.cast(type[Any], tp), topic, partition)
    mro = getattr(tp, "__mro__", (tp,))
    if ErrorCode in mro:
        return ErrorCode.none
    if bool in mro:
        return False
    if uuid.UUID in mro:
        return uuid.UUID(int=0)
    if datetime.timedelta in mro:
        return datetime.timedelta(0)
    if bytes in mro:
        return b""
    if str in mro:
        return topic
    if float in mro:
        return 1.0
    if int in mro:
        if name == "acks":
            return 1
        return partition if "partition" in name or name == "index" else 0
    raise AssertionError(f"no value for {name}: {tp}")


def _versions() -> Iterator[tuple[int, int]]:
    for key in sorted(REGISTRY):
        spec = KIO_VERSIONS[key]
        for version in range(spec.min_version, spec.max_version + 1):
            yield key, version


def _errors_in(obj: Any) -> list[ErrorCode]:
    """Every error code anywhere in a decoded response."""
    found: list[ErrorCode] = []
    if isinstance(obj, ErrorCode):
        found.append(obj)
    elif isinstance(obj, tuple):
        for item in obj:
            found.extend(_errors_in(item))
    elif dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            found.extend(_errors_in(getattr(obj, f.name)))
    return found


#: Error answers carrying Kafka's -1 timestamps (the delegation-token APIs), which kio's
#: reader refuses as out of range where a Java client reads them: checked on the frame.
NEGATIVE_TIMESTAMPS = frozenset({38, 39, 40})


@pytest.mark.parametrize(("api_key", "version"), list(_versions()))
def test_error_response_round_trips_for_every_version(api_key: int, version: int) -> None:
    request = _fill(request_class(api_key, version))
    ctx = _ctx(api_key, version)
    ctx.services.metadata.create_topic(TOPIC, 3, 1, {})
    response = _error_response(ctx, request, ErrorCode.not_coordinator)
    frame = encode_response(api_key, version, 7, response)
    if api_key in NEGATIVE_TIMESTAMPS:  # the error code first, after the header
        at = 8 + (1 if response_header_version(api_key, version) else 0)
        assert int.from_bytes(frame[at : at + 2], "big") == ErrorCode.not_coordinator
        return
    correlation_id, decoded = decode_response(api_key, version, frame[4:])
    assert correlation_id == 7
    assert ErrorCode.not_coordinator in _errors_in(decoded)


def test_produce_error_names_each_partition_of_the_request() -> None:
    request = _fill(request_class(0, 9), partition=4)
    response = _error_response(_ctx(0, 9), request, ErrorCode.not_leader_or_follower)
    (topic,) = response.responses
    (part,) = topic.partition_responses
    assert (topic.name, part.index, part.error_code) == (
        TOPIC,
        4,
        ErrorCode.not_leader_or_follower,
    )
    assert part.base_offset == -1


# -- parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("NOT_LEADER_OR_FOLLOWER", ErrorCode.not_leader_or_follower),
        ("not_leader_or_follower", ErrorCode.not_leader_or_follower),
        (6, ErrorCode.not_leader_or_follower),
        ("6", ErrorCode.not_leader_or_follower),
        (-1, ErrorCode.unknown_server_error),
        ("TOPIC_AUTHORIZATION_FAILED", ErrorCode.topic_authorization_failed),
    ],
)
def test_error_codes_by_number_or_kafka_name(value: object, expected: ErrorCode) -> None:
    assert parse_error_code(value) is expected


@pytest.mark.parametrize("value", ["NO_SUCH_ERROR", 9999, 0, "NONE", True, None, 1.5, [6]])
def test_bad_error_codes_are_refused(value: object) -> None:
    with pytest.raises(FaultError):
        parse_error_code(value)


def test_api_keys_by_number_or_name() -> None:
    assert parse_api_key("Produce") == 0
    assert parse_api_key("listoffsets") == 2
    assert parse_api_key(3) == 3
    assert parse_api_key("12") == 12
    assert parse_api_key("ApiVersions") == 18
    for bad in ("NoSuchApi", 99, -1, True, None):
        with pytest.raises(FaultError):
            parse_api_key(bad)


def test_every_served_api_can_be_failed_and_only_those() -> None:
    faults = _faults()
    for key in REGISTRY:
        faults.add_failure(0, key, 6, 1)
    assert {rule.api_key for rule in faults.rules()} == set(REGISTRY)
    assert 67 not in REGISTRY  # AllocateProducerIds: kio knows it, this broker does not serve it
    with pytest.raises(FaultError, match="cannot fail API key 67"):
        faults.add_failure(0, "AllocateProducerIds", 6, 1)


def test_topic_rules_are_for_apis_whose_requests_name_topics() -> None:
    topic_keys = {k for k, h in REGISTRY.items() if h.topic_partitions is not None}
    # Produce, Fetch, ListOffsets, Metadata, OffsetCommit, OffsetFetch, AddPartitionsToTxn,
    # WriteTxnMarkers, TxnOffsetCommit
    assert topic_keys == {0, 1, 2, 3, 8, 9, 24, 27, 28}


def test_a_handler_module_without_an_error_response_is_refused() -> None:
    module = types.ModuleType("broker.handlers.no_error_response")
    module.API_KEY = 60  # type: ignore[attr-defined]
    module.MIN_VERSION = 0  # type: ignore[attr-defined]
    module.MAX_VERSION = 0  # type: ignore[attr-defined]
    module.handle = lambda ctx, request: None  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="no error_response"):
        build_registry((module,))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"count": 0},
        {"count": -1},
        {"count": "3"},
        {"count": True},
        {"topic": ""},
        {"topic": 5},
        {"partition": 1},  # partition without topic
        {"topic": TOPIC, "partition": -1},
        {"api_key": 12, "topic": TOPIC},  # Heartbeat names no topic
        {"error": "BOGUS"},
        {"api_key": "Bogus"},
    ],
)
def test_a_bad_failure_rule_changes_nothing(kwargs: dict[str, Any]) -> None:
    faults = _faults()
    faults.add_failure(0, 0, 6, 1)
    before = faults.to_json()
    args: dict[str, Any] = {"api_key": 0, "error": 6, "count": 1, **kwargs}
    with pytest.raises(FaultError):
        faults.add_failure(0, **args)
    assert faults.to_json() == before


def test_bad_latency_is_refused() -> None:
    faults = _faults()
    for bad in (-1, 600_001, "5", 1.5, True):
        with pytest.raises(FaultError):
            faults.set_latency(0, bad)  # type: ignore[arg-type]
    assert faults.response_delay_ms(0) == 0


# -- the request path ---------------------------------------------------------------------


def test_a_rule_fails_exactly_count_requests_then_goes() -> None:
    faults = _faults()
    faults.add_failure(0, "Produce", "NOT_LEADER_OR_FOLLOWER", 2)
    request = _fill(request_class(0, 9))
    answers = [_intercept(faults, _ctx(0, 9), request) for _ in range(3)]
    assert [a is not None for a in answers] == [True, True, False]
    assert faults.rules() == []
    assert faults.injected == {0: 2}


def test_rules_are_per_broker_and_per_api() -> None:
    faults = _faults()
    faults.add_failure(1, 0, 6, 1)
    produce = _fill(request_class(0, 9))
    assert _intercept(faults, _ctx(0, 9, _Broker(0)), produce) is None
    assert _intercept(faults, _ctx(1, 12, _Broker(1)), _fill(request_class(1, 12))) is None
    assert _intercept(faults, _ctx(0, 9, _Broker(1)), produce) is not None


def test_a_topic_partition_rule_matches_only_requests_naming_it() -> None:
    faults = _faults()
    faults.add_failure(0, 0, 6, 5, topic=TOPIC, partition=1)
    assert _intercept(faults, _ctx(0, 9), _fill(request_class(0, 9), partition=0)) is None
    assert _intercept(faults, _ctx(0, 9), _fill(request_class(0, 9), topic="other")) is None
    assert _intercept(faults, _ctx(0, 9), _fill(request_class(0, 9), partition=1)) is not None
    assert faults.rules()[0].remaining == 4


def test_a_topic_rule_finds_topics_named_by_id() -> None:
    """Produce v13 names topics by id only."""
    broker = _Broker()
    topic = broker.metadata.create_topic(TOPIC, 3, 1, {})
    request = _fill(request_class(0, 13))
    request = dataclasses.replace(
        request, topic_data=(dataclasses.replace(request.topic_data[0], topic_id=topic.topic_id),)
    )
    faults = _faults()
    faults.add_failure(0, 0, 6, 1, topic=TOPIC)
    assert _intercept(faults, _ctx(0, 13, broker), request) is not None


def test_a_failed_acks0_produce_closes_the_connection() -> None:
    """Kafka answers nothing to acks=0 and closes the connection on an error."""
    faults = _faults()
    faults.add_failure(0, 0, 6, 1)
    closed: list[str] = []
    ctx = _ctx(0, 9)
    ctx.connection.close = closed.append
    request = dataclasses.replace(_fill(request_class(0, 9)), acks=0)
    error = _intercept(faults, ctx, request)
    assert error is not None
    assert _error_response(ctx, request, error) is None  # nothing is written
    assert closed


@pytest.mark.parametrize(("api", "api_key"), [("CreateTopics", 19), ("DescribeConfigs", 32)])
def test_a_rule_on_an_api_that_had_no_error_response_before_works(api: str, api_key: int) -> None:
    """CreateTopics answers per topic, DescribeConfigs per resource; nothing is handled."""
    faults = _faults()
    faults.add_failure(0, api, "POLICY_VIOLATION", 1)
    version = REGISTRY[api_key].max_version
    request = _fill(request_class(api_key, version))
    ctx = _ctx(api_key, version)
    error = _intercept(faults, ctx, request)
    assert error is ErrorCode.policy_violation
    assert _intercept(faults, ctx, request) is None  # count 1: used up
    frame = encode_response(api_key, version, 7, _error_response(ctx, request, error))
    decoded: Any = decode_response(api_key, version, frame[4:])[1]
    (entry,) = decoded.topics if api_key == 19 else decoded.results
    name = entry.name if api_key == 19 else entry.resource_name
    assert (name, entry.error_code) == (TOPIC, ErrorCode.policy_violation)
    assert entry.error_message == "injected fault: POLICY_VIOLATION"
    assert ctx.services.metadata.topics == {}  # CreateTopics created nothing


def test_clear_one_broker_or_all() -> None:
    faults = _faults()
    faults.add_failure(0, 0, 6, 1)
    faults.add_failure(1, 0, 6, 1)
    faults.set_latency(1, 50)
    faults.clear(1)
    assert [r.broker_id for r in faults.rules()] == [0]
    assert faults.response_delay_ms(1) == 0
    faults.set_latency(0, 10)
    faults.clear()
    assert faults.rules() == [] and faults.response_delay_ms(0) == 0


def test_the_default_injector_never_intervenes() -> None:
    none = NoFaults()
    assert _intercept(none, _ctx(0, 9), _fill(request_class(0, 9))) is None
    assert none.response_delay_ms(0) == 0
