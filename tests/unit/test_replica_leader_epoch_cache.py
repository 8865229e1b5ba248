"""LeaderEpochCache: the answers OffsetForLeaderEpoch gives, and truncation (KIP-101)."""

from __future__ import annotations

from broker.replica.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochCache,
)


def _cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache()
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_latest_epoch_ends_at_the_log_end() -> None:
    cache = _cache((0, 0), (2, 10))
    assert cache.end_offset_for(2, 25) == (2, 25)
    assert cache.latest_epoch == 2
    assert cache.latest_start_offset == 10


def test_an_older_epoch_ends_where_the_next_one_starts() -> None:
    cache = _cache((0, 0), (2, 10), (5, 30))
    assert cache.end_offset_for(0, 40) == (0, 10)
    assert cache.end_offset_for(2, 40) == (2, 30)


def test_an_epoch_the_leader_never_had_answers_with_the_one_before_it() -> None:
    # The follower asks about epoch 3; the leader went from 2 straight to 5.
    cache = _cache((0, 0), (2, 10), (5, 30))
    assert cache.end_offset_for(3, 40) == (2, 30)


def test_an_epoch_before_the_first_answers_with_the_first_start() -> None:
    cache = _cache((4, 100))
    cache.assign(5, 120)
    assert cache.end_offset_for(1, 130) == (1, 100)


def test_unknown_and_future_epochs_are_undefined() -> None:
    cache = _cache((0, 0), (1, 5))
    undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 9) == undefined
    assert cache.end_offset_for(7, 9) == undefined
    assert LeaderEpochCache().end_offset_for(0, 9) == undefined


def test_assign_ignores_older_epochs_and_drops_empty_ones() -> None:
    cache = _cache((0, 0), (1, 5))
    cache.assign(0, 9)  # an older epoch's batch fetched late changes nothing
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(0, 0), (1, 5)]
    cache.assign(3, 5)  # epoch 1 wrote nothing before epoch 3 began at the same offset
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(0, 0), (3, 5)]


def test_truncation_drops_epochs_that_start_at_or_after_the_new_end() -> None:
    cache = _cache((0, 0), (1, 5), (2, 8))
    cache.truncate_from_end(8)
    assert cache.latest_epoch == 1
    cache.truncate_from_end(3)
    assert cache.latest_epoch == 0
    cache.clear()
    assert cache.latest_epoch == UNDEFINED_EPOCH
