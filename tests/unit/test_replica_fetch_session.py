"""A follower's fetch session with its leader (KIP-227): the handler, and the fetcher.

``FetchSessionHandler`` is tested alone. Then broker 1's ``ReplicaFetcher`` follows broker
0 for real, without a socket: broker 0 is built by ``build_broker`` (its dispatcher, its
Fetch handler and session cache) and broker 1's fetcher manager is given a
``LeaderEndpoint`` that hands each request to broker 0's dispatcher and awaits its
answer. Both run on one manual clock; nothing sleeps: a test lets the event loop run
until what it waits for has happened (``until``), and a leader's parked Fetch is
completed by an append, as in production.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker.app import build_broker
from broker.cluster.cluster_metadata import ClusterMetadata
from broker.cluster.controller import Controller
from broker.config.broker_config import BrokerConfig
from broker.control.faults import FaultInjector
from broker.handlers.registry import build_registry
from broker.log import LogManager
from broker.replica.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID
from broker.replica.fetch_session import FetchSession, FetchSessionCache
from broker.replica.fetch_session_handler import FetchSessionHandler, PartitionData
from broker.replica.leader_endpoint import LeaderEndpoint
from broker.replica.partition import Partition, TopicPartition
from broker.replica.replica_fetcher import ReplicaFetcher, ReplicaFetcherManager
from broker.replica.replica_manager import ReplicaManager
from broker.server.broker_options import BrokerOptions
from broker.server.broker_server import Broker
from broker.server.cluster_stores import ClusterStores
from broker.server.context import ConnectionInfo
from broker.server.purgatories import PurgatorySet
from protocol.client import ClientConnection
from protocol.record_builder import build_record_batch
from purgatory import ManualClock
from testkit.polling import wait_until

TOPIC = "followed"
A, B, C = (TOPIC, 0), (TOPIC, 1), (TOPIC, 2)


def data(offset: int, epoch: int = 0) -> PartitionData:
    return PartitionData(
        fetch_offset=offset, log_start_offset=0, max_bytes=1024, current_leader_epoch=epoch
    )


# -- the handler alone ---------------------------------------------------------------------


def test_the_first_fetch_is_full_then_only_changes_are_sent() -> None:
    handler = FetchSessionHandler(0)
    first = handler.build({A: data(0), B: data(0)})
    assert (first.session_id, first.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    assert first.is_full and set(first.to_send) == {A, B} and first.to_forget == []
    assert handler.handle_response(ErrorCode.none, 77, {A, B})
    assert (handler.session_id, handler.epoch) == (77, 1)

    second = handler.build({A: data(5), B: data(0), C: data(0)})
    assert (second.session_id, second.epoch) == (77, 1) and not second.is_full
    assert second.to_send == {A: data(5), C: data(0)} and second.to_forget == []
    assert handler.handle_response(ErrorCode.none, 77, {A})  # only A had news
    assert handler.epoch == 2

    third = handler.build({A: data(5), C: data(0, epoch=3)})
    assert third.to_send == {C: data(0, epoch=3)} and third.to_forget == [B]
    assert set(handler.session_partitions) == {A, C}


def test_a_full_answer_without_a_session_keeps_fetching_full() -> None:
    handler = FetchSessionHandler(0)
    handler.build({A: data(0)})
    assert handler.handle_response(ErrorCode.none, INVALID_SESSION_ID, {A})
    assert handler.is_full and handler.session_id == INVALID_SESSION_ID
    assert handler.build({A: data(0)}).to_send == {A: data(0)}


def test_session_errors_start_over() -> None:
    handler = open_handler()
    handler.build({A: data(0)})
    assert not handler.handle_response(ErrorCode.fetch_session_id_not_found, 0, set())
    assert (handler.session_id, handler.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)

    handler = open_handler()
    handler.build({A: data(0)})
    assert not handler.handle_response(ErrorCode.invalid_fetch_session_epoch, 0, set())
    # A full fetch that closes the old session (its id, epoch 0) and opens a new one.
    assert (handler.session_id, handler.epoch) == (77, INITIAL_EPOCH)
    assert handler.build({A: data(0), B: data(0)}).to_send == {A: data(0), B: data(0)}

    handler = open_handler()
    handler.build({A: data(0)})
    handler.handle_error()  # the connection failed
    assert (handler.session_id, handler.epoch) == (77, INITIAL_EPOCH)


def test_answers_naming_the_wrong_partitions_are_not_used() -> None:
    handler = FetchSessionHandler(0)
    handler.build({A: data(0), B: data(0)})
    assert not handler.handle_response(ErrorCode.none, 77, {A})  # a full answer omits B
    assert (handler.session_id, handler.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    handler = open_handler()
    handler.build({A: data(0)})
    assert not handler.handle_response(ErrorCode.none, 77, {A, C})  # C is not ours
    assert (handler.session_id, handler.epoch) == (77, INITIAL_EPOCH)


def test_an_incremental_answer_without_a_session_id_ends_the_session() -> None:
    handler = open_handler()
    handler.build({A: data(1)})
    assert handler.handle_response(ErrorCode.none, INVALID_SESSION_ID, {A})
    assert (handler.session_id, handler.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)


def open_handler() -> FetchSessionHandler:
    handler = FetchSessionHandler(0)
    handler.build({A: data(0)})
    assert handler.handle_response(ErrorCode.none, 77, {A})
    return handler


# -- the fetcher, following broker 0 in process --------------------------------------------


class InProcessLeader(LeaderEndpoint):
    """A ``LeaderEndpoint`` whose requests go to the leader's dispatcher, not a socket.
    ``fail()`` breaks it as a lost connection would: the request waiting raises."""

    def __init__(self, leader: Broker, sent: list[Any]) -> None:
        super().__init__("in-process", 0, "replica-fetcher-1")
        self.leader = leader
        self.sent = sent
        self.client = ClientConnection("replica-fetcher-1")
        self.connection = ConnectionInfo("follower-1", "127.0.0.1", 1, 9092)
        self.broken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def request(self, api_key: int, version: int, payload: Any) -> Any:
        self.sent.append(payload)
        dispatcher = self.leader.dispatcher
        in_flight = dispatcher.dispatch(
            self.client.send(api_key, version, payload).data[4:], 0, self.connection
        )
        if in_flight.future is not None:
            await asyncio.wait([in_flight.future, self.broken], return_when="FIRST_COMPLETED")
            if self.broken.done():
                raise ConnectionError("the leader's connection is gone")
            dispatcher.settle(in_flight)
        encoded = dispatcher.encode(in_flight)
        assert encoded is not None
        (response,) = self.client.receive(encoded)
        return response.body

    def fail(self) -> None:
        self.broken.set_result(None)

    def close(self) -> None:
        pass


@dataclass
class Pair:
    clock: ManualClock
    metadata: ClusterMetadata
    leader: Broker
    follower: ReplicaManager
    sent: list[Any] = field(default_factory=list)
    endpoints: list[InProcessLeader] = field(default_factory=list)

    @property
    def fetcher(self) -> ReplicaFetcher:
        return self.follower.fetcher_manager.fetchers[0]

    @property
    def sessions(self) -> FetchSessionCache:
        return self.leader.services.fetch_manager.cache

    def fetches(self) -> list[Any]:
        return [r for r in self.sent if hasattr(r, "session_epoch")]

    def append(self, tp: TopicPartition, records: int = 1) -> None:
        batch = build_record_batch([(None, b"v", ())] * records, timestamp_ms=0)
        result = self.leader.services.replica_manager.append_to_leader(tp, batch, 1)
        assert result.error is ErrorCode.none

    def log_end(self, tp: TopicPartition) -> int:
        return self.follower.partitions[tp].log_end_offset


@contextlib.asynccontextmanager
async def leader_and_follower(partitions: int = 3) -> AsyncIterator[Pair]:
    """Broker 0 leads ``TOPIC``; broker 1 follows every partition, fetching in process."""
    clock = ManualClock(1_000)
    metadata = ClusterMetadata(cluster_id="sessions")
    metadata.register_broker(0, "127.0.0.1", 9092)
    metadata.register_broker(1, "127.0.0.1", 9093)
    controller = Controller(metadata)
    config = BrokerConfig.model_validate({})
    registry = build_registry()
    leader = build_broker(
        BrokerOptions(broker_id=0, config=config, clock=clock, logs=LogManager(None)),
        ClusterStores.in_memory(
            metadata, FaultInjector(frozenset(registry), frozenset()), controller
        ),
    )
    sent: list[Any] = []
    endpoints: list[InProcessLeader] = []

    def connect(host: str, port: int, client_id: str) -> LeaderEndpoint:
        endpoints.append(InProcessLeader(leader, sent))
        return endpoints[-1]

    follower_config = BrokerConfig.model_validate({"broker.id": 1})
    purgatories = PurgatorySet(clock, follower_config)
    hosted: dict[TopicPartition, Partition] = {}
    follower = ReplicaManager(
        1,
        metadata,
        follower_config,
        clock,
        purgatories,
        LogManager(None),
        controller,
        ReplicaFetcherManager(
            1,
            follower_config,
            metadata,
            clock,
            hosted,
            leader_endpoint=connect,
        ),
    )
    await leader.services.replica_manager.start()
    await follower.start()
    metadata.create_topic(TOPIC, partitions, 2, {}, assignment=[[0, 1]] * partitions)
    try:
        yield Pair(clock, metadata, leader, follower, sent, endpoints)
    finally:
        await follower.stop()
        await leader.services.replica_manager.stop()


async def test_the_follower_opens_a_session_then_sends_only_what_changed() -> None:
    async with leader_and_follower() as pair:
        await wait_until(
            lambda: len(pair.fetches()) == 1, "a full fetch, parked", attempts=500, step_s=0
        )
        (full,) = pair.fetches()
        assert (full.session_id, full.session_epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
        assert [(t.topic, len(t.partitions)) for t in full.topics] == [(TOPIC, 3)]
        assert pair.sessions.size == 0  # opened when the full fetch is answered

        pair.append(B, 2)
        await wait_until(
            lambda: len(pair.fetches()) == 2, "an incremental fetch", attempts=500, step_s=0
        )
        (session,) = pair.sessions.sessions.values()
        assert session.privileged and session.size == 3
        incremental = pair.fetches()[1]
        assert (incremental.session_id, incremental.session_epoch) == (session.id, 1)
        assert named(incremental) == [(1, 2)] and incremental.forgotten_topics_data == ()
        assert pair.log_end(B) == 2
        # That fetch told the leader the follower has B's records: B's HW moved to 2. The
        # fetch waits on all three partitions: an append to A answers it, with A's record
        # and B's new HW; the next one names A alone.
        assert pair.leader.services.replica_manager.partitions[B].high_watermark == 2
        pair.append(A)
        await wait_until(lambda: len(pair.fetches()) == 3, "the next fetch", attempts=500, step_s=0)
        assert pair.follower.partitions[B].high_watermark == 2
        assert pair.log_end(A) == 1
        following = pair.fetches()[2]
        assert following.session_epoch == 2 and named(following) == [(0, 1)]
        assert session.partitions[A].fetch_offset == 1


def named(request: Any) -> list[tuple[int, int]]:
    """(partition, fetch offset) of each partition a Fetch names."""
    return [(p.partition, p.fetch_offset) for t in request.topics for p in t.partitions]


async def opened(pair: Pair) -> FetchSession:
    """Let the follower open its session (an append answers its full fetch) and park an
    incremental fetch; the session."""
    await wait_until(
        lambda: len(pair.fetches()) == 1, "a full fetch, parked", attempts=500, step_s=0
    )
    pair.append(A)
    await wait_until(
        lambda: len(pair.fetches()) == 2, "an incremental fetch, parked", attempts=500, step_s=0
    )
    (session,) = pair.sessions.sessions.values()
    assert pair.fetcher.session.session_id == session.id
    return session


async def test_the_follower_recovers_a_lost_session_with_a_full_fetch() -> None:
    async with leader_and_follower() as pair:
        session = await opened(pair)
        pair.sessions.remove(session)  # as a leader restart or an eviction would
        pair.append(B)
        await wait_until(
            lambda: len(pair.fetches()) == 4,
            "the session's loss, then a new one",
            attempts=500,
            step_s=0,
        )
        lost, restart = pair.fetches()[2:4]
        # The parked fetch was answered (its session object lives on); the next one
        # names a session the leader no longer has: FETCH_SESSION_ID_NOT_FOUND, and the
        # follower starts over with a full fetch.
        assert (lost.session_id, lost.session_epoch) == (session.id, 2)
        assert (restart.session_id, restart.session_epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
        assert sorted(named(restart)) == [(0, 1), (1, 1), (2, 0)]
        pair.append(C, 3)
        await wait_until(
            lambda: pair.log_end(C) == 3, "replication goes on", attempts=500, step_s=0
        )
        (renewed,) = pair.sessions.sessions.values()
        assert renewed.id != session.id and pair.fetcher.session.session_id == renewed.id


async def test_a_new_connection_starts_the_session_over() -> None:
    async with leader_and_follower() as pair:
        session = await opened(pair)
        pair.endpoints[-1].fail()  # the connection is lost while the fetch waits
        await wait_until(
            lambda: pair.fetcher.session.epoch == INITIAL_EPOCH,
            "the failure",
            attempts=500,
            step_s=0,
        )
        pair.fetcher.wake()  # end the backoff
        await wait_until(lambda: len(pair.fetches()) == 3, "the next fetch", attempts=500, step_s=0)
        again = pair.fetches()[2]
        # A full fetch on a new connection naming the old session: the leader closes it
        # and opens another when it answers.
        assert len(pair.endpoints) == 2
        assert (again.session_id, again.session_epoch) == (session.id, INITIAL_EPOCH)
        assert sorted(named(again)) == [(0, 1), (1, 0), (2, 0)]
        assert pair.sessions.size == 0
        pair.append(B)
        await wait_until(
            lambda: pair.fetcher.session.epoch == 1, "a new session", attempts=500, step_s=0
        )
        (renewed,) = pair.sessions.sessions.values()
        assert renewed.id != session.id and pair.fetcher.session.session_id == renewed.id


async def test_a_partition_no_longer_fetched_is_forgotten() -> None:
    async with leader_and_follower() as pair:
        session = await opened(pair)
        pair.follower.fetcher_manager.pause_replication(C)
        pair.append(B)
        await wait_until(lambda: len(pair.fetches()) == 3, "the next fetch", attempts=500, step_s=0)
        forgot = pair.fetches()[2]
        assert forgot.session_epoch not in (INITIAL_EPOCH, FINAL_EPOCH)
        assert named(forgot) == [(1, 1)]
        assert [(t.topic, tuple(t.partitions)) for t in forgot.forgotten_topics_data] == [
            (TOPIC, (2,))
        ]
        assert sorted(session.partitions) == [A, B]
