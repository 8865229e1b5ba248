"""The share session cache: epochs, the limit, and the epoch after Integer.MAX_VALUE."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.share.share_session import FINAL_EPOCH, ShareSessionCache, next_epoch


def test_next_epoch_wraps_to_one() -> None:
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1


def test_sessions_by_group_and_member_within_the_limit() -> None:
    cache = ShareSessionCache(1)
    assert cache.check_epoch(("g", "m"), 1) == (ErrorCode.share_session_not_found, None)
    session = cache.maybe_create(("g", "m"), {}, 5)
    assert session is not None and session.epoch == 1 and len(cache) == 1
    assert cache.maybe_create(("g", "other"), {}, 5) is None
    assert cache.maybe_create(("g", "m"), {}, 6) is not None  # the member's own: replaced
    assert cache.check_epoch(("g", "m"), 2)[0] is ErrorCode.invalid_share_session_epoch
    assert cache.check_epoch(("g", "m"), 1)[0] is ErrorCode.none
    assert cache.check_epoch(("g", "m"), FINAL_EPOCH)[0] is ErrorCode.none
    assert cache.remove(("g", "m")) is not None and len(cache) == 0


def test_a_closed_connection_takes_the_sessions_it_opened() -> None:
    cache = ShareSessionCache(3)
    assert cache.maybe_create(("g", "m1"), {}, 0, "conn-1") is not None
    assert cache.maybe_create(("g", "m2"), {}, 0, "conn-1") is not None
    assert cache.maybe_create(("g", "m3"), {}, 0, "conn-2") is not None
    # m2 reopens its session on another connection: conn-1 no longer has it
    assert cache.maybe_create(("g", "m2"), {}, 0, "conn-2") is not None
    assert cache.remove_connection("conn-1") == [("g", "m1")]
    assert cache.get(("g", "m1")) is None and len(cache) == 2
    assert sorted(cache.remove_connection("conn-2")) == [("g", "m2"), ("g", "m3")]
    assert len(cache) == 0 and cache.remove_connection("conn-2") == []
