"""Followers replicate by fetching from their leader over TCP (Kafka's ReplicaFetcherThread).

Each broker has a ``ReplicaFetcherManager`` with one ``ReplicaFetcher`` per leader
broker it follows partitions of (Kafka's ``num.replica.fetchers=1``). A fetcher is an
asyncio task with its own connection to the leader and one request in flight:

1. Partitions that have just become followers (or whose fetch hit a divergence) first
   *truncate*: OffsetForLeaderEpoch asks the leader where our latest epoch ends in
   its log, and we cut everything above it (KIP-101). Without an epoch to ask about we
   fall back to the pre-KIP-101 rule: truncate to our high watermark.
2. Then a Fetch with our broker id as replica id, ``replica.fetch.wait.max.ms``,
   ``replica.fetch.min.bytes`` and ``replica.fetch.max.bytes``: the leader parks it in
   its Fetch purgatory until new data arrives, so replication is push-like without
   polling. The fetch offset is our log end — which is how the leader learns what we
   have, moves its high watermark, and completes acks=all produces.
3. The batches are appended as they are (``append_as_follower``) and the leader's high
   watermark is adopted, bounded by our log end; so is the leader's log start (moved
   by DeleteRecords or retention), which our next fetch reports back: the leader's
   low watermark, which a parked DeleteRecords waits for (DelayedDeleteRecords).

Each fetcher keeps an incremental fetch session (KIP-227) with its leader through a
``FetchSessionHandler``: the first Fetch is full (every partition; epoch 0) and opens
it; later ones name only the partitions added or whose fetch offset, log start or
leader epoch changed, and forget the ones no longer fetched (removed, paused, backing
off, truncating). The leader reads every partition of the session and answers those
with something new. A session error, a new connection (a failed one, a leader restart)
or an answer this follower could not take starts over with a full fetch.

Fault injection (the control endpoint calls these): ``pause_replication`` stops
sending fetches (for the broker or one partition) so the leader sees the follower lag
and, after ``replica.lag.time.max.ms``, drops it from the ISR;
``set_replication_delay_ms`` spaces a partition's fetches at least that far apart, which
makes the follower slow instead of stopped; ``resume_replication`` undoes both.

Replication quotas (``quota/replication_quota_manager.py``): a partition this broker
is throttled for as a follower is left out of the fetch while the partition lags (its
lag: the leader's high watermark minus our log end, after the last answer) and the
follower quota is exceeded, as Kafka's ``RemoteLeaderEndPoint.buildFetch``; the bytes
fetched of throttled partitions are recorded into that quota.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.config.broker_config import BrokerConfig
from broker.log import UnexpectedAppendOffsetError
from broker.log.errors import LogError
from broker.quota.replication_quota_manager import ReplicationQuotas
from broker.replica.fetch_session_handler import FetchSessionHandler, PartitionData
from broker.replica.leader_endpoint import LeaderEndpoint
from broker.replica.leader_epoch_cache import UNDEFINED_EPOCH, LeaderEpochCache
from broker.replica.partition import Partition, TopicPartition
from protocol.builders import request_builder
from protocol.record_batch import CorruptRecordError
from purgatory import Clock

log = logging.getLogger("broker.replica.fetcher")

FETCH = 1
OFFSET_FOR_LEADER_EPOCH = 23
FETCH_VERSION = 12  # replica_id is a field of the request (v15+ moves it to replica_state)
OFFSET_FOR_LEADER_EPOCH_VERSION = 3  # the first with replica_id
# Kafka's replica.fetch.backoff.ms is 1000; a simulator wants failovers to settle fast.
FETCH_BACKOFF_MS = 100
#: Rounds of the fetcher loop within one millisecond of the broker's clock after which each
#: further round first yields to the event loop. Every healthy round waits on the network
#: or a timer; one that never does (a truncation that leaves a partition where it was, then
#: a fetch that asks for it again, answered at once) would hold the loop for ever: Kafka's
#: fetcher is a thread of its own, ours shares the loop with every connection.
SPIN_YIELD_ROUNDS = 10_000

_RETRY_LATER = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.leader_not_available,
    }
)


class TierStateMachine(Protocol):
    """Kafka's TierStateMachine (broker/remote/tier_state.py): rebuild a replica from the
    remote tier; the offset to fetch from, or None when the tier cannot help."""

    def build_remote_log_aux_state(self, partition: Partition) -> int | None: ...


@dataclass(slots=True, eq=False)
class PartitionFetchState:
    """One followed partition in a fetcher (Kafka's PartitionFetchState)."""

    tp: TopicPartition
    leader_epoch: int
    truncating: bool = True
    not_before_ms: int = 0  # backoff after an error, or the replication delay
    # The leader's high watermark minus our log end after the last answer (None before
    # one): Kafka's fetch-state lag, whose 0 makes the replica "in sync" to the
    # follower's replication quota.
    lag: int | None = None

    @property
    def is_replica_in_sync(self) -> bool:
        return self.lag is not None and self.lag <= 0


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader broker."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: LeaderEndpoint | None = None
        # The fetch session with this leader (KIP-227).
        self.session = FetchSessionHandler(leader_id)
        self.fetches_sent = 0
        self.truncations = 0

    def start(self) -> None:
        name = f"ReplicaFetcher-{self.manager.broker_id}-{self.leader_id}"
        self._task = asyncio.get_running_loop().create_task(self._run(), name=name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def wake(self) -> None:
        self._wake.set()

    # -- the loop ----------------------------------------------------------------------

    async def _run(self) -> None:
        clock = self.manager.clock
        round_ms, rounds = -1, 0  # rounds within one millisecond (SPIN_YIELD_ROUNDS)
        while True:
            now = clock.now_ms()
            if now != round_ms:
                round_ms, rounds = now, 0
            else:
                rounds += 1
                if rounds > SPIN_YIELD_ROUNDS:
                    await asyncio.sleep(0)
            try:
                await self._do_work()
            except asyncio.CancelledError:
                raise
            except (OSError, ConnectionError, TimeoutError) as exc:
                log.debug("fetcher %d -> %d: %s", self.manager.broker_id, self.leader_id, exc)
                self._drop_connection()
                await self._sleep(FETCH_BACKOFF_MS)
            except Exception:
                log.exception("fetcher %d -> %d failed", self.manager.broker_id, self.leader_id)
                self._drop_connection()
                await self._sleep(FETCH_BACKOFF_MS)

    async def _sleep(self, ms: int | None) -> None:
        """Wait ``ms`` (forever if None) or until woken by a change of partitions/flags."""
        self._wake.clear()
        if ms is None:
            await self._wake.wait()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ms / 1000):
                await self._wake.wait()

    def _drop_connection(self) -> None:
        self.session.handle_error()  # a new connection starts over with a full fetch
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _leader_connection(self) -> LeaderEndpoint:
        if self._connection is None:
            endpoint = self.manager.metadata.brokers.get(self.leader_id)
            if endpoint is None:
                raise ConnectionError(f"leader {self.leader_id} is not registered")
            host, port = endpoint.address(self.manager.inter_broker_listener)
            self._connection = self.manager.leader_endpoint(
                host, port, f"replica-fetcher-{self.manager.broker_id}"
            )
        return self._connection

    async def _do_work(self) -> None:
        now = self.manager.clock.now_ms()
        manager = self.manager
        ready: list[PartitionFetchState] = []
        next_ms: int | None = None
        for state in self.partitions.values():
            if manager.is_paused(state.tp):
                continue
            if state.not_before_ms > now:
                wait = state.not_before_ms - now
                next_ms = wait if next_ms is None else min(next_ms, wait)
                continue
            ready.append(state)
        if not ready:
            await self._sleep(next_ms)
            return
        truncating = [s for s in ready if s.truncating]
        if truncating:
            await self._truncate(truncating)
            return
        await self._fetch(ready)

    # -- truncation (OffsetForLeaderEpoch) ---------------------------------------------

    async def _truncate(self, states: list[PartitionFetchState]) -> None:
        hosted = self.manager.partitions
        asked: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        no_epoch: list[PartitionFetchState] = []
        for state in states:
            partition = hosted.get(state.tp)
            if partition is None:
                continue
            epoch = partition.epoch_cache.latest_epoch
            if epoch == UNDEFINED_EPOCH:
                no_epoch.append(state)
            else:
                asked[state.tp] = (state, epoch)
        for state in no_epoch:
            # Pre-KIP-101: keep only what we know is committed.
            partition = hosted.get(state.tp)
            if partition is not None:
                self._truncate_partition(state, partition.high_watermark)
        if not asked:
            return
        b = request_builder(OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION)
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), (state, epoch) in asked.items():
            by_topic.setdefault(topic, []).append(
                b.OffsetForLeaderPartition(
                    partition=index, current_leader_epoch=state.leader_epoch, leader_epoch=epoch
                )
            )
        request = b.OffsetForLeaderEpochRequest(
            replica_id=self.manager.broker_id,
            topics=tuple(
                b.OffsetForLeaderTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
            ),
        )
        response = await self._leader_connection().request(
            OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, request
        )
        now = self.manager.clock.now_ms()
        for topic_result in response.topics:
            for result in topic_result.partitions:
                tp = (topic_result.topic, int(result.partition))
                entry = asked.get(tp)
                if entry is None or self.partitions.get(tp) is not entry[0]:
                    continue  # removed or re-added while we asked
                state, our_epoch = entry
                partition = hosted.get(tp)
                if partition is None or partition.is_leader:
                    continue
                error = result.error_code
                if error is not ErrorCode.none:
                    state.not_before_ms = now + FETCH_BACKOFF_MS
                    continue
                target, complete = truncation_offset(
                    partition.epoch_cache,
                    partition.log_end_offset,
                    partition.high_watermark,
                    our_epoch,
                    int(result.leader_epoch),
                    int(result.end_offset),
                )
                self._truncate_partition(state, target, complete)

    def _truncate_partition(
        self, state: PartitionFetchState, offset: int, complete: bool = True
    ) -> None:
        partition = self.manager.partitions.get(state.tp)
        if partition is None:
            return
        if offset < partition.log_end_offset:
            log.info(
                "broker %d truncates %s-%d from %d to %d",
                self.manager.broker_id,
                *state.tp,
                partition.log_end_offset,
                offset,
            )
            self.truncations += 1
            self.manager.truncations += 1
            partition.truncate_to(offset)
        state.truncating = not complete  # not complete: ask again about our new latest epoch

    # -- fetch -------------------------------------------------------------------------

    async def _fetch(self, states: list[PartitionFetchState]) -> None:
        hosted = self.manager.partitions
        config = self.manager.config
        b = request_builder(FETCH, FETCH_VERSION)
        # Every partition fetched, with our log end when asked: what the session holds.
        sent: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        wanted: dict[TopicPartition, PartitionData] = {}
        quotas = self.manager.replication_quotas
        if quotas is not None:
            quotas.refresh()
            if not quotas.follower.throttles_any:
                quotas = None  # no partition is throttled: none is asked (most fetches)
        max_bytes = config.replica_fetch_max_bytes
        for state in states:
            tp = state.tp
            partition = hosted.get(tp)
            if partition is None or partition.is_leader:
                continue
            if quotas is not None and quotas.should_follower_throttle(
                *tp, state.is_replica_in_sync
            ):
                continue  # over the follower quota: left out of this fetch, as Kafka's
            offset = partition.log_end_offset
            sent[tp] = (state, offset)
            wanted[tp] = PartitionData(
                fetch_offset=offset,
                log_start_offset=partition.log_start_offset,
                max_bytes=max_bytes,
                current_leader_epoch=state.leader_epoch,
            )
        if not sent:
            await self._sleep(FETCH_BACKOFF_MS)
            return
        session = self.session
        data = session.build(wanted)
        by_topic: dict[str, list[Any]] = {}
        for tp, asked in data.to_send.items():
            by_topic.setdefault(tp[0], []).append(
                b.FetchPartition(
                    partition=tp[1],
                    current_leader_epoch=asked.current_leader_epoch,
                    fetch_offset=asked.fetch_offset,
                    last_fetched_epoch=asked.last_fetched_epoch,
                    log_start_offset=asked.log_start_offset,
                    partition_max_bytes=asked.max_bytes,
                )
            )
        forgotten: dict[str, list[int]] = {}
        for topic, index in data.to_forget:
            forgotten.setdefault(topic, []).append(index)
        request = b.FetchRequest(
            cluster_id=None,
            replica_id=self.manager.broker_id,
            max_wait=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_max_bytes,
            isolation_level=0,
            session_id=data.session_id,
            session_epoch=data.epoch,
            topics=tuple(b.FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            forgotten_topics_data=tuple(
                b.ForgottenTopic(topic=t, partitions=tuple(ps)) for t, ps in forgotten.items()
            ),
            rack_id="",
        )
        self.fetches_sent += 1
        response = await self._leader_connection().request(FETCH, FETCH_VERSION, request)
        work = self.manager.response_work
        if work is not None:
            await asyncio.sleep(work())
        answered = [
            ((topic_response.topic, int(p.partition_index)), p)
            for topic_response in response.responses
            for p in topic_response.partitions
        ]
        if not session.handle_response(
            response.error_code, int(response.session_id), {tp for tp, _ in answered}
        ):
            return  # a session error: the next fetch is a full one
        now = self.manager.clock.now_ms()
        if self.manager.replication_delayed:
            for tp, (state, _offset) in sent.items():
                # A partition of an incremental fetch is fetched even when not answered.
                if self.partitions.get(tp) is state:
                    delay = self.manager.delay_ms(tp)
                    if delay > 0:
                        state.not_before_ms = now + delay
        for tp, partition_data in answered:
            entry = sent.get(tp)
            if entry is None or self.partitions.get(tp) is not entry[0]:
                continue
            state, offset = entry
            if self.manager.is_paused(tp) or not self._apply(state, offset, partition_data, now):
                # Paused while the fetch was parked, or no longer what was asked: the
                # data is not taken, and the leader must send it again: a full fetch.
                session.handle_error()

    def _apply(self, state: PartitionFetchState, offset: int, data: Any, now: int) -> bool:
        """Take one partition's answer; False when it no longer fits (not taken)."""
        partition = self.manager.partitions.get(state.tp)
        if (
            partition is None
            or partition.is_leader
            or partition.leader_epoch != state.leader_epoch
            or partition.log_end_offset != offset
        ):
            return False
        error = data.error_code
        if error is ErrorCode.none:
            records = bytes(data.records or b"")
            try:
                high_watermark = int(data.high_watermark)
                if records:
                    partition.append_records_as_follower(records, high_watermark)
                else:
                    partition.update_follower_high_watermark(high_watermark)
                state.lag = max(0, high_watermark - partition.log_end_offset)
                quotas = self.manager.replication_quotas
                # In-sync replicas' traffic counts too, as Kafka's processPartitionData.
                if records and quotas is not None and quotas.follower.is_throttled(*state.tp):
                    quotas.follower.record(len(records))
                # As Kafka's processPartitionData: follow the leader's log start (moved by
                # DeleteRecords or retention); our next fetch reports it back.
                partition.maybe_increment_log_start_offset(int(data.log_start_offset))
            except (UnexpectedAppendOffsetError, CorruptRecordError, LogError) as exc:
                log.warning("broker %d: %s-%d: %s", self.manager.broker_id, *state.tp, exc)
                state.truncating = True
            return True
        tier = self.manager.tier_state_machine
        if error is ErrorCode.offset_moved_to_tiered_storage and tier is not None:
            if tier.build_remote_log_aux_state(partition) is None:
                state.not_before_ms = now + FETCH_BACKOFF_MS
            return True
        if error is ErrorCode.offset_out_of_range:
            leader_start = int(data.log_start_offset)
            if leader_start >= 0 and offset < leader_start:
                partition.truncate_fully_and_start_at(leader_start)
            else:
                state.truncating = True
            return True
        if error not in _RETRY_LATER:
            log.warning("broker %d: fetch %s-%d: %s", self.manager.broker_id, *state.tp, error)
        state.not_before_ms = now + FETCH_BACKOFF_MS
        return True


def truncation_offset(
    cache: LeaderEpochCache,
    log_end_offset: int,
    high_watermark: int,
    our_epoch: int,
    leader_epoch: int,
    leader_end_offset: int,
) -> tuple[int, bool]:
    """Where a follower truncates after OffsetForLeaderEpoch answered ``(leader_epoch,
    leader_end_offset)`` for ``our_epoch``, and whether truncation is complete (Kafka's
    ``AbstractFetcherThread.getOffsetTruncationState``, KIP-279).

    - the leader cannot tell (no end offset): keep what is committed, our high watermark;
    - it answered our epoch, or we know no epoch at or before the one it answered: the
      logs agree up to the smaller of the two ends;
    - it answered an older epoch than ours that we do not have ourselves (we know only a
      smaller one): we cut to where our largest epoch before it ends, *and ask again* about
      our new latest epoch — one round cannot tell whether the records there are the
      leader's. Found by the simulator's BUGGIFY leader step-downs: a follower with epochs
      8, 9, 11 asked about 11, a leader with 8, 10, 12 answered (10, 30); cutting to
      min(30, end of 9 here = 28) kept the follower's epoch-9 record at 27 where the leader
      had an epoch-8 one, and its fetch at 28 told the leader it had everything below 28:
      the high watermark passed a record one in-sync replica did not have.
    """
    if leader_end_offset < 0:
        return min(high_watermark, log_end_offset), True
    if leader_epoch == our_epoch:
        return min(leader_end_offset, log_end_offset), True
    found_epoch, ours = cache.end_offset_for(leader_epoch, log_end_offset)
    if ours < 0:
        return min(leader_end_offset, log_end_offset), True
    if found_epoch != leader_epoch:
        return min(ours, log_end_offset), False
    return min(ours, leader_end_offset, log_end_offset), True


class ReplicaFetcherManager:
    """A broker's fetchers, one per leader, and the replication fault hooks."""

    def __init__(
        self,
        broker_id: int,
        config: BrokerConfig,
        metadata: ClusterMetadata,
        clock: Clock,
        partitions: dict[TopicPartition, Partition],
        leader_endpoint: Callable[[str, int, str], LeaderEndpoint] = LeaderEndpoint,
        inter_broker_listener: str = "PLAINTEXT",
        replication_quotas: ReplicationQuotas | None = None,
        response_work: Callable[[], float] | None = None,
        tier_state_machine: TierStateMachine | None = None,
    ) -> None:
        # KIP-405: a follower below the leader's local log start builds its state from
        # the remote tier (broker/remote/tier_state.py); None without tiered storage.
        self.tier_state_machine = tier_state_machine
        # A simulation's model of the fetcher's own work on an answer (seconds, drawn per
        # answer); None in real time, where that work costs what it costs.
        self.response_work = response_work
        # Kafka's quotas.follower: throttled partitions left out of fetches when over.
        self.replication_quotas = replication_quotas
        # The leader's listener followers fetch from (inter.broker.listener.name).
        self.inter_broker_listener = inter_broker_listener
        self.broker_id = broker_id
        self.config = config
        self.metadata = metadata
        self.clock = clock
        # What a fetcher opens to reach its leader (host, port, client id): tests may
        # give a connection that never leaves the process.
        self.leader_endpoint = leader_endpoint
        # The replica manager's hosted partitions (Kafka's allPartitions): the replica
        # manager takes this table and fills it; read only here.
        self.partitions = partitions
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._paused_all = False
        self._paused: set[TopicPartition] = set()
        self._delay_all_ms = 0
        self._delays: dict[TopicPartition, int] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self.truncations = 0  # divergent tails cut after a leader change (for metrics)

    # -- partitions --------------------------------------------------------------------

    def add_partition(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        """Follow ``tp`` from ``leader_id`` in ``leader_epoch``: truncate, then fetch."""
        for current_leader, current in self.fetchers.items():
            existing = current.partitions.get(tp)
            if existing is None:
                continue
            if current_leader == leader_id and existing.leader_epoch == leader_epoch:
                return
            self.remove_partitions([tp])
            break
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = ReplicaFetcher(self, leader_id)
            self.fetchers[leader_id] = fetcher
            fetcher.start()
        fetcher.partitions[tp] = PartitionFetchState(tp, leader_epoch)
        fetcher.wake()

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for leader_id, fetcher in list(self.fetchers.items()):
            for tp in tps:
                fetcher.partitions.pop(tp, None)
            if not fetcher.partitions:
                del self.fetchers[leader_id]
                task = asyncio.get_running_loop().create_task(fetcher.stop())
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)

    def following(self) -> dict[TopicPartition, int]:
        """Each followed partition and the leader it fetches from."""
        return {tp: lid for lid, f in self.fetchers.items() for tp in f.partitions}

    async def stop(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        for fetcher in fetchers:
            await fetcher.stop()
        for task in list(self._stopping):
            await task

    # -- fault injection ---------------------------------------------------------------

    def pause_replication(self, tp: TopicPartition | None = None) -> None:
        """Stop fetching (every partition, or ``tp``) until resumed; the ISR will shrink."""
        if tp is None:
            self._paused_all = True
        else:
            self._paused.add(tp)

    def resume_replication(self, tp: TopicPartition | None = None) -> None:
        """Undo the replication faults: fetch again, at full speed.

        ``tp=None`` clears the broker-wide pause and delay and every per-partition one;
        a ``tp`` clears that partition's pause and delay (a broker-wide one stays).
        """
        if tp is None:
            self._paused_all = False
            self._paused.clear()
            self._delay_all_ms = 0
            self._delays.clear()
        else:
            self._paused.discard(tp)
            self._delays.pop(tp, None)
        self._fetch_now(tp)

    def set_replication_delay_ms(self, ms: int, tp: TopicPartition | None = None) -> None:
        """Space each partition's fetches at least ``ms`` apart (0 removes the delay)."""
        if ms < 0:
            raise ValueError("replication delay must be >= 0")
        if tp is None:
            self._delay_all_ms = ms
            if ms == 0:
                self._delays.clear()
        elif ms == 0:
            self._delays.pop(tp, None)
        else:
            self._delays[tp] = ms
        if ms == 0:
            self._fetch_now(tp)
        else:
            self._wake_all()

    def _fetch_now(self, tp: TopicPartition | None) -> None:
        """Drop the wait a delay left (of ``tp``, or of every partition) and wake up."""
        for fetcher in self.fetchers.values():
            for state in fetcher.partitions.values():
                if tp is None or state.tp == tp:
                    state.not_before_ms = 0
        self._wake_all()

    def is_paused(self, tp: TopicPartition) -> bool:
        return self._paused_all or tp in self._paused

    def delay_ms(self, tp: TopicPartition) -> int:
        return max(self._delay_all_ms, self._delays.get(tp, 0))

    @property
    def replication_delayed(self) -> bool:
        """Whether any replication delay is in force (for the broker or a partition)."""
        return self._delay_all_ms > 0 or bool(self._delays)

    @property
    def replication_paused(self) -> bool:
        return self._paused_all

    def _wake_all(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.wake()
