"""The share-group coordinator on the manual clock: join, the simple assignment where
several members share a partition, epochs and their errors, leave, session expiry."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.group.share import (
    ShareGroupConfig,
    ShareGroupCoordinator,
    ShareGroupHeartbeatParams,
    ShareGroupState,
)
from broker.group.share.simple_assignor import assign
from purgatory import ManualClock, SystemTimer


class _Harness:
    def __init__(self, partitions: int = 1, **config: Any) -> None:
        self.clock = ManualClock()
        self.timer = SystemTimer(self.clock)
        self.metadata = ClusterMetadata()
        self.metadata.register_broker(0, "127.0.0.1", 9092)
        self.topic = self.metadata.create_topic("t", partitions, 1, {})
        self.coordinator = ShareGroupCoordinator(
            ShareGroupConfig(**config),
            self.timer,
            self.metadata,
            other_group_exists=lambda group_id: group_id == "classic",
        )

    def beat(
        self, member: str, epoch: int, topics: tuple[str, ...] | None = None, **kw: Any
    ) -> Any:
        return self.coordinator.heartbeat(
            ShareGroupHeartbeatParams(
                group_id=kw.pop("group_id", "g"),
                member_id=member,
                member_epoch=epoch,
                subscribed_topic_names=topics,
                **kw,
            )
        )


def test_members_join_and_share_a_single_partition() -> None:
    h = _Harness(partitions=1)
    first = h.beat("m1", 0, ("t",))
    assert first.error is ErrorCode.none and first.member_epoch == 1
    assert first.assignment == {h.topic.topic_id: frozenset({0})}
    assert first.heartbeat_interval_ms == 5000
    second = h.beat("m2", 0, ("t",))
    assert second.assignment == {h.topic.topic_id: frozenset({0})}
    group = h.coordinator.group("g")
    assert group is not None and group.state is ShareGroupState.STABLE
    # m1 is behind the group's epoch: its next heartbeat moves it on, same partition
    again = h.beat("m1", first.member_epoch)
    assert again.error is ErrorCode.none and again.member_epoch == second.member_epoch
    assert again.assignment is None  # unchanged, light heartbeat: not sent


def test_partitions_are_spread_when_there_are_more_partitions_than_members() -> None:
    h = _Harness(partitions=4)
    h.beat("a", 0, ("t",))
    h.beat("b", 0, ("t",))
    a = h.beat("a", h.coordinator.group("g").members["a"].member_epoch)  # type: ignore[union-attr]
    b = h.coordinator.group("g").members["b"]  # type: ignore[union-attr]
    assert a.assignment == {h.topic.topic_id: frozenset({0, 2})}
    assert b.assignment == {h.topic.topic_id: frozenset({1, 3})}


def test_simple_assignor_gives_every_member_a_partition() -> None:
    topic = h_topic = __import__("uuid").uuid4()
    result = assign({m: frozenset({topic}) for m in "abcde"}, {h_topic: 2})
    assert [sorted(result[m][topic]) for m in "abcde"] == [[0], [1], [0], [1], [0]]


def test_epoch_errors_and_bad_requests() -> None:
    h = _Harness(group_share_max_size=1)
    joined = h.beat("m1", 0, ("t",))
    assert h.beat("m1", joined.member_epoch + 1).error is ErrorCode.fenced_member_epoch
    assert h.beat("ghost", 3).error is ErrorCode.unknown_member_id
    assert h.beat("m2", 0, ("t",)).error is ErrorCode.group_max_size_reached
    assert h.beat("m2", 0).error is ErrorCode.invalid_request  # no topics on join
    assert h.beat("", 0, ("t",)).error is ErrorCode.invalid_request
    assert h.beat("m3", -2).error is ErrorCode.invalid_request
    assert h.beat("m1", 0, ("t",), group_id="").error is ErrorCode.invalid_request
    assert h.beat("m1", 0, ("t",), group_id="classic").error is ErrorCode.group_id_not_found
    assert h.beat("ghost", -1).error is ErrorCode.unknown_member_id
    assert h.beat("m1", 0, ("t",), rack_id="").error is ErrorCode.invalid_request


def test_the_previous_member_epoch_is_accepted() -> None:
    h = _Harness()
    first = h.beat("m1", 0, ("t",))
    second = h.beat("m2", 0, ("t",))
    moved = h.beat("m1", first.member_epoch)
    assert moved.member_epoch == second.member_epoch > first.member_epoch
    # the answer was lost: m1 heartbeats again with its previous epoch
    again = h.beat("m1", first.member_epoch)
    assert again.error is ErrorCode.none and again.member_epoch == second.member_epoch
    h.beat("m3", 0, ("t",))
    latest = h.beat("m1", again.member_epoch)
    assert latest.member_epoch > again.member_epoch
    assert h.beat("m1", first.member_epoch).error is ErrorCode.fenced_member_epoch


def test_leave_and_session_expiry() -> None:
    h = _Harness(partitions=1)
    m1 = h.beat("m1", 0, ("t",))
    h.beat("m2", 0, ("t",))
    left = h.beat("m1", -1)
    assert left.error is ErrorCode.none and left.member_epoch == -1
    assert h.beat("m1", m1.member_epoch).error is ErrorCode.unknown_member_id
    assert h.coordinator.delete_group("g") is ErrorCode.non_empty_group
    h.clock.advance(44_999)
    h.timer.advance_clock()
    group = h.coordinator.group("g")
    assert group is not None and "m2" in group.members
    h.clock.advance(1)
    h.timer.advance_clock()
    assert not group.members and group.state is ShareGroupState.EMPTY
    assert h.coordinator.delete_group("g") is ErrorCode.none


def test_an_unloaded_group_goes_with_its_timers_and_fences_nobody() -> None:
    # campaign seed 57: the coordinator moved away; the session timer left on the old one
    # expired a live member and released what it held on that broker's share partitions
    expired: list[tuple[str, str]] = []
    h = _Harness(partitions=1)
    h.coordinator = ShareGroupCoordinator(
        ShareGroupConfig(),
        h.timer,
        h.metadata,
        on_member_expired=lambda group_id, member_id: expired.append((group_id, member_id)),
        partition_for=lambda group_id: {"g": 3, "other": 4}[group_id],
    )
    h.beat("m1", 0, ("t",))
    h.beat("m2", 0, ("t",), group_id="other")
    h.coordinator.on_partition_unloaded(3)
    assert h.coordinator.group("g") is None and h.coordinator.group("other") is not None
    h.clock.advance(45_000)
    h.timer.advance_clock()
    assert expired == [("other", "m2")]


def test_a_topic_created_later_is_assigned_on_the_next_heartbeat() -> None:
    h = _Harness(partitions=1)
    joined = h.beat("m1", 0, ("t", "later"))
    assert set(joined.assignment) == {h.topic.topic_id}
    later = h.metadata.create_topic("later", 2, 1, {})
    beat = h.beat("m1", joined.member_epoch)
    assert beat.member_epoch > joined.member_epoch
    assert beat.assignment == {h.topic.topic_id: frozenset({0}), later.topic_id: frozenset({0, 1})}


def test_alter_offsets_makes_an_empty_share_group_but_not_over_another_type() -> None:
    """AlterShareGroupOffsets (Kafka 4.2) makes a group before its first use; a group id
    of another type stays that type's."""
    h = _Harness()
    made = h.coordinator.get_or_create_group("new")
    assert made is not None and not made.members
    assert h.coordinator.group("new") is made
    assert h.coordinator.get_or_create_group("new") is made
    assert h.coordinator.get_or_create_group("classic") is None
    assert h.coordinator.group("classic") is None
