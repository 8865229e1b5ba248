"""Per-group configs (KIP-848 GROUP resources): Kafka 4's GroupConfig checks and
messages, the store's JSON document across a restart, and the consumer group
coordinator using a group's session timeout and heartbeat interval (manual clock)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError
from broker.group.consumer import ConsumerGroupConfig
from broker.group.group_configs import GroupConfigManager, GroupConfigStore
from broker.group.share.share_group_config import ShareGroupConfig
from tests.unit.test_consumer_group_coordinator import INTERVAL_MS, SESSION_MS, World

E = ErrorCode
SET, DELETE, APPEND = 0, 1, 2


def manager(data_dir: Path | None = None, **config: int) -> GroupConfigManager:
    return GroupConfigManager(GroupConfigStore(data_dir), ConsumerGroupConfig(**config))


def refused(m: GroupConfigManager, changes: list[tuple[str, str | None, int]]) -> MetadataError:
    with pytest.raises(MetadataError) as info:
        m.alter("g", changes, validate_only=False)
    return info.value


def test_describe_lists_them_all_with_the_brokers_values_as_defaults() -> None:
    m = manager(group_consumer_session_timeout_ms=50000)
    assert m.describe("any-group") == [
        ("consumer.heartbeat.interval.ms", "5000", False),
        ("consumer.session.timeout.ms", "50000", False),
        ("errors.deadletterqueue.copy.record.enable", "false", False),
        ("errors.deadletterqueue.topic.name", "", False),
        ("share.auto.offset.reset", "latest", False),
        ("share.delivery.count.limit", "5", False),
        ("share.heartbeat.interval.ms", "5000", False),
        ("share.isolation.level", "read_uncommitted", False),
        ("share.partition.max.record.locks", "2000", False),
        ("share.record.lock.duration.ms", "30000", False),
        ("share.renew.acknowledge.enable", "false", False),
        ("share.session.timeout.ms", "45000", False),
        ("streams.heartbeat.interval.ms", "5000", False),
        ("streams.num.standby.replicas", "0", False),
        ("streams.session.timeout.ms", "45000", False),
    ]


def test_set_and_delete_override_one_group_only() -> None:
    m = manager()
    m.alter("g", [("consumer.session.timeout.ms", "55000", SET)], validate_only=False)
    assert m.consumer_session_timeout_ms("g") == 55000
    assert m.consumer_session_timeout_ms("other") == 45000
    assert ("consumer.session.timeout.ms", "55000", True) in m.describe("g")
    m.alter("g", [("consumer.session.timeout.ms", "50000", SET)], validate_only=True)
    assert m.consumer_session_timeout_ms("g") == 55000  # validate_only changes nothing
    m.alter("g", [("consumer.session.timeout.ms", None, DELETE)], validate_only=False)
    assert m.consumer_session_timeout_ms("g") == 45000
    assert m.store.get("g") == {}


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ([("nope", "1", SET)], E.invalid_config, "Unknown group config name: nope"),
        (
            [("consumer.session.timeout.ms", "abc", SET)],
            E.invalid_config,
            "Invalid value abc for configuration consumer.session.timeout.ms: "
            "Not a number of type INT",
        ),
        (
            [("consumer.session.timeout.ms", "0", SET)],
            E.invalid_config,
            "Invalid value 0 for configuration consumer.session.timeout.ms: "
            "Value must be at least 1",
        ),
        (
            [("consumer.session.timeout.ms", "99999999999", SET)],
            E.invalid_config,
            "Invalid value 99999999999 for configuration consumer.session.timeout.ms: "
            "Not a number of type INT",
        ),
        (
            [("consumer.session.timeout.ms", "40000", SET)],
            E.invalid_config,
            "consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ),
        (
            [("consumer.heartbeat.interval.ms", "16000", SET)],
            E.invalid_config,
            "consumer.heartbeat.interval.ms must be less than or equal to "
            "group.consumer.max.heartbeat.interval.ms",
        ),
        (
            [("share.record.lock.duration.ms", "999", SET)],
            E.invalid_config,
            "Invalid value 999 for configuration share.record.lock.duration.ms: "
            "Value must be at least 1000",
        ),
        (
            [("consumer.session.timeout.ms", "45000", APPEND)],
            E.invalid_config,
            "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.",
        ),
    ],
)
def test_bad_values_get_kafkas_answers_and_change_nothing(
    changes: list[tuple[str, str | None, int]], error: ErrorCode, message: str
) -> None:
    m = manager()
    exc = refused(m, changes)
    assert (exc.error, exc.message) == (error, message)
    assert m.store.get("g") == {}


def test_session_must_exceed_heartbeat_interval_within_the_brokers_bounds() -> None:
    m = manager(
        group_consumer_min_session_timeout_ms=1000,
        group_consumer_session_timeout_ms=6000,
        group_consumer_min_heartbeat_interval_ms=1000,
        group_consumer_heartbeat_interval_ms=2000,
    )
    exc = refused(
        m,
        [
            ("consumer.session.timeout.ms", "3000", SET),
            ("consumer.heartbeat.interval.ms", "3000", SET),
        ],
    )
    assert (
        exc.message
        == "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
    )
    with pytest.raises(MetadataError) as info:
        m.alter("", [("consumer.session.timeout.ms", "3000", SET)], validate_only=False)
    assert info.value.error is E.invalid_request


def test_overrides_survive_a_restart_in_their_json_document(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.alter("g", [("consumer.session.timeout.ms", "60000", SET)], validate_only=False)
    assert (tmp_path / "group-configs.json").exists()
    again = manager(tmp_path)
    assert again.consumer_session_timeout_ms("g") == 60000
    again.alter("g", [("consumer.session.timeout.ms", None, DELETE)], validate_only=False)
    assert manager(tmp_path).store.get("g") == {}


def test_the_coordinator_uses_the_groups_session_timeout_and_heartbeat_interval() -> None:
    w = World()
    w.coord.group_configs.alter(
        "g",
        [
            ("consumer.session.timeout.ms", str(SESSION_MS * 2), SET),
            ("consumer.heartbeat.interval.ms", str(INTERVAL_MS * 2), SET),
        ],
        validate_only=False,
    )
    a, b = w.member("a"), w.member("b")
    w.converge()
    assert a.last is not None and a.last.heartbeat_interval_ms == INTERVAL_MS * 2
    # b stops heartbeating: the broker's session timeout is not enough to fence it.
    b.active, b.owned = False, {}
    for _ in range(SESSION_MS // 500 + 2):
        w.h.advance(500)
        a.heartbeat()
    assert set(w.group.members) == {"a", "b"}
    for _ in range(SESSION_MS // 500):
        w.h.advance(500)
        a.heartbeat()
    assert set(w.group.members) == {"a"}


def test_share_auto_offset_reset_takes_kafkas_strategies_only() -> None:
    m = manager()
    for value in ("earliest", "latest", "by_duration:PT1H", "by_duration:P1DT0.5S"):
        m.alter("g", [("share.auto.offset.reset", value, SET)], validate_only=False)
        assert m.share_auto_offset_reset("g") == value
    for value in ("none", "by_duration:", "by_duration:1H", "by_duration:P"):
        error = refused(m, [("share.auto.offset.reset", value, SET)])
        assert error.error is ErrorCode.invalid_config
        assert str(error).startswith(f"Invalid value {value} for configuration")
    assert m.share_auto_offset_reset("g") == "by_duration:P1DT0.5S"
    m.alter("g", [("share.auto.offset.reset", None, DELETE)], validate_only=False)
    assert m.share_auto_offset_reset("g") == "latest"


def share_manager(**share: int) -> GroupConfigManager:
    return GroupConfigManager(GroupConfigStore(), ConsumerGroupConfig(), ShareGroupConfig(**share))


def test_lock_duration_is_bounded_by_the_brokers_configured_minimum() -> None:
    """The bug of issue 32: the broker's group.share.min.record.lock.duration.ms=1000
    (confluent-kafka-python's test broker) lets a group set 5000; the default 15000
    does not."""
    m = share_manager(
        group_share_record_lock_duration_ms=1000, group_share_min_record_lock_duration_ms=1000
    )
    m.alter("g", [("share.record.lock.duration.ms", "5000", SET)], validate_only=False)
    assert m.value("g", "share.record.lock.duration.ms") == 5000
    assert m.value("other", "share.record.lock.duration.ms") == 1000
    error = refused(share_manager(), [("share.record.lock.duration.ms", "5000", SET)])
    assert error.error is E.invalid_config
    assert error.message == (
        "share.record.lock.duration.ms must be greater than or equal to "
        "group.share.min.record.lock.duration.ms"
    )


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "share.delivery.count.limit",
            "1",
            "Invalid value 1 for configuration share.delivery.count.limit: "
            "Value must be at least 2",
        ),
        (
            "share.delivery.count.limit",
            "11",
            "share.delivery.count.limit must be less than or equal to "
            "group.share.max.delivery.count.limit",
        ),
        (
            "share.partition.max.record.locks",
            "99",
            "Invalid value 99 for configuration share.partition.max.record.locks: "
            "Value must be at least 100",
        ),
        (
            "share.partition.max.record.locks",
            "10001",
            "share.partition.max.record.locks must be less than or equal to "
            "group.share.max.partition.max.record.locks",
        ),
        (
            "share.isolation.level",
            "serializable",
            "Invalid value serializable for configuration share.isolation.level: "
            "String must be one of: read_committed, read_uncommitted",
        ),
        (
            "share.renew.acknowledge.enable",
            "yes",
            "Invalid value yes for configuration share.renew.acknowledge.enable: "
            "Expected value to be either true or false",
        ),
        (
            "errors.deadletterqueue.topic.name",
            "__dlq",
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'",
        ),
    ],
)
def test_share_configs_of_kafka_4_3_are_checked(name: str, value: str, message: str) -> None:
    error = refused(share_manager(), [(name, value, SET)])
    assert error.error is E.invalid_config
    assert error.message == message


def test_share_configs_of_kafka_4_3_are_read_per_group() -> None:
    m = share_manager(group_share_max_delivery_count_limit=8)
    m.alter(
        "g",
        [
            ("share.delivery.count.limit", "8", SET),
            ("share.partition.max.record.locks", "100", SET),
            ("share.isolation.level", "read_committed", SET),
            ("share.renew.acknowledge.enable", "TRUE", SET),
        ],
        validate_only=False,
    )
    assert m.value("g", "share.delivery.count.limit") == 8
    assert m.value("g", "share.partition.max.record.locks") == 100
    assert m.share_read_committed("g") and not m.share_read_committed("other")
    assert m.share_renew_acknowledge_enable("g")
    assert not m.share_renew_acknowledge_enable("other")
    assert ("share.renew.acknowledge.enable", "true", True) in m.describe("g")


def test_streams_group_configs_are_checked_against_the_brokers_bounds() -> None:
    m = manager()
    error = refused(m, [("streams.num.standby.replicas", "3", SET)])
    assert error.message == (
        "streams.num.standby.replicas must be less than or equal to "
        "group.streams.max.standby.replicas"
    )
    error = refused(m, [("streams.session.timeout.ms", "1000", SET)])
    assert error.message == (
        "streams.session.timeout.ms must be greater than or equal to "
        "group.streams.min.session.timeout.ms"
    )
    m.alter("g", [("streams.num.standby.replicas", "2", SET)], validate_only=False)
    assert m.streams_num_standby_replicas("g") == 2
    assert m.streams_num_standby_replicas("other") == 0
