"""Incremental fetch sessions (KIP-227), the broker's side, on the manual clock.

The Fetch handler is driven through one broker's dispatcher (``build_broker`` via
``tests/helpers/dispatch_node.py``, no socket): the broker leads a topic of three
partitions, replicated on broker 1, which does not run — a test that plays the follower
sends Fetch requests with replica id 1, as broker 1's fetcher would. The session cache's
eviction rules are tested on the cache itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import random
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.replica.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from broker.replica.fetch_session import CachedPartition, FetchSession, FetchSessionCache
from broker.server.purgatories import PurgatoryName
from protocol.builders import request_builder
from protocol.client import ClientConnection
from protocol.record_builder import build_record_batch
from tests.helpers.dispatch_node import Node, dispatch_node

FETCH = 1
TOPIC = "sessions"
MAX_WAIT_MS = 500
CONSUMER, FOLLOWER = -1, 1


@pytest.fixture
async def node() -> AsyncIterator[Node]:
    node = dispatch_node()
    services = node.dispatcher.services
    await services.replica_manager.start()
    services.metadata.register_broker(1, "127.0.0.1", 9093)  # a follower that never runs
    services.metadata.create_topic(TOPIC, 3, 2, {}, assignment=[[0, 1]] * 3)
    yield node
    await services.replica_manager.stop()


def fetch_request(
    offsets: dict[int, int] | None = None,
    *,
    session_id: int = INVALID_SESSION_ID,
    epoch: int = FINAL_EPOCH,
    forget: Iterable[int] = (),
    replica_id: int = CONSUMER,
    max_wait_ms: int = MAX_WAIT_MS,
    version: int = 12,
    topic_id: uuid.UUID | None = None,
    unknown_topic_id: uuid.UUID | None = None,
) -> Any:
    """A Fetch of ``TOPIC``'s partitions at ``offsets`` (partition -> fetch offset)."""
    b = request_builder(FETCH, version)
    by_id = version >= 13
    name: dict[str, Any] = {"topic_id": topic_id} if by_id else {"topic": TOPIC}
    partitions = tuple(
        b.FetchPartition(
            partition=p,
            current_leader_epoch=-1,
            fetch_offset=offset,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        for p, offset in (offsets or {}).items()
    )
    forgotten = tuple(forget)
    topics = [b.FetchTopic(**name, partitions=partitions)] if partitions else []
    if unknown_topic_id is not None:  # partition 0 of a topic id the cluster does not know
        topics.append(
            b.FetchTopic(
                topic_id=unknown_topic_id,
                partitions=(
                    b.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024),
                ),
            )
        )
    return b.FetchRequest(
        replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=tuple(topics),
        forgotten_topics_data=(b.ForgottenTopic(**name, partitions=forgotten),)
        if forgotten
        else (),
        rack_id="",
    )


def fetch(node: Node, request: Any, version: int = 12) -> Any:
    """Send a Fetch that must be answered at once; its response."""
    in_flight = node.send(FETCH, version, request)
    assert in_flight.ready, "the fetch was parked"
    return node.answer(in_flight)


def answered(response: Any) -> dict[int, Any]:
    """partition -> partition data, of ``TOPIC``."""
    found: dict[int, Any] = {}
    for topic in response.responses:
        for p in topic.partitions:
            found[int(p.partition_index)] = p
    return found


def append(node: Node, partition: int, records: int = 1) -> None:
    manager = node.dispatcher.services.replica_manager
    batch = build_record_batch([(None, b"v", ())] * records, timestamp_ms=0)
    assert manager.append_to_leader((TOPIC, partition), batch, 1).error is ErrorCode.none


def cache(node: Node) -> FetchSessionCache:
    return node.dispatcher.services.fetch_manager.cache


def session(node: Node, session_id: int) -> FetchSession:
    found = cache(node).get(session_id)
    assert found is not None
    return found


def open_session(
    node: Node, replica_id: int = CONSUMER, offsets: dict[int, int] | None = None
) -> int:
    request = fetch_request(
        offsets or {0: 0, 1: 0, 2: 0}, epoch=INITIAL_EPOCH, replica_id=replica_id, max_wait_ms=0
    )
    response = fetch(node, request)
    assert response.error_code == ErrorCode.none
    assert response.session_id != INVALID_SESSION_ID
    return int(response.session_id)


# -- the sessionless path ----------------------------------------------------------------


async def test_a_sessionless_fetch_is_answered_whole_and_opens_no_session(node: Node) -> None:
    response = fetch(node, fetch_request({0: 0, 1: 0, 2: 0}, max_wait_ms=0))
    assert response.error_code == ErrorCode.none and response.session_id == 0
    assert sorted(answered(response)) == [0, 1, 2]
    assert cache(node).size == 0


async def test_v4_to_v6_requests_are_sessionless(node: Node) -> None:
    b = request_builder(FETCH, 4)
    request = b.FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=(
            b.FetchTopic(
                topic=TOPIC,
                partitions=(
                    b.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024),
                ),
            ),
        ),
    )
    response = fetch(node, request, version=4)
    assert list(answered(response)) == [0]
    assert cache(node).size == 0


# -- full and incremental fetches --------------------------------------------------------


async def test_a_full_fetch_opens_a_session_over_every_partition_it_names(node: Node) -> None:
    request = fetch_request({0: 0, 1: 0, 2: 0}, epoch=INITIAL_EPOCH, max_wait_ms=0)
    response = fetch(node, request)
    assert sorted(answered(response)) == [0, 1, 2]
    opened = session(node, int(response.session_id))
    assert 0 < opened.id < 2**31 - 1
    assert opened.epoch == 1 and not opened.privileged and not opened.uses_topic_ids
    assert sorted(opened.partitions) == [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]
    assert opened.creation_ms == opened.last_used_ms == node.clock.now_ms()
    assert cache(node).total_partitions == 3


async def test_an_incremental_fetch_answers_only_the_partitions_with_news(node: Node) -> None:
    session_id = open_session(node)
    # Nothing changed: the answer is empty, yet every partition was read.
    response = fetch(node, fetch_request(session_id=session_id, epoch=1, max_wait_ms=0))
    assert response.error_code == ErrorCode.none and response.session_id == session_id
    assert answered(response) == {}
    # A consumer sees partition 1's record once the follower has it: partition 1 alone.
    append(node, 1)
    follower_offsets = {0: 0, 1: 1, 2: 0}
    fetch(node, fetch_request(follower_offsets, replica_id=FOLLOWER, max_wait_ms=0))
    response = fetch(node, fetch_request(session_id=session_id, epoch=2, max_wait_ms=0))
    (only,) = answered(response).items()
    assert only[0] == 1 and only[1].records and only[1].high_watermark == 1
    # The consumer moves its offset on (named, since it changed): nothing new again.
    response = fetch(node, fetch_request({1: 1}, session_id=session_id, epoch=3, max_wait_ms=0))
    assert answered(response) == {}
    assert session(node, session_id).partitions[(TOPIC, 1)].fetch_offset == 1
    assert session(node, session_id).epoch == 4


async def test_a_follower_session_sends_a_changed_high_watermark_without_records(
    node: Node,
) -> None:
    session_id = open_session(node, FOLLOWER)
    assert session(node, session_id).privileged
    append(node, 0, records=2)
    # The follower reads to the log end: partition 0's records, HW still 0.
    response = fetch(
        node, fetch_request(session_id=session_id, epoch=1, replica_id=FOLLOWER, max_wait_ms=0)
    )
    (only,) = answered(response).items()
    assert only[0] == 0 and only[1].records and only[1].high_watermark == 0
    # Fetching from 2 tells the leader the follower has both: the HW moves to 2 after
    # this fetch was read, so the next one carries it, alone and without records.
    request = fetch_request(
        {0: 2}, session_id=session_id, epoch=2, replica_id=FOLLOWER, max_wait_ms=0
    )
    assert answered(fetch(node, request)) == {}
    response = fetch(
        node, fetch_request(session_id=session_id, epoch=3, replica_id=FOLLOWER, max_wait_ms=0)
    )
    (only,) = answered(response).items()
    assert only[0] == 0 and not only[1].records and only[1].high_watermark == 2
    response = fetch(
        node, fetch_request(session_id=session_id, epoch=4, replica_id=FOLLOWER, max_wait_ms=0)
    )
    assert answered(response) == {}


async def test_an_error_is_always_answered_and_the_partition_sent_again_after_it(
    node: Node,
) -> None:
    session_id = open_session(node)
    # A fetch offset beyond the log end: OFFSET_OUT_OF_RANGE, at every fetch.
    response = fetch(node, fetch_request({2: 5}, session_id=session_id, epoch=1, max_wait_ms=0))
    assert answered(response)[2].error_code == ErrorCode.offset_out_of_range
    response = fetch(node, fetch_request(session_id=session_id, epoch=2, max_wait_ms=0))
    assert answered(response)[2].error_code == ErrorCode.offset_out_of_range
    # Back in range: sent again (with its HW), though nothing else changed.
    response = fetch(node, fetch_request({2: 0}, session_id=session_id, epoch=3, max_wait_ms=0))
    assert answered(response)[2].error_code == ErrorCode.none
    response = fetch(node, fetch_request(session_id=session_id, epoch=4, max_wait_ms=0))
    assert answered(response) == {}


async def test_forgotten_partitions_leave_the_session_and_the_answers(node: Node) -> None:
    session_id = open_session(node)
    response = fetch(
        node, fetch_request(session_id=session_id, epoch=1, forget=[1, 2], max_wait_ms=0)
    )
    assert response.session_id == session_id
    assert list(session(node, session_id).partitions) == [(TOPIC, 0)]
    assert cache(node).total_partitions == 1
    append(node, 1)
    append(node, 2)
    response = fetch(
        node, fetch_request(session_id=session_id, epoch=2, replica_id=CONSUMER, max_wait_ms=0)
    )
    assert answered(response) == {}
    # Added back later: a new partition of the session, answered in full.
    response = fetch(node, fetch_request({2: 0}, session_id=session_id, epoch=3, max_wait_ms=0))
    assert sorted(answered(response)) == [2]
    assert sorted(session(node, session_id).partitions) == [(TOPIC, 0), (TOPIC, 2)]


async def test_forgetting_every_partition_closes_the_session(node: Node) -> None:
    session_id = open_session(node)
    response = fetch(
        node, fetch_request(session_id=session_id, epoch=1, forget=[0, 1, 2], max_wait_ms=0)
    )
    assert response.error_code == ErrorCode.none and response.session_id == INVALID_SESSION_ID
    assert cache(node).get(session_id) is None and cache(node).total_partitions == 0


async def test_a_final_fetch_closes_the_session_and_is_sessionless(node: Node) -> None:
    session_id = open_session(node)
    response = fetch(
        node, fetch_request({0: 0}, session_id=session_id, epoch=FINAL_EPOCH, max_wait_ms=0)
    )
    assert response.session_id == INVALID_SESSION_ID and sorted(answered(response)) == [0]
    assert cache(node).size == 0


async def test_a_full_fetch_naming_a_session_replaces_it(node: Node) -> None:
    old = open_session(node)
    response = fetch(
        node, fetch_request({0: 0}, session_id=old, epoch=INITIAL_EPOCH, max_wait_ms=0)
    )
    new = int(response.session_id)
    assert new not in (old, INVALID_SESSION_ID)
    assert cache(node).get(old) is None and list(session(node, new).partitions) == [(TOPIC, 0)]


# -- session errors ------------------------------------------------------------------------


async def test_an_unknown_session_is_fetch_session_id_not_found(node: Node) -> None:
    for session_id, epoch in ((12345, 1), (INVALID_SESSION_ID, 1)):
        response = fetch(node, fetch_request({0: 0}, session_id=session_id, epoch=epoch))
        assert response.error_code == ErrorCode.fetch_session_id_not_found
        assert response.session_id == INVALID_SESSION_ID and answered(response) == {}


async def test_a_wrong_epoch_is_invalid_fetch_session_epoch_and_changes_nothing(
    node: Node,
) -> None:
    session_id = open_session(node)
    for epoch in (2, 5, -2):
        response = fetch(node, fetch_request({0: 7}, session_id=session_id, epoch=epoch))
        assert response.error_code == ErrorCode.invalid_fetch_session_epoch
        assert response.session_id == INVALID_SESSION_ID and answered(response) == {}
    assert session(node, session_id).epoch == 1
    assert session(node, session_id).partitions[(TOPIC, 0)].fetch_offset == 0
    response = fetch(node, fetch_request(session_id=session_id, epoch=1, max_wait_ms=0))
    assert response.error_code == ErrorCode.none


async def test_topic_ids_and_names_do_not_mix_in_one_session(node: Node) -> None:
    topic_id = node.dispatcher.services.metadata.topics[TOPIC].topic_id
    by_name = open_session(node)
    response = fetch(
        node, fetch_request(session_id=by_name, epoch=1, version=13, topic_id=topic_id), 13
    )
    assert response.error_code == ErrorCode.fetch_session_topic_id_error
    request = fetch_request(
        {0: 0}, epoch=INITIAL_EPOCH, version=13, topic_id=topic_id, max_wait_ms=0
    )
    by_id = int(fetch(node, request, 13).session_id)
    assert session(node, by_id).uses_topic_ids
    response = fetch(node, fetch_request(session_id=by_id, epoch=1), 12)
    assert response.error_code == ErrorCode.fetch_session_topic_id_error


async def test_a_session_by_topic_id(node: Node) -> None:
    topic_id = node.dispatcher.services.metadata.topics[TOPIC].topic_id
    stranger = uuid.uuid4()
    request = fetch_request(
        {0: 0, 1: 0},
        epoch=INITIAL_EPOCH,
        version=13,
        topic_id=topic_id,
        max_wait_ms=0,
        unknown_topic_id=stranger,
    )
    response = fetch(node, request, 13)
    session_id = int(response.session_id)
    assert by_topic_id(response) == {
        (topic_id, 0): ErrorCode.none,
        (topic_id, 1): ErrorCode.none,
        (stranger, 0): ErrorCode.unknown_topic_id,
    }
    assert set(session(node, session_id).partitions) == {
        (topic_id, 0),
        (topic_id, 1),
        (stranger, 0),
    }
    append(node, 0)
    fetch(node, fetch_request({0: 1}, replica_id=FOLLOWER, max_wait_ms=0))
    incremental = fetch_request(
        session_id=session_id, epoch=1, version=13, topic_id=topic_id, max_wait_ms=0
    )
    # Partition 0's record, and the unknown topic id's error, which is always sent.
    assert by_topic_id(fetch(node, incremental, 13)) == {
        (topic_id, 0): ErrorCode.none,
        (stranger, 0): ErrorCode.unknown_topic_id,
    }
    forget = fetch_request(
        session_id=session_id, epoch=2, version=13, topic_id=topic_id, forget=[0, 1], max_wait_ms=0
    )
    assert by_topic_id(fetch(node, forget, 13)) == {(stranger, 0): ErrorCode.unknown_topic_id}
    assert set(session(node, session_id).partitions) == {(stranger, 0)}


def by_topic_id(response: Any) -> dict[tuple[uuid.UUID, int], ErrorCode]:
    return {
        (t.topic_id, int(p.partition_index)): p.error_code
        for t in response.responses
        for p in t.partitions
    }


# -- parked incremental fetches ------------------------------------------------------------


async def test_a_parked_incremental_fetch_completes_on_an_append_to_any_session_partition(
    node: Node,
) -> None:
    session_id = open_session(node, FOLLOWER)
    # Names partition 0 only, yet waits on all three and counts min_bytes over them all.
    in_flight = node.send(
        FETCH, 12, fetch_request({0: 0}, session_id=session_id, epoch=1, replica_id=FOLLOWER)
    )
    assert in_flight.future is not None and not in_flight.future.done()
    assert in_flight.ctx is not None and in_flight.ctx.timing.purgatory is PurgatoryName.FETCH
    (operation,) = node.broker.purgatories.fetch.delayed_operations()
    assert sorted(operation.watch_keys) == [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]
    append(node, 2)
    assert in_flight.future.done()
    response = node.answer(in_flight)
    (only,) = answered(response).items()
    assert only[0] == 2 and only[1].records
    assert response.session_id == session_id


async def test_a_parked_incremental_fetch_that_expires_answers_what_changed(node: Node) -> None:
    session_id = open_session(node)
    in_flight = node.send(FETCH, 12, fetch_request(session_id=session_id, epoch=1))
    assert in_flight.future is not None
    node.clock.advance(MAX_WAIT_MS)
    node.broker.purgatories.timers[PurgatoryName.FETCH].advance_clock()
    assert in_flight.future.done()
    response = node.answer(in_flight)
    assert response.error_code == ErrorCode.none and answered(response) == {}
    await asyncio.sleep(0)


async def test_a_second_request_of_a_session_makes_the_first_answer_a_stale_epoch(
    node: Node,
) -> None:
    session_id = open_session(node)
    first = node.send(FETCH, 12, fetch_request(session_id=session_id, epoch=1))
    second = node.send(FETCH, 12, fetch_request(session_id=session_id, epoch=2))
    assert first.future is not None and second.future is not None
    append(node, 0)
    follower = dataclasses.replace(node, client=ClientConnection("follower"))
    fetch(follower, fetch_request({0: 1}, replica_id=FOLLOWER, max_wait_ms=0))  # HW moves
    assert first.future.done() and second.future.done()
    stale = node.answer(first)
    assert stale.error_code == ErrorCode.invalid_fetch_session_epoch
    assert stale.session_id == session_id and answered(stale) == {}
    assert sorted(answered(node.answer(second))) == [0]


async def test_a_partition_answered_with_records_moves_to_the_end_of_the_session(
    node: Node,
) -> None:
    session_id = open_session(node, FOLLOWER)
    append(node, 0)
    fetch(node, fetch_request(session_id=session_id, epoch=1, replica_id=FOLLOWER, max_wait_ms=0))
    assert list(session(node, session_id).partitions) == [(TOPIC, 1), (TOPIC, 2), (TOPIC, 0)]


# -- the cache -----------------------------------------------------------------------------


def new_session(cache: FetchSessionCache, now: int, privileged: bool, size: int) -> int:
    def partitions() -> dict[Any, CachedPartition]:
        return {(TOPIC, p): CachedPartition((TOPIC, p), 0, 1024) for p in range(size)}

    return cache.maybe_create_session(now, privileged, size, False, partitions)


EVICTION_MS = 120_000


async def test_session_ids_are_random_positive_and_unique() -> None:
    cache = FetchSessionCache(1000, EVICTION_MS, random.Random(7))
    ids = [new_session(cache, 0, False, 1) for _ in range(50)]
    assert len(set(ids)) == 50 and all(0 < i < 2**31 - 1 for i in ids)


async def test_a_full_cache_refuses_a_consumer_session_while_the_others_are_young() -> None:
    cache = FetchSessionCache(2, EVICTION_MS)
    new_session(cache, 0, False, 1)
    new_session(cache, 0, False, 1)
    # Bigger, but the others are not old enough to be evicted by a consumer.
    assert new_session(cache, 1_000, False, 10) == INVALID_SESSION_ID
    assert cache.size == 2 and cache.evictions == 0


async def test_a_follower_evicts_the_least_valuable_consumer_session() -> None:
    cache = FetchSessionCache(2, EVICTION_MS)
    small = new_session(cache, 0, False, 1)
    big = new_session(cache, 0, False, 5)
    follower = new_session(cache, 1_000, True, 1)
    assert follower != INVALID_SESSION_ID
    assert cache.get(small) is None and cache.get(big) is not None
    assert cache.evictions == 1 and cache.total_partitions == 6
    # Two followers' sessions, young: no one evicts them, not even another follower.
    second = new_session(cache, 2_000, True, 5)
    assert second != INVALID_SESSION_ID and cache.get(big) is None
    assert new_session(cache, 3_000, True, 100) == INVALID_SESSION_ID


async def test_an_old_session_is_evicted_by_a_bigger_one() -> None:
    cache = FetchSessionCache(1, EVICTION_MS)
    old = new_session(cache, 0, False, 2)
    # Evictable once older than the eviction time — as seen when it was last touched.
    cache.touch(session_of(cache, old), EVICTION_MS)
    assert new_session(cache, EVICTION_MS + 1, False, 3) == INVALID_SESSION_ID
    cache.touch(session_of(cache, old), EVICTION_MS + 1)
    assert new_session(cache, EVICTION_MS + 2, False, 2) == INVALID_SESSION_ID  # not bigger
    assert new_session(cache, EVICTION_MS + 3, False, 3) != INVALID_SESSION_ID
    assert cache.get(old) is None


async def test_a_consumer_never_evicts_a_follower_session_in_use() -> None:
    cache = FetchSessionCache(1, EVICTION_MS)
    follower = new_session(cache, 0, True, 1)
    cache.touch(session_of(cache, follower), EVICTION_MS + 1)  # old, but used
    assert new_session(cache, EVICTION_MS + 2, False, 1000) == INVALID_SESSION_ID
    assert new_session(cache, EVICTION_MS + 3, True, 2) != INVALID_SESSION_ID
    assert cache.get(follower) is None


async def test_a_session_unused_for_the_eviction_time_expires_for_anyone() -> None:
    cache = FetchSessionCache(2, EVICTION_MS)
    stale = new_session(cache, 0, True, 50)
    used = new_session(cache, 0, True, 50)
    cache.touch(session_of(cache, used), 60_000)
    assert new_session(cache, EVICTION_MS, False, 1) == INVALID_SESSION_ID
    newcomer = new_session(cache, EVICTION_MS + 1, False, 1)
    assert newcomer != INVALID_SESSION_ID
    assert cache.get(stale) is None and cache.get(used) is not None


async def test_no_slots_no_sessions() -> None:
    cache = FetchSessionCache(0, EVICTION_MS)
    assert new_session(cache, 0, True, 1) == INVALID_SESSION_ID


def session_of(cache: FetchSessionCache, session_id: int) -> FetchSession:
    found = cache.get(session_id)
    assert found is not None
    return found


def test_epochs_wrap_to_one_and_final_stays_final() -> None:
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH
