"""Incremental fetch sessions (KIP-227), the broker's side: Kafka's ``FetchSession.scala``.

A client that fetches the same partitions over and over may open a session with a
broker. Its first Fetch is *full* (session id 0, epoch 0): it names every partition, and
the answer carries a new session id. Each later Fetch is *incremental*: it names the
session and the next epoch (1, 2, ...) and lists only the partitions it adds or whose
fetch position changed, plus the ones it forgets. The broker reads every partition of the
session and answers only those that have something to tell. A follower of 17
``__consumer_offsets`` partitions thus sends and receives one or two, not 17.

Theory of operation (Kafka's names, in snake_case):

- ``FetchManager.new_context`` turns a request's session id and epoch into its
  ``FetchContext``. The Fetch handler keeps its own path for the sessionless request of
  clients that never use sessions (session id 0, epoch -1, and every v4-v6 request):
  that one never gets here.

  * epoch -1 (FINAL) or 0 (INITIAL) is a full fetch, and a session it names is closed.
    Epoch -1 is sessionless (``SessionlessFetchContext``); epoch 0 reads what the
    request names (``FullFetchContext``) and, answering, asks the cache for a new
    session over those partitions: the answer's session id, or 0 when there is no room.
  * epoch > 0 is incremental. An unknown session id answers FETCH_SESSION_ID_NOT_FOUND;
    an epoch that is not the session's, INVALID_FETCH_SESSION_EPOCH; a v13+ request
    (topics named by id) in a session opened by name, or the reverse,
    FETCH_SESSION_TOPIC_ID_ERROR (``SessionErrorContext``: no partitions, session id 0).
    Otherwise the session takes the request's partitions (added or updated) and drops
    the forgotten ones; a session left empty is closed and the fetch is sessionless.
    Else the session is touched, its epoch moves on, and ``IncrementalFetchContext``
    reads *all* its partitions: a parked fetch watches them all and counts
    ``min_bytes`` over them all.

- ``context.statuses`` is what the replica manager reads; partitions of a topic id the
  cluster does not know are in ``context.unknown`` instead (UNKNOWN_TOPIC_ID).
  ``context.update_and_generate_response_data(results)`` gives the answer's error,
  session id and partitions. An incremental answer includes a partition when it has
  records, or when its high watermark, last stable offset or log start offset differs
  from what the session last sent, or it has an error (which also forgets the sent high
  watermark, so the partition is sent again once the error is gone); a partition
  answered with records moves to the end of the session, so that under ``max_bytes``
  the others are read first next time. If the session's epoch moved while the fetch
  waited (a second request of the same session), the answer is
  INVALID_FETCH_SESSION_EPOCH.

- ``FetchSessionCache`` holds at most ``max.incremental.fetch.session.cache.slots``
  sessions, keyed by random non-zero ids. When it is full a new session may evict one:
  the least recently used if it has been unused for more than
  ``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`` (120 s, Kafka's constant); else the
  least valuable evictable session, ordered by (privileged, size, id), when the newcomer
  is worth more (a follower's session — privileged — over a consumer's, more partitions
  over fewer). A follower may evict a consumer's session or any session older than the
  eviction time, a consumer only the latter; as in Kafka, which sessions are evictable
  is decided when a session is touched. Times are the injected clock's.

Differences from Kafka: one cache (Kafka 3.8+ splits it into 8 shards, each with an
eighth of the slots and its own range of ids); an incremental answer also includes a
partition whose last stable offset moved (Kafka compares the high watermark, the log
start offset and the error; the LSO only moves with one of them or with a marker, so the
answers hardly differ); no preferred read replica or diverging epoch is ever answered,
so neither is a reason to include a partition; the session metrics
(NumIncrementalFetchSessions, evictions) are counters on the cache, not Prometheus
families; no throttling, so no throttled answers. A session of v13+ resolves its topic
ids at every fetch (a deleted topic's partitions answer UNKNOWN_TOPIC_ID)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.ids import IdSource
from broker.replica.delayed_fetch import FetchPartitionStatus, FetchResults
from broker.replica.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from broker.replica.partition import ReadResult
from purgatory import Clock

__all__ = [
    "CachedPartition",
    "FetchContext",
    "FetchManager",
    "FetchSession",
    "FetchSessionCache",
]

TOPIC_ID_VERSION = 13  # Fetch v13+ names topics by id
#: How long a session must go unused before any newcomer may evict it (Kafka's
#: KafkaBroker.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS: a constant, not a config).
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000
_MAX_INT32 = 2**31 - 1
_NO_TOPIC_ID = uuid.UUID(int=0)

# (topic name, topic id, partition, error): a partition answered without being read.
UnknownPartition = tuple[str | None, uuid.UUID | None, int, ErrorCode]
# How a session knows its partitions: (topic name, partition), or (topic id, partition)
# in a session of v13+.
SessionKey = tuple[str | uuid.UUID, int]
# What a context reads: (statuses, partitions of unknown topic ids, name -> topic id).
_Split = tuple[
    list[FetchPartitionStatus], list[UnknownPartition] | None, dict[str, uuid.UUID] | None
]


@dataclass(slots=True, eq=False)
class CachedPartition(FetchPartitionStatus):
    """One partition of a session: what the fetcher last asked (the status fields, the
    fetcher's log start among them, and the two below) and what the broker last sent
    it (the last three). It is the status the replica manager reads, so an incremental
    fetch copies nothing."""

    topic_id: uuid.UUID = _NO_TOPIC_ID
    last_fetched_epoch: int = -1
    high_watermark: int = -1
    last_stable_offset: int = -1
    local_log_start_offset: int = -1

    def update_request_params(self, asked: CachedPartition) -> None:
        self.fetch_offset = asked.fetch_offset
        self.partition_max_bytes = asked.partition_max_bytes
        self.current_leader_epoch = asked.current_leader_epoch
        self.log_start_offset = asked.log_start_offset
        self.last_fetched_epoch = asked.last_fetched_epoch

    def maybe_update_response_data(self, result: ReadResult) -> bool:
        """Whether an incremental answer must include this partition; what it will have
        been sent is remembered. (``IncrementalFetchContext`` has this inlined in its
        loop: keep the two alike.)"""
        must_respond = len(result.records) > 0
        if self.high_watermark != result.high_watermark:
            must_respond = True
            self.high_watermark = result.high_watermark
        if self.last_stable_offset != result.last_stable_offset:
            must_respond = True
            self.last_stable_offset = result.last_stable_offset
        if self.local_log_start_offset != result.log_start_offset:
            must_respond = True
            self.local_log_start_offset = result.log_start_offset
        if result.error is not ErrorCode.none:
            # Sent again once the error is gone: the HW it will then have differs.
            self.high_watermark = -1
            must_respond = True
        return must_respond


class FetchSession:
    """One session (Kafka's FetchSession). ``cached_size`` is the size the cache last
    counted (-1: not in the cache)."""

    __slots__ = (
        "cached_size",
        "creation_ms",
        "epoch",
        "evictable_by_all",
        "evictable_by_privileged",
        "id",
        "last_used_ms",
        "partitions",
        "privileged",
        "uses_topic_ids",
    )

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partitions: dict[SessionKey, CachedPartition],
        uses_topic_ids: bool,
        creation_ms: int,
        epoch: int,
    ) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = creation_ms
        self.last_used_ms = creation_ms
        self.epoch = epoch
        self.cached_size = -1
        self.evictable_by_privileged = False
        self.evictable_by_all = False

    @property
    def size(self) -> int:
        return len(self.partitions)

    def update(
        self, fetch_data: dict[SessionKey, CachedPartition], to_forget: list[SessionKey]
    ) -> tuple[int, int, int]:
        """Take an incremental request's partitions; ``(added, updated, removed)``."""
        added = updated = removed = 0
        partitions = self.partitions
        for key, asked in fetch_data.items():
            cached = partitions.get(key)
            if cached is None:
                partitions[key] = asked
                added += 1
            else:
                cached.update_request_params(asked)
                updated += 1
        for key in to_forget:
            if partitions.pop(key, None) is not None:
                removed += 1
        return added, updated, removed

    def __repr__(self) -> str:
        return (
            f"FetchSession(id={self.id}, privileged={self.privileged}, "
            f"partitions={len(self.partitions)}, uses_topic_ids={self.uses_topic_ids}, "
            f"creation_ms={self.creation_ms}, last_used_ms={self.last_used_ms}, "
            f"epoch={self.epoch})"
        )


def _evictable_key(session: FetchSession) -> tuple[bool, int, int]:
    return session.privileged, session.cached_size, session.id


class FetchSessionCache:
    """A broker's sessions (Kafka's FetchSessionCache; see the module doc for eviction).

    The orderings Kafka keeps in tree maps are found by a scan here: they are needed
    only when a session is created in a full cache.
    """

    def __init__(
        self,
        max_entries: int,
        eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
        rng: random.Random | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._rng = rng if rng is not None else IdSource.system().rng
        self.sessions: dict[int, FetchSession] = {}
        # Kafka's NumIncrementalFetchPartitionsCached and IncrementalFetchSessionEvictions.
        self.total_partitions = 0
        self.evictions = 0

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    @property
    def size(self) -> int:
        """Kafka's NumIncrementalFetchSessions."""
        return len(self.sessions)

    def new_session_id(self) -> int:
        """A random id, positive and unused."""
        while True:
            session_id = self._rng.randint(1, _MAX_INT32 - 1)
            if session_id not in self.sessions:
                return session_id

    def maybe_create_session(
        self,
        now: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        create_partitions: Callable[[], dict[SessionKey, CachedPartition]],
    ) -> int:
        """A new session's id, or INVALID_SESSION_ID when there is no room for it."""
        if len(self.sessions) >= self.max_entries and not self.try_evict(privileged, size, now):
            return INVALID_SESSION_ID
        session = FetchSession(
            self.new_session_id(),
            privileged,
            create_partitions(),
            uses_topic_ids,
            now,
            next_epoch(INITIAL_EPOCH),
        )
        self.sessions[session.id] = session
        self.touch(session, now)
        return session.id

    def try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """Make room for a new session of ``size`` partitions, if one may go."""
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stalest.last_used_ms > self.eviction_ms:
            self.remove(stalest)
            self.evictions += 1
            return True
        if privileged:
            evictable = [s for s in self.sessions.values() if s.evictable_by_privileged]
        else:
            evictable = [s for s in self.sessions.values() if s.evictable_by_all]
        if not evictable:
            return False
        victim = min(evictable, key=_evictable_key)
        # The newcomer's key has id 0: it must be worth strictly more than the victim.
        if (privileged, size, 0) < _evictable_key(victim):
            return False
        self.remove(victim)
        self.evictions += 1
        return True

    def remove(self, session: FetchSession | int) -> FetchSession | None:
        """Drop a session (or the session of that id); the one removed, if any."""
        if isinstance(session, int):
            found = self.sessions.get(session)
            if found is None:
                return None
            session = found
        if self.sessions.get(session.id) is not session:
            return None
        del self.sessions[session.id]
        self.total_partitions -= session.cached_size
        session.cached_size = -1
        return session

    def touch(self, session: FetchSession, now: int) -> None:
        """The session was used: its last use, size and evictability are updated."""
        session.last_used_ms = now
        if session.cached_size != -1:
            self.total_partitions -= session.cached_size
        session.cached_size = session.size
        self.total_partitions += session.cached_size
        old_enough = now - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old_enough
        session.evictable_by_all = old_enough


class FetchContext:
    """What one Fetch reads and how its answer is made (Kafka's FetchContext). This base
    is the sessionless fetch of a request that asked for one: answered whole, with
    session id 0."""

    __slots__ = ("error", "statuses", "topic_ids", "unknown")

    def __init__(
        self,
        statuses: list[FetchPartitionStatus],
        unknown: list[UnknownPartition] | None = None,
        topic_ids: dict[str, uuid.UUID] | None = None,
        error: ErrorCode = ErrorCode.none,
    ) -> None:
        self.statuses = statuses
        self.unknown = unknown
        self.topic_ids = topic_ids
        self.error = error

    def update_and_generate_response_data(
        self, results: FetchResults
    ) -> tuple[ErrorCode, int, FetchResults]:
        """``(error, session id, the partitions to answer)`` once ``results`` are read."""
        return self.error, INVALID_SESSION_ID, results


SessionlessFetchContext = FetchContext


class SessionErrorContext(FetchContext):
    """A session error: nothing is read, the answer carries the error alone."""

    __slots__ = ()

    def __init__(self, error: ErrorCode) -> None:
        super().__init__([], error=error)

    def update_and_generate_response_data(
        self, results: FetchResults
    ) -> tuple[ErrorCode, int, FetchResults]:
        return self.error, INVALID_SESSION_ID, []


class FullFetchContext(FetchContext):
    """Epoch 0: read what the request names; answering opens a session over it."""

    __slots__ = ("_cache", "_clock", "_partitions", "_privileged", "_uses_topic_ids")

    def __init__(
        self,
        cache: FetchSessionCache,
        clock: Clock,
        partitions: dict[SessionKey, CachedPartition],
        privileged: bool,
        uses_topic_ids: bool,
        split: _Split,
    ) -> None:
        statuses, unknown, topic_ids = split
        super().__init__(statuses, unknown, topic_ids)
        self._cache = cache
        self._clock = clock
        self._partitions = partitions
        self._privileged = privileged
        self._uses_topic_ids = uses_topic_ids

    def update_and_generate_response_data(
        self, results: FetchResults
    ) -> tuple[ErrorCode, int, FetchResults]:
        for status, result in results:
            cast(CachedPartition, status).maybe_update_response_data(result)
        partitions = self._partitions
        session_id = self._cache.maybe_create_session(
            self._clock.now_ms(),
            self._privileged,
            len(partitions),
            self._uses_topic_ids,
            lambda: partitions,
        )
        return ErrorCode.none, session_id, results


class IncrementalFetchContext(FetchContext):
    """Epoch > 0: read every partition of the session, answer those that changed."""

    __slots__ = ("_request_epoch", "session")

    def __init__(
        self,
        session: FetchSession,
        request_epoch: int,
        split: _Split,
    ) -> None:
        statuses, unknown, topic_ids = split
        super().__init__(statuses, unknown, topic_ids)
        self.session = session
        self._request_epoch = request_epoch

    def update_and_generate_response_data(
        self, results: FetchResults
    ) -> tuple[ErrorCode, int, FetchResults]:
        session = self.session
        if session.epoch != next_epoch(self._request_epoch):
            # Another request of this session came meanwhile (a duplicate request).
            return ErrorCode.invalid_fetch_session_epoch, session.id, []
        partitions = session.partitions
        selected: FetchResults = []
        none = ErrorCode.none
        # CachedPartition.maybe_update_response_data, inlined: this loop runs over every
        # partition of the session at every fetch (a follower's, at every acks=all batch).
        for cached, result in cast(list[tuple[CachedPartition, ReadResult]], results):
            must_respond = False
            if cached.high_watermark != result.high_watermark:
                cached.high_watermark = result.high_watermark
                must_respond = True
            if cached.last_stable_offset != result.last_stable_offset:
                cached.last_stable_offset = result.last_stable_offset
                must_respond = True
            if cached.local_log_start_offset != result.log_start_offset:
                cached.local_log_start_offset = result.log_start_offset
                must_respond = True
            if result.error is not none:
                cached.high_watermark = -1
                must_respond = True
            if result.records:
                selected.append((cached, result))
                key = _key(cached, session.uses_topic_ids)
                if partitions.pop(key, None) is cached:
                    partitions[key] = cached  # to the end: the others are read first
            elif must_respond:
                selected.append((cached, result))
        return none, session.id, selected


def _key(cached: CachedPartition, uses_topic_ids: bool) -> SessionKey:
    return (cached.topic_id, cached.tp[1]) if uses_topic_ids else cached.tp


class FetchManager:
    """Kafka's FetchManager: a broker's session cache and the rules of ``new_context``."""

    def __init__(self, clock: Clock, cache: FetchSessionCache, metadata: ClusterMetadata) -> None:
        self.clock = clock
        self.cache = cache
        self.metadata = metadata

    def new_context(
        self, version: int, session_id: int, epoch: int, is_follower: bool, request: Any
    ) -> FetchContext:
        uses_topic_ids = version >= TOPIC_ID_VERSION
        cache = self.cache
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                cache.remove(session_id)  # a full fetch closes the session it names
            fetch_data = self._fetch_data(request, uses_topic_ids)
            if epoch == FINAL_EPOCH:
                return FetchContext(*self._split(fetch_data.values(), uses_topic_ids))
            return FullFetchContext(
                cache,
                self.clock,
                fetch_data,
                is_follower,
                uses_topic_ids,
                self._split(fetch_data.values(), uses_topic_ids),
            )
        session = cache.get(session_id)
        if session is None:
            return SessionErrorContext(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return SessionErrorContext(ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_topic_ids:
            return SessionErrorContext(ErrorCode.fetch_session_topic_id_error)
        fetch_data = self._fetch_data(request, uses_topic_ids)
        session.update(fetch_data, self._to_forget(request, uses_topic_ids))
        if not session.partitions:
            cache.remove(session)
            return FetchContext(*self._split(fetch_data.values(), uses_topic_ids))
        cache.touch(session, self.clock.now_ms())
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(
            session, epoch, self._split(session.partitions.values(), uses_topic_ids)
        )

    # -- the request's partitions ------------------------------------------------------

    @staticmethod
    def _fetch_data(request: Any, uses_topic_ids: bool) -> dict[SessionKey, CachedPartition]:
        """The partitions a request names, by session key (a repeated one: the last)."""
        fetch_data: dict[SessionKey, CachedPartition] = {}
        for topic in request.topics:
            if uses_topic_ids:
                topic_id: uuid.UUID = topic.topic_id or _NO_TOPIC_ID
                name = ""  # resolved by _split, at every fetch
            else:
                topic_id = _NO_TOPIC_ID
                name = str(topic.topic)
            for p in topic.partitions:
                index = int(p.partition)
                fetch_data[(topic_id, index) if uses_topic_ids else (name, index)] = (
                    CachedPartition(
                        tp=(name, index),
                        fetch_offset=int(p.fetch_offset),
                        partition_max_bytes=int(p.partition_max_bytes),
                        current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                        topic_id=topic_id,
                        log_start_offset=int(getattr(p, "log_start_offset", -1)),
                        last_fetched_epoch=int(getattr(p, "last_fetched_epoch", -1)),
                    )
                )
        return fetch_data

    @staticmethod
    def _to_forget(request: Any, uses_topic_ids: bool) -> list[SessionKey]:
        forgotten: list[SessionKey] = []
        for topic in getattr(request, "forgotten_topics_data", ()):
            key: str | uuid.UUID = (
                (topic.topic_id or _NO_TOPIC_ID) if uses_topic_ids else str(topic.topic)
            )
            forgotten.extend((key, int(p)) for p in topic.partitions)
        return forgotten

    def _split(self, partitions: Iterable[CachedPartition], uses_topic_ids: bool) -> _Split:
        """``(statuses to read, partitions of unknown topic ids, name -> topic id)``.

        A session by name reads its partitions as they are; one by id finds each
        topic's name now (Kafka resolves a name once; a topic deleted since then
        answers UNKNOWN_TOPIC_ID here).
        """
        if not uses_topic_ids:
            return list(partitions), None, None
        statuses: list[FetchPartitionStatus] = []
        unknown: list[UnknownPartition] | None = None
        topic_ids: dict[str, uuid.UUID] = {}
        names: dict[uuid.UUID, str | None] = {}
        for cached in partitions:
            topic_id = cached.topic_id
            if topic_id in names:
                name = names[topic_id]
            else:
                info = self.metadata.topic_by_id(topic_id) if topic_id != _NO_TOPIC_ID else None
                name = names[topic_id] = info.name if info is not None else None
            if name is None:
                if unknown is None:
                    unknown = []
                unknown.append((None, topic_id, cached.tp[1], ErrorCode.unknown_topic_id))
                continue
            if cached.tp[0] != name:
                cached.tp = (name, cached.tp[1])
            topic_ids[name] = topic_id
            statuses.append(cached)
        return statuses, unknown, topic_ids
