"""A follower's truncation after a leader change (KIP-101, KIP-279): OffsetForLeaderEpoch
rounds until the follower's log is a prefix of the leader's.

The case the simulator found (seed 9 with BUGGIFY's leader step-downs): leadership moved
between three replicas often enough that a follower and its new leader each had an epoch
the other never saw. One round cut too little; the follower's next fetch told the leader it
had everything below its log end, and the high watermark passed a record it did not have.
"""

from __future__ import annotations

from broker.replica.leader_epoch_cache import LeaderEpochCache
from broker.replica.replica_fetcher import truncation_offset


def _cache(*entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache()
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def _truncate(
    follower: LeaderEpochCache, follower_end: int, leader: LeaderEpochCache, leader_end: int
) -> tuple[int, int]:
    """Play OffsetForLeaderEpoch rounds as the fetcher does: (where it ends, rounds)."""
    rounds = 0
    while True:
        rounds += 1
        asked = follower.latest_epoch
        epoch, end = leader.end_offset_for(asked, leader_end)
        target, complete = truncation_offset(follower, follower_end, 0, asked, epoch, end)
        follower_end = min(follower_end, target)
        follower.truncate_from_end(follower_end)
        if complete:
            return follower_end, rounds


def test_epochs_each_side_never_saw_take_more_than_one_round() -> None:
    follower = _cache((8, 22), (9, 27), (11, 28))  # an epoch-9 record at 27
    leader = _cache((8, 22), (10, 28), (12, 30))  # an epoch-8 record at 27
    first = truncation_offset(follower, 28, 0, 11, *leader.end_offset_for(11, 31))
    assert first == (28, False)  # the end of our epoch 9, and ask again
    assert _truncate(follower, 28, leader, 31) == (27, 2)  # the epoch-9 record goes


def test_the_leaders_answer_for_our_own_epoch_ends_it_in_one_round() -> None:
    follower = _cache((3, 0), (5, 10))
    leader = _cache((3, 0), (5, 10), (6, 14))
    assert _truncate(follower, 17, leader, 20) == (14, 1)


def test_an_empty_epoch_at_our_log_end_is_dropped_and_not_asked_about_forever() -> None:
    follower = _cache((8, 22), (11, 28))  # led epoch 11 and appended nothing
    leader = _cache((8, 22), (10, 26), (12, 30))
    assert _truncate(follower, 28, leader, 31) == (26, 2)


def test_a_leader_that_cannot_tell_leaves_what_is_committed() -> None:
    assert truncation_offset(_cache((2, 0)), 40, 35, 2, -1, -1) == (35, True)
