"""The state table, group bookkeeping, the partition hash and the record codec."""

from __future__ import annotations

import itertools

import pytest

from broker.coordinator.partition_hash import java_string_hash
from broker.group import GroupState, IllegalStateTransition, partition_for
from broker.group.consumer_protocol import encode_subscription, subscription_topics
from broker.group.group_log import (
    GroupMetadataRecord,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitRecord,
    Record,
    decode_record,
    encode_record,
)
from broker.group.group_metadata import GroupMetadata
from broker.group.group_state import VALID_PREVIOUS_STATES, is_valid_transition
from broker.group.member_metadata import MemberMetadata
from broker.group.offsets import OffsetAndMetadata
from purgatory import ManualClock

S = GroupState
ALLOWED = {
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.STABLE, S.DEAD),
    (S.PREPARING_REBALANCE, S.DEAD),
    (S.COMPLETING_REBALANCE, S.DEAD),
    (S.EMPTY, S.DEAD),
    (S.DEAD, S.DEAD),
}


@pytest.mark.parametrize("current,target", list(itertools.product(S, S)))
def test_every_transition_follows_kafkas_table(current: S, target: S) -> None:
    clock = ManualClock(5)
    group = GroupMetadata("g", current, clock)
    clock.advance(10)
    if (current, target) in ALLOWED:
        group.transition_to(target)
        assert group.state is target
        assert group.current_state_timestamp == 15
    else:
        with pytest.raises(IllegalStateTransition):
            group.transition_to(target)
        assert group.state is current
    assert is_valid_transition(current, target) == ((current, target) in ALLOWED)


def test_table_lists_kafkas_valid_previous_states() -> None:
    assert VALID_PREVIOUS_STATES[S.STABLE] == {S.COMPLETING_REBALANCE}
    assert VALID_PREVIOUS_STATES[S.EMPTY] == {S.PREPARING_REBALANCE}
    assert str(S.COMPLETING_REBALANCE) == "CompletingRebalance"


def member(
    mid: str, protocols: list[tuple[str, bytes]], instance: str | None = None
) -> MemberMetadata:
    return MemberMetadata(mid, instance, "c", "h", 1000, 1000, "consumer", protocols)


def test_select_protocol_takes_most_votes_among_protocols_all_support() -> None:
    group = GroupMetadata("g", S.EMPTY, ManualClock())
    group.add(member("a", [("roundrobin", b""), ("range", b"")]))
    group.add(member("b", [("range", b""), ("roundrobin", b""), ("sticky", b"")]))
    group.add(member("c", [("range", b""), ("roundrobin", b"")]))
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "range"  # b and c prefer it
    group.transition_to(S.PREPARING_REBALANCE)  # an Empty group takes any protocols
    assert group.supports_protocols("consumer", {"sticky", "range"})
    assert not group.supports_protocols("consumer", {"sticky"})
    assert not group.supports_protocols("connect", {"range"})


def test_add_and_remove_keep_leader_and_awaiting_counts() -> None:
    group = GroupMetadata("g", S.EMPTY, ManualClock())
    group.add(member("a", [("range", b"")]), callback=lambda r: None)
    group.add(member("b", [("range", b"")]))
    assert group.leader_id == "a"
    assert group.num_awaiting == 1
    assert not group.has_all_members_joined
    group.remove("a")
    assert group.leader_id == "b"
    assert group.num_awaiting == 0
    assert group.has_all_members_joined is False  # b is not parked
    group.add_pending_member("p")
    group.remove("b")
    assert not group.has_all_members_joined  # a MEMBER_ID_REQUIRED is outstanding
    group.remove("p")
    assert group.has_all_members_joined


def test_member_matches_compares_names_order_and_bytes() -> None:
    m = member("a", [("range", b"x"), ("rr", b"y")])
    assert m.matches([("range", b"x"), ("rr", b"y")])
    assert not m.matches([("rr", b"y"), ("range", b"x")])
    assert not m.matches([("range", b"x"), ("rr", b"z")])
    assert not m.matches([("range", b"x")])


@pytest.mark.parametrize(
    "group_id,hash_code,partition",
    [
        # Values printed by Java's String.hashCode and Kafka's Utils.abs(..) % 50.
        ("hello", 99162322, 22),
        ("polygenelubricants", -2147483648, 0),
        ("my-group", -1906497762, 12),
        ("test-group", 627841412, 12),
        ("\U0001f600", 1772899, 49),
        ("groupé", -1237460406, 6),
        ("console-consumer-12345", 158455506, 6),
        ("", 0, 0),
    ],
)
def test_partition_for_matches_java(group_id: str, hash_code: int, partition: int) -> None:
    assert java_string_hash(group_id) == hash_code
    assert partition_for(group_id, 50) == partition


def test_subscription_topics_parses_consumer_protocol_and_rejects_garbage() -> None:
    assert subscription_topics(encode_subscription(["a", "bb"], b"user")) == {"a", "bb"}
    assert subscription_topics(b"\x00") is None
    assert subscription_topics(b"\x00\x00\x00\x00\x00\x05\x00\x01a") is None


def test_records_round_trip_through_kafkas_encoding() -> None:
    records: list[Record] = [
        OffsetCommitRecord("g", "t", 3, OffsetAndMetadata(42, 7, "meta", 1000)),
        OffsetCommitRecord("g", "t", 4, OffsetAndMetadata(5, -1, "", 1000, expire_timestamp=9000)),
        OffsetCommitRecord("g", "t", 3, None),
        GroupMetadataRecord(
            "g",
            GroupMetadataValue(
                "consumer",
                4,
                "range",
                "m1",
                1234,
                [MemberRecord("m1", "i1", "c", "/h", 300000, 10000, b"sub", b"asg")],
            ),
        ),
        GroupMetadataRecord("g", GroupMetadataValue("consumer", 5, None, None, -1, [])),
        GroupMetadataRecord("g", None),
    ]
    for record in records:
        key, value = encode_record(record)
        assert decode_record(key, value) == record
    # Kafka's layout: key version 1 then group, topic, partition.
    key, value = encode_record(records[0])
    assert key == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    assert value is not None and value[:2] == b"\x00\x03"


def test_unknown_record_versions_are_skipped() -> None:
    assert decode_record(b"\x00\x09\x00\x01g", b"") is None
    assert decode_record(b"\x00", None) is None


def test_group_and_offset_configs_copy_kafka_settings_from_the_broker_config() -> None:
    from broker.config.broker_config import BrokerConfig
    from broker.group import GroupConfig, OffsetConfig

    cfg = BrokerConfig.model_validate(
        {
            "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.num.partitions": 7,
            "offsets.commit.timeout.ms": 1234,
        }
    )
    group_config = GroupConfig.from_broker_config(cfg)
    offset_config = OffsetConfig.from_broker_config(cfg)
    assert group_config.group_initial_rebalance_delay_ms == 0
    assert group_config.group_min_session_timeout_ms == 6000
    assert offset_config.offsets_topic_num_partitions == 7
    assert offset_config.offsets_commit_timeout_ms == 1234
    assert offset_config.offsets_commit_required_acks == -1
    assert offset_config.offsets_retention_ms == 10080 * 60_000
    with pytest.raises(ValueError):
        GroupConfig(group_min_session_timeout_ms=10, group_max_session_timeout_ms=5)
    with pytest.raises(ValueError):
        OffsetConfig(offsets_topic_num_partitions=0)
