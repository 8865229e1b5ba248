"""KIP-848 static membership (``group.instance.id``) on the manual clock, Kafka's rules:
epoch -2 keeps the assignment for the session timeout, a replacement within it takes the
partitions, UNRELEASED_INSTANCE_ID / FENCED_INSTANCE_ID / UNKNOWN_MEMBER_ID as Kafka
answers them (with Kafka's messages), and a static member that never comes back is fenced
at its session timeout."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.group.consumer import ConsumerGroupHeartbeatParams
from tests.unit.test_consumer_group_coordinator import SESSION_MS, World

E = ErrorCode


def test_a_second_claim_of_a_held_instance_id_is_unreleased_instance_id() -> None:
    w = World()
    a = w.member("a", instance_id="i")
    w.converge()
    r = w.member("b", instance_id="i").send()
    assert r.error is E.unreleased_instance_id
    assert r.error_message == (
        "Static member b with instance id i cannot join the group because the instance id "
        "is owned by a member."
    )
    assert set(w.group.members) == {"a"} and a.count() == 6


def test_a_replacement_within_the_session_keeps_the_partitions_and_epochs_move_on() -> None:
    w = World()
    a, b = w.member("a", instance_id="ia"), w.member("b")
    w.converge()
    kept, epoch = a.owned_set(), w.group.group_epoch
    assert a.send(member_epoch=-2).member_epoch == -2
    a.active, a.owned = False, {}
    w.h.advance(SESSION_MS - 500)  # within the session
    b.heartbeat()
    again = w.member("a2", instance_id="ia")
    r = again.heartbeat()
    assert r.error is E.none
    w.converge()
    assert again.owned_set() == kept
    assert w.group.group_epoch == epoch  # no rebalance: same subscription, same target
    assert set(w.group.members) == {"a2", "b"}
    # The old member id is fenced by the new one, for a heartbeat and for a leave.
    for epoch_sent in (again.epoch, -1):
        r = w.coord.consumer_group_heartbeat(
            ConsumerGroupHeartbeatParams(
                group_id="g", member_id="a", member_epoch=epoch_sent, instance_id="ia"
            )
        )
        assert r.error is E.fenced_instance_id
        assert r.error_message == "Static member a with instance id ia was fenced by member a2."
    # The replaced member's session timeout went with it.
    for _ in range(SESSION_MS // 500 + 2):
        w.h.advance(500)
        w.round()
    assert set(w.group.members) == {"a2", "b"}


def test_a_static_member_that_does_not_come_back_is_fenced_at_its_session_timeout() -> None:
    w = World()
    a, b = w.member("a", instance_id="ia"), w.member("b")
    w.converge()
    epoch = w.group.group_epoch
    assert a.send(member_epoch=-2).error is E.none
    a.active, a.owned = False, {}
    for _ in range(SESSION_MS // 500 + 2):  # b goes on heartbeating; a's session runs out
        w.h.advance(500)
        b.heartbeat()
    assert set(w.group.members) == {"b"}
    assert w.group.group_epoch == epoch + 1
    w.converge()
    assert b.count() == 6
    # Its instance id is free again.
    assert w.member("a3", instance_id="ia").heartbeat().error is E.none


def test_unknown_instance_id_and_static_leave_with_minus_one() -> None:
    w = World()
    a, b = w.member("a", instance_id="ia"), w.member("b")
    w.converge()
    r = w.coord.consumer_group_heartbeat(
        ConsumerGroupHeartbeatParams(group_id="g", member_id="x", member_epoch=1, instance_id="zz")
    )
    assert (r.error, r.error_message) == (E.unknown_member_id, "Instance id zz is unknown.")
    # -2 needs an instance id.
    r = w.coord.consumer_group_heartbeat(
        ConsumerGroupHeartbeatParams(group_id="g", member_id="b", member_epoch=-2)
    )
    assert r.error is E.invalid_request
    # A static member leaving with -1 leaves for good: its partitions move at once.
    assert a.send(member_epoch=-1).error is E.none
    a.active, a.owned = False, {}
    w.converge()
    assert b.count() == 6 and set(w.group.members) == {"b"}
