"""ClientQuotaManager: Kafka's precedence, metric tags, recording and throttling, on the
manual clock; the store's validation and durability."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.quota.client_quota_manager import (
    INACTIVE_SENSOR_EXPIRATION_MS,
    ClientQuotaManager,
    ClientRequestQuotaManager,
    QuotaType,
)
from broker.quota.client_quota_store import (
    ClientQuotaStore,
    QuotaAlteration,
    QuotaFilterError,
)
from purgatory import ManualClock

RATE = "producer_byte_rate"


def _set(store: ClientQuotaStore, entity: dict[str, str | None], **values: float) -> None:
    (result,) = store.alter([QuotaAlteration(tuple(entity.items()), tuple(values.items()))], False)
    assert result.error is ErrorCode.none, result.message


def _manager(store: ClientQuotaStore, clock: ManualClock) -> ClientQuotaManager:
    manager = ClientQuotaManager(QuotaType.PRODUCE, store, clock)
    store.add_listener(manager.update_quotas)
    return manager


def test_no_quota_records_nothing() -> None:
    clock = ManualClock(0)
    manager = _manager(ClientQuotaStore(), clock)
    assert not manager.quotas_enabled
    assert manager.maybe_record_and_get_throttle_time_ms("ANONYMOUS", "c", 1e9, 0) == 0
    assert manager.sensors == {}


def test_kafkas_precedence_order() -> None:
    clock = ManualClock(0)
    store = ClientQuotaStore()
    manager = _manager(store, clock)
    levels: list[tuple[dict[str, str | None], float]] = [
        ({"client-id": None}, 8),
        ({"client-id": "c"}, 7),
        ({"user": None}, 6),
        ({"user": None, "client-id": None}, 5),
        ({"user": None, "client-id": "c"}, 4),
        ({"user": "u"}, 3),
        ({"user": "u", "client-id": None}, 2),
        ({"user": "u", "client-id": "c"}, 1),
    ]
    # Added from the least specific up: each new level wins over the ones before.
    for entity, value in levels:
        _set(store, entity, producer_byte_rate=value)
        assert manager.quota("u", "c") == value
    # Removed from the most specific down: the next level shows through.
    for entity, value in reversed(levels[1:]):
        store.alter([QuotaAlteration(tuple(entity.items()), ((RATE, None),))], False)
        assert manager.quota("u", "c") == value + 1
    assert manager.quota("u", "c") == 8


def test_client_id_quotas_give_each_client_id_its_own_sensor() -> None:
    clock = ManualClock(0)
    store = ClientQuotaStore()
    manager = _manager(store, clock)
    _set(store, {"client-id": None}, producer_byte_rate=100)
    assert manager.quota_metric_tags("alice", "a") == ("", "a")
    assert manager.quota_metric_tags("bob", "b") == ("", "b")
    assert manager.quota("alice", "a") == 100


def test_user_quotas_are_shared_by_the_users_clients() -> None:
    clock = ManualClock(0)
    store = ClientQuotaStore()
    manager = _manager(store, clock)
    _set(store, {"user": "alice"}, producer_byte_rate=100)
    assert manager.quota_metric_tags("alice", "a1") == ("alice", "")
    assert manager.quota_metric_tags("alice", "a2") == ("alice", "")
    manager.record_and_get_throttle_time_ms("alice", "a1", 500, 0)
    throttle = manager.record_and_get_throttle_time_ms("alice", "a2", 500, 0)
    # One sensor: 1000 B over the 10 s minimum window = 100 B/s, at the bound.
    assert throttle == 0
    assert manager.record_and_get_throttle_time_ms("alice", "a2", 1000, 0) == 10_000
    assert manager.quota("bob", "b") is None


def test_over_the_quota_a_client_is_throttled_then_recovers() -> None:
    clock = ManualClock(0)
    store = ClientQuotaStore()
    manager = _manager(store, clock)
    _set(store, {"client-id": "p"}, producer_byte_rate=1000)
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "p", 10_000, 0) == 0
    # 20000 B over 10 s = 2000 B/s: (2000 - 1000) / 1000 * 10 s.
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "p", 10_000, 0) == 10_000
    # Kafka's windows: 10 s later the elapsed time replaces the 10 s minimum, so the
    # rate is still 2000 B/s; once idle for samples x window (11 s) the windows reset.
    clock.advance(10_000)
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "p", 0, clock.now_ms()) == 10_000
    clock.advance(11_000)
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "p", 0, clock.now_ms()) == 0
    # Another client id has no quota and is never throttled.
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "q", 1e9, clock.now_ms()) == 0


def test_changing_a_quota_rebounds_the_existing_sensor() -> None:
    clock = ManualClock(0)
    store = ClientQuotaStore()
    manager = _manager(store, clock)
    _set(store, {"client-id": "p"}, producer_byte_rate=1000)
    manager.record_and_get_throttle_time_ms("ANONYMOUS", "p", 10_000, 0)
    _set(store, {"client-id": "p"}, producer_byte_rate=500)
    assert manager.sensors[("", "p")].quota.config.quota == 500
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "p", 0, 0) == 10_000


def test_request_quota_records_percentages_and_caps_the_throttle_at_one_window() -> None:
    clock = ManualClock(0)
    store = ClientQuotaStore()
    manager = ClientRequestQuotaManager(store, clock)
    store.add_listener(manager.update_quotas)
    _set(store, {"client-id": "r"}, request_percentage=1)
    # 50 ms of handler time = 5 % of one second, over the 10 s window = 0.5 %/s.
    assert manager.maybe_record_request_time("u", "r", 50_000_000, 0) == 0
    # 2 s more: 205 %/10 s = 20.5 %/s: far over 1 %, capped at 1000 ms.
    assert manager.maybe_record_request_time("u", "r", 2_000_000_000, 0) == 1_000


def test_idle_sensors_expire_after_an_hour() -> None:
    clock = ManualClock(0)
    store = ClientQuotaStore()
    manager = _manager(store, clock)
    _set(store, {"client-id": None}, producer_byte_rate=1000)
    manager.record_and_get_throttle_time_ms("u", "old", 1, 0)
    clock.advance(INACTIVE_SENSOR_EXPIRATION_MS)
    manager.record_and_get_throttle_time_ms("u", "new", 1, clock.now_ms())
    assert set(manager.sensors) == {("", "new")}


U: tuple[tuple[str, str | None], ...] = (("user", "u"),)
ONE = ((RATE, 1.0),)
REFUSED = [
    ((), ONE, "Invalid empty client quota entity"),
    ((("group", "g"),), ONE, "Unhandled client quota entity type: group"),
    ((("user", ""),), ONE, "Empty user not supported"),
    (U, (("bogus", 1.0),), "Invalid configuration key bogus"),
    (U, ((RATE, 0.0),), f"Quota {RATE} must be greater than 0"),
    (U, ((RATE, -5.0),), f"Quota {RATE} must be greater than 0"),
    (U, ((RATE, 1e30),), f"Proposed value for {RATE} is too large for a LONG."),
    (U, ((RATE, 1.5),), f"{RATE} cannot be a fractional value."),
    ((("ip", "1.2.3.4"),), ONE, f"Invalid configuration key {RATE}"),
    (
        (("ip", None), ("user", "u")),
        (("connection_creation_rate", 1.0),),
        "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
    ),
    (
        (("user", "u"), ("user", "v")),
        ONE,
        "Invalid client quota entity, duplicate entity entry user",
    ),
    (
        U,
        ((RATE, 1.0), (RATE, 2.0)),
        f"Duplicate quota key {RATE} not updating quota for this entity "
        "ClientQuotaEntity(entries={user=u})",
    ),
]


@pytest.mark.parametrize(("entity", "ops", "message"), REFUSED)
def test_alter_refuses_what_kafka_refuses(
    entity: tuple[tuple[str, str | None], ...], ops: tuple[tuple[str, float], ...], message: str
) -> None:
    store = ClientQuotaStore()
    (result,) = store.alter([QuotaAlteration(entity, ops)], False)
    assert (result.error, result.message) == (ErrorCode.invalid_request, message)
    assert store.entries() == {}


def test_alter_validate_only_and_duplicate_entities() -> None:
    store = ClientQuotaStore()
    entry = QuotaAlteration((("client-id", "c"),), (("consumer_byte_rate", 10.0),))
    assert [r.error for r in store.alter([entry], True)] == [ErrorCode.none]
    assert store.entries() == {}
    first, second = store.alter([entry, entry], False)
    assert first.error is ErrorCode.none
    assert second.error is ErrorCode.invalid_request
    assert second.message == "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=c})"
    assert store.entries() == {(("client-id", "c"),): {"consumer_byte_rate": 10.0}}


def test_describe_filters_as_kafka() -> None:
    store = ClientQuotaStore()
    _set(store, {"user": "u"}, producer_byte_rate=1)
    _set(store, {"user": "u", "client-id": "c"}, producer_byte_rate=2)
    _set(store, {"user": None}, producer_byte_rate=3)
    _set(store, {"client-id": "c"}, request_percentage=4.5)

    def values(components: list[tuple[str, int, str | None]], strict: bool) -> list[float]:
        return sorted(v for _, vals in store.describe(components, strict) for v in vals.values())

    assert values([("user", 0, "u")], False) == [1, 2]
    assert values([("user", 0, "u")], True) == [1]
    assert values([("user", 1, None)], False) == [3]
    assert values([("user", 2, None)], False) == [1, 2, 3]
    assert values([("client-id", 0, "c")], True) == [4.5]
    assert values([], False) == [1, 2, 3, 4.5]
    for components, error in [
        ([("group", 0, "g")], ErrorCode.unsupported_version),
        ([("", 0, "g")], ErrorCode.invalid_request),
        ([("user", 0, None)], ErrorCode.invalid_request),
        ([("user", 1, "x")], ErrorCode.invalid_request),
        ([("user", 2, "x")], ErrorCode.invalid_request),
        ([("user", 7, None)], ErrorCode.invalid_request),
        ([("user", 2, None), ("user", 1, None)], ErrorCode.invalid_request),
        ([("ip", 2, None), ("user", 1, None)], ErrorCode.invalid_request),
    ]:
        with pytest.raises(QuotaFilterError) as caught:
            store.describe(components, False)
        assert caught.value.error is error


def test_quotas_survive_a_restart_with_a_data_dir(tmp_path: Path) -> None:
    store = ClientQuotaStore(tmp_path)
    _set(store, {"user": None, "client-id": "c"}, producer_byte_rate=1024)
    assert (tmp_path / "client-quotas.json").exists()
    again = ClientQuotaStore(tmp_path)
    assert again.entries() == {(("client-id", "c"), ("user", None)): {RATE: 1024.0}}


def test_max_value_in_quota_window_is_the_quota_over_samples_minus_one_windows() -> None:
    clock = ManualClock(0)
    store = ClientQuotaStore()
    manager = ClientQuotaManager(QuotaType.FETCH, store, clock)
    store.add_listener(manager.update_quotas)
    assert manager.get_max_value_in_quota_window("u", "c") == float("inf")
    _set(store, {"client-id": "c"}, consumer_byte_rate=1000)
    assert manager.get_max_value_in_quota_window("u", "c") == 10_000
    assert manager.get_max_value_in_quota_window("u", "other") == float("inf")
