"""The KIP-848 and share checkers of the simulation on hand-made histories: one history
that holds, one per violation, and the cases a correct broker produces that must not be
taken for violations (a zombie past its lease, a lock that expired, a new leader)."""

from __future__ import annotations

from dataclasses import replace

from simulation.clients.checks import (
    every_record_settled,
    never_accepted_twice,
    one_holder_at_a_time,
    one_owner_at_a_time,
    read_committed_share_never_sees_aborted,
    within_delivery_limit,
)
from simulation.clients.client_history import (
    ACCEPT,
    REJECT,
    RELEASE,
    Acknowledgement,
    Acquisition,
    GroupEvents,
    Owned,
    ShareEvents,
    lease_end,
)

P = ("t", 0)


def _owned(member: str, epoch: int, at_s: float, *parts: tuple[str, int], why: str = "") -> Owned:
    return Owned("g", member, member, epoch, parts, at_s, why or "assigned")


def _groups(*owned: Owned, beats: dict[str, list[float]] | None = None) -> GroupEvents:
    events = GroupEvents(session_timeout_s=10.0)
    events.owned.extend(owned)
    for member, sends in (beats or {}).items():
        events.heartbeats_ok[member] = sends
    return events


BEATS = {"a": [0.0, 3.0, 6.0, 9.0], "b": [9.5, 12.0, 15.0]}


def test_the_lease_ends_a_session_after_the_last_heartbeat_of_an_unbroken_run() -> None:
    assert lease_end([0.0, 3.0, 6.0], 1.0, 10.0) == 16.0
    assert lease_end([0.0, 3.0, 20.0], 1.0, 10.0) == 13.0  # a gap of 17 s may have expired it
    assert lease_end([5.0], 1.0, 10.0) == 1.0  # nothing proves it a member after 1 s


def test_a_partition_handed_on_after_its_revocation_holds() -> None:
    found = one_owner_at_a_time(
        _groups(
            _owned("a", 1, 0.1, P),
            _owned("a", 1, 9.1, why="revoked"),
            _owned("b", 2, 12.1, P),
            beats=BEATS,
        )
    )
    assert found.held, found.detail


def test_a_zombie_past_its_lease_is_not_an_owner() -> None:
    # a froze after its heartbeat of 3 s; b got the partition after a's session expired;
    # a learned it was fenced long after
    found = one_owner_at_a_time(
        _groups(
            _owned("a", 1, 0.1, P),
            _owned("b", 3, 14.0, P),
            _owned("a", 1, 40.0, why="fenced"),
            beats={"a": [0.0, 3.0], "b": [13.9]},
        )
    )
    assert found.held, found.detail


def test_a_partition_given_before_its_owner_revoked_it_is_caught_with_its_events() -> None:
    found = one_owner_at_a_time(
        _groups(
            _owned("a", 1, 0.1, P),
            _owned("b", 2, 5.0, P),
            _owned("a", 1, 7.0, why="revoked"),
            beats=BEATS,
        )
    )
    assert not found.held
    assert "1 overlapping" in found.detail
    assert "a epoch 1 assigned" in found.detail and "b epoch 2 assigned" in found.detail
    assert "a epoch 1 revoked" in found.detail


def test_two_owners_at_one_member_epoch_are_caught() -> None:
    found = one_owner_at_a_time(
        _groups(
            _owned("a", 2, 0.1, P),
            _owned("a", 2, 1.0, why="revoked"),
            _owned("b", 2, 20.0, P),
            beats=BEATS,
        )
    )
    assert not found.held and "1 owned twice at one epoch" in found.detail


# -- share groups ------------------------------------------------------------------------


def _acq(
    member: str,
    at_s: float,
    offset: int = 7,
    *,
    count: int = 1,
    broker: int = 0,
    conn: int = 1,
    value: bytes = b"v",
    group: str = "s",
) -> Acquisition:
    return Acquisition(
        group, member, member, "t", 0, offset, count, broker, (member, conn), at_s - 0.01,
        at_s, 10.0, value,
    )  # fmt: skip


def _ack(
    member: str,
    at_s: float,
    kind: int = ACCEPT,
    offset: int = 7,
    ok: bool = True,
    error: str = "invalid_record_state",
) -> Acknowledgement:
    return Acknowledgement("s", member, member, "t", 0, offset, kind, at_s, ok, "" if ok else error)


def _share(*events: Acquisition | Acknowledgement) -> ShareEvents:
    share = ShareEvents(lock_duration_s=10.0, session_timeout_s=10.0, delivery_limit=5)
    for e in events:
        if isinstance(e, Acquisition):
            share.acquisitions.append(e)
        else:
            share.acknowledgements.append(e)
    for member in ("a", "b", "c"):
        share.opened[(member, 1)] = 0.0
        share.opened[(member, 2)] = 30.0
        share.heartbeats_ok[member] = [float(t) for t in range(0, 60, 3)]
    share.reads["s"] = "t"
    return share


def test_a_share_history_that_keeps_every_promise_holds() -> None:
    share = _share(
        _acq("a", 1.0),
        _ack("a", 2.0, RELEASE),
        _acq("b", 3.0, count=2),
        _ack("b", 4.0, ACCEPT),
        _acq("a", 5.0, offset=8),
        _ack("a", 6.0, REJECT, offset=8),
    )
    final = {"t": [(0, 7, b"v"), (0, 8, b"w")]}
    for found in (
        one_holder_at_a_time(share),
        within_delivery_limit(share),
        never_accepted_twice(share),
        read_committed_share_never_sees_aborted(share, {b"aborted"}),
        every_record_settled(share, final),
    ):
        assert found.held, (found.name, found.detail)


def test_a_record_given_to_another_while_locked_is_caught_with_its_events() -> None:
    found = one_holder_at_a_time(_share(_acq("a", 1.0), _acq("b", 4.0, count=2)))
    assert not found.held
    assert "s t-0@7" in found.detail and "a acquired (delivery 1)" in found.detail
    assert "b acquired (delivery 2)" in found.detail


def test_a_record_given_again_after_its_lock_expired_is_no_clash() -> None:
    found = one_holder_at_a_time(_share(_acq("a", 1.0), _acq("b", 11.5, count=2)))
    assert found.held, found.detail


def test_a_record_given_again_by_a_new_leader_is_no_clash() -> None:
    # b's connection opened after a acquired: the broker may have restarted between
    found = one_holder_at_a_time(_share(_acq("a", 25.0), _acq("b", 31.0, count=2, conn=2)))
    assert found.held, found.detail
    # another broker answered b: a new leader, which rightly forgot a's lock
    found = one_holder_at_a_time(_share(_acq("a", 1.0), _acq("b", 4.0, count=2, broker=1)))
    assert found.held, found.detail


def test_a_record_given_again_after_its_leader_lost_and_won_back_the_partition_is_no_clash() -> (
    None
):
    # seed 27 of the all-faults campaign: one broker, one connection, but the partition's
    # leader epoch moved between a's fetch and b's answer (its leader stepped down and was
    # elected again): the share partition was loaded afresh, a's acquisition gone with it
    a = replace(_acq("a", 1.0), sent_epoch=4, received_epoch=4)
    again = replace(_acq("a", 4.0), sent_epoch=5, received_epoch=6)
    assert one_holder_at_a_time(_share(a, again)).held
    # the same epoch throughout: one share partition gave it twice
    again = replace(_acq("a", 4.0), sent_epoch=4, received_epoch=4)
    found = one_holder_at_a_time(_share(a, again))
    assert not found.held and "1 held by two at once" in found.detail


def test_a_lock_timed_by_a_clock_running_fast_may_end_early() -> None:
    # campaign seed 6: the leader's clock drifted +3% (the skew fault, up to 5%), its 10 s
    # lock ran out ~0.3 s early and the record went to the next fetch
    assert one_holder_at_a_time(_share(_acq("a", 1.0), _acq("b", 10.6, count=2))).held
    assert not one_holder_at_a_time(_share(_acq("a", 1.0), _acq("b", 10.3, count=2))).held


def test_a_delivery_past_the_limit_is_caught() -> None:
    found = within_delivery_limit(_share(_acq("a", 1.0, count=6)))
    assert not found.held and "1 past the limit" in found.detail


def test_a_record_accepted_twice_is_caught() -> None:
    found = never_accepted_twice(
        _share(_acq("a", 1.0), _ack("a", 2.0), _acq("b", 3.0, count=2), _ack("b", 4.0))
    )
    assert not found.held and "b ACCEPT (ok)" in found.detail


def test_a_refused_accept_is_not_an_accept() -> None:
    found = never_accepted_twice(_share(_ack("a", 2.0, ok=False), _ack("b", 4.0)))
    assert found.held, found.detail


def test_an_aborted_record_given_to_a_read_committed_share_group_is_caught() -> None:
    share = _share(_acq("a", 1.0, value=b"aborted:x", group="rc"))
    share.read_committed.add("rc")
    found = read_committed_share_never_sees_aborted(share, {b"aborted:x"})
    assert not found.held and "rc t-0@7" in found.detail


def test_a_committed_record_nobody_settled_is_caught() -> None:
    share = _share(_acq("a", 1.0), _ack("a", 2.0, RELEASE))
    found = every_record_settled(share, {"t": [(0, 7, b"v")]})
    assert not found.held and "a RELEASE (ok)" in found.detail


def test_an_accept_that_failed_on_its_state_write_may_have_settled_the_record() -> None:
    """Its write may have been applied (seed 118 of the all-faults campaign): like a lost
    answer it counts; one refused before any write does not."""
    for error, settled in (("not_leader_or_follower", True), ("invalid_record_state", False)):
        share = _share(_acq("a", 1.0), _ack("a", 2.0, ok=False, error=error))
        assert every_record_settled(share, {"t": [(0, 7, b"v")]}).held is settled, error


def test_a_record_delivered_up_to_the_limit_is_settled_as_archived() -> None:
    share = _share(_acq("a", 1.0, count=5), _ack("a", 2.0, RELEASE))
    found = every_record_settled(share, {"t": [(0, 7, b"v")]})
    assert found.held, found.detail
