"""ShareFetch and ShareAcknowledge through the dispatcher, on the manual clock.

DelayedShareFetch's completion rules (an append, a release, a lock expiry, or the max
wait), the share session's epochs and their errors, and acknowledgements that change
nothing. The broker is ``build_standalone_broker`` with its replica manager started; time
moves only when a test advances the clock and a timer, as the reapers would.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.app import build_standalone_broker, fault_injector
from broker.config.broker_config import BrokerConfig
from broker.coordinator.coordinator_loader import ImmediateLoadScheduler
from broker.handlers.registry import build_registry
from broker.server.context import ConnectionInfo
from broker.server.purgatories import PurgatoryName, PurgatoryOutcome
from broker.share.in_flight_state import RecordState
from broker.share.persister import StatePersister
from broker.share.share_partition import SharePartition
from broker.share.share_partition_manager import SharePartitionManager
from broker.share_coordinator.share_state_records import SharePartitionKey
from protocol.builders import request_builder
from protocol.client import ClientConnection
from protocol.record_builder import build_record_batch
from purgatory import ManualClock
from tests.helpers.dispatch_node import Node

SHARE_FETCH, SHARE_ACK = 78, 79
TOPIC = "queue"
GROUP = "g"
MAX_WAIT_MS = 2_000
LOCK_MS = 1_000


@pytest.fixture
async def node() -> AsyncIterator[Node]:
    clock = ManualClock(1_000)
    handlers = build_registry()
    config = BrokerConfig.model_validate(
        {
            "group.share.record.lock.duration.ms": str(LOCK_MS),
            "group.share.min.record.lock.duration.ms": str(LOCK_MS),
            "group.share.max.share.sessions": "2",
        }
    )
    broker = build_standalone_broker(
        clock, config=config, faults=fault_injector(handlers), load_scheduler=ImmediateLoadScheduler
    )
    connection = ConnectionInfo("c-1", "127.0.0.1", 1, 9092, close=lambda _: None)
    node = Node(
        broker, broker.dispatcher, clock, fault_injector(handlers), ClientConnection("t"),
        connection, [],
    )  # fmt: skip
    manager = broker.dispatcher.services.replica_manager
    await manager.start()
    # the share coordinator: share partitions read their state from it when first used
    share_coordinator = broker.dispatcher.services.coordinators.share
    await share_coordinator.start()
    broker.dispatcher.services.metadata.create_topic(TOPIC, 1, 1, {})
    yield node
    await share_coordinator.stop()
    await manager.stop()


def _topic_id(node: Node) -> uuid.UUID:
    return node.dispatcher.services.metadata.topics[TOPIC].topic_id


def _fetch(
    node: Node, member: str, epoch: int, acks: tuple[tuple[int, int, int], ...] = (), **kw: Any
) -> Any:
    version = kw.get("version", 1)
    b = request_builder(SHARE_FETCH, version)
    v2 = {"share_acquire_mode": kw.get("mode", 0)} if version >= 2 else {}
    return b.ShareFetchRequest(
        **v2,
        group_id=GROUP,
        member_id=member,
        share_session_epoch=epoch,
        max_wait=kw.get("max_wait", MAX_WAIT_MS),
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=kw.get("max_records", 500),
        batch_size=500,
        topics=(
            b.FetchTopic(
                topic_id=kw.get("topic_id", _topic_id(node)),
                partitions=(
                    b.FetchPartition(
                        partition_index=0,
                        acknowledgement_batches=tuple(
                            b.AcknowledgementBatch(
                                first_offset=f, last_offset=last, acknowledge_types=(t,)
                            )
                            for f, last, t in acks
                        ),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def _ack(node: Node, member: str, epoch: int, acks: tuple[tuple[int, int, int], ...]) -> Any:
    b = request_builder(SHARE_ACK, 1)
    return b.ShareAcknowledgeRequest(
        group_id=GROUP,
        member_id=member,
        share_session_epoch=epoch,
        topics=(
            b.AcknowledgeTopic(
                topic_id=_topic_id(node),
                partitions=(
                    b.AcknowledgePartition(
                        partition_index=0,
                        acknowledgement_batches=tuple(
                            b.AcknowledgementBatch(
                                first_offset=f, last_offset=last, acknowledge_types=(t,)
                            )
                            for f, last, t in acks
                        ),
                    ),
                ),
            ),
        ),
    )


def _append(node: Node, count: int = 1) -> None:
    manager = node.dispatcher.services.replica_manager
    records = build_record_batch([(None, b"v", ())] * count, timestamp_ms=0)
    assert manager.append_to_leader((TOPIC, 0), records, 1).error is ErrorCode.none


def _advance(node: Node, ms: int) -> None:
    node.clock.advance(ms)
    purgatories = node.broker.purgatories
    purgatories.share_lock_timer.advance_clock()
    purgatories.timers[PurgatoryName.SHARE_FETCH].advance_clock()


def _acquired(response: Any) -> list[tuple[int, int, int]]:
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in response.responses
        for p in t.partitions
        for a in p.acquired_records
    ]


def _partition(response: Any) -> Any:
    (topic,) = response.responses
    (partition,) = topic.partitions
    return partition


async def test_a_share_fetch_on_an_empty_partition_parks_until_an_append(node: Node) -> None:
    in_flight = node.send(SHARE_FETCH, 1, _fetch(node, "m1", 0))
    assert in_flight.future is not None and not in_flight.future.done()
    assert in_flight.ctx is not None
    assert in_flight.ctx.timing.purgatory is PurgatoryName.SHARE_FETCH
    _append(node, 3)
    assert in_flight.future.done()
    assert in_flight.ctx.timing.purgatory_outcome is PurgatoryOutcome.COMPLETED
    response = node.answer(in_flight)
    assert response.acquisition_lock_timeout.total_seconds() * 1000 == LOCK_MS
    assert _acquired(response) == [(0, 2, 1)]
    assert _partition(response).records


async def test_a_parked_share_fetch_expires_at_max_wait_and_answers_empty(node: Node) -> None:
    in_flight = node.send(SHARE_FETCH, 1, _fetch(node, "m1", 0))
    future = in_flight.future
    assert future is not None
    _advance(node, MAX_WAIT_MS - 1)
    assert not future.done()
    _advance(node, 1)
    assert future.done() and in_flight.ctx is not None
    assert in_flight.ctx.timing.purgatory_outcome is PurgatoryOutcome.EXPIRED
    assert _acquired(node.answer(in_flight)) == []


async def test_a_lock_expiry_completes_another_members_parked_fetch(node: Node) -> None:
    node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m2", 0, max_wait=0)))  # initialise
    _append(node, 2)
    first = node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 0)))
    assert _acquired(first) == [(0, 1, 1)]
    waiting = node.send(SHARE_FETCH, 1, _fetch(node, "m2", 1))
    assert waiting.future is not None and not waiting.future.done()
    _advance(node, LOCK_MS)  # m1 never acknowledged
    assert waiting.future.done()
    assert _acquired(node.answer(waiting)) == [(0, 1, 2)]
    # m1's late acknowledgement is refused and changes nothing
    late = node.answer(node.send(SHARE_ACK, 1, _ack(node, "m1", 1, ((0, 1, 1),))))
    assert _partition(late).error_code == ErrorCode.invalid_record_state


async def test_a_release_completes_another_members_parked_fetch(node: Node) -> None:
    node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m2", 0, max_wait=0)))
    _append(node, 1)
    assert _acquired(node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 0)))) == [(0, 0, 1)]
    waiting = node.send(SHARE_FETCH, 1, _fetch(node, "m2", 1))
    assert waiting.future is not None and not waiting.future.done()
    released = node.send(SHARE_ACK, 1, _ack(node, "m1", 1, ((0, 0, 2),)))
    assert waiting.future.done()
    assert _acquired(node.answer(waiting)) == [(0, 0, 2)]  # answered in request order
    assert _partition(node.answer(released)).error_code == ErrorCode.none


async def test_piggy_backed_acknowledgements_and_their_errors(node: Node) -> None:
    node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 0, max_wait=0)))
    _append(node, 4)  # one batch: record_limit (KIP-1206) splits it at MaxRecords
    limited = _fetch(node, "m1", 1, max_records=2, version=2, mode=1)
    got = node.answer(node.send(SHARE_FETCH, 2, limited))
    assert _acquired(got) == [(0, 1, 1)]
    # another member acknowledging m1's records: INVALID_RECORD_STATE, nothing changes
    limited = _fetch(node, "m2", 0, max_wait=0, max_records=1, version=2, mode=1)
    node.answer(node.send(SHARE_FETCH, 2, limited))
    stolen = node.answer(node.send(SHARE_ACK, 1, _ack(node, "m2", 1, ((0, 1, 1),))))
    assert _partition(stolen).error_code == ErrorCode.invalid_record_state
    # m1 accepts on its next fetch and gets what is left (2 went to m2)
    nxt = node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 2, acks=((0, 1, 1),))))
    part = _partition(nxt)
    assert part.acknowledge_error_code == ErrorCode.none
    assert _acquired(nxt) == [(3, 3, 1)]
    sp = node.dispatcher.services.share_partition_manager.share_partition(GROUP, (TOPIC, 0))
    assert sp is not None and sp.start_offset == 2
    absurd = node.answer(
        node.send(SHARE_FETCH, 1, _fetch(node, "m1", 3, acks=((5, 2**62, 1),), max_wait=0))
    )
    assert _partition(absurd).acknowledge_error_code == ErrorCode.invalid_request


async def test_share_session_epochs(node: Node) -> None:
    def fetch(member: str, epoch: int) -> Any:
        return node.answer(node.send(SHARE_FETCH, 1, _fetch(node, member, epoch, max_wait=0)))

    assert fetch("m1", 1).error_code == ErrorCode.share_session_not_found
    initial_with_acks = node.answer(
        node.send(SHARE_FETCH, 1, _fetch(node, "m1", 0, acks=((0, 0, 1),), max_wait=0))
    )
    assert initial_with_acks.error_code == ErrorCode.invalid_request
    assert fetch("m1", 0).error_code == ErrorCode.none
    assert fetch("m1", 2).error_code == ErrorCode.invalid_share_session_epoch
    assert fetch("m1", 1).error_code == ErrorCode.none
    assert fetch("m1", 2).error_code == ErrorCode.none
    assert fetch("m2", 0).error_code == ErrorCode.none
    assert fetch("m3", 0).error_code == ErrorCode.share_session_limit_reached
    ack = node.answer(node.send(SHARE_ACK, 1, _ack(node, "m2", 0, ())))
    assert ack.error_code == ErrorCode.invalid_share_session_epoch
    closed = node.answer(node.send(SHARE_ACK, 1, _ack(node, "m2", -1, ())))
    assert closed.error_code == ErrorCode.none
    assert fetch("m2", 1).error_code == ErrorCode.share_session_not_found
    assert fetch("m3", 0).error_code == ErrorCode.none  # room again
    unknown = node.answer(
        node.send(SHARE_FETCH, 1, _fetch(node, "m1", 3, max_wait=0, topic_id=uuid.uuid4()))
    )
    assert _partition(unknown).error_code == ErrorCode.unknown_topic_id


async def test_closing_a_session_releases_the_members_records(node: Node) -> None:
    node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 0, max_wait=0)))
    _append(node, 2)
    assert _acquired(node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 1)))) == [(0, 1, 1)]
    node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", -1, acks=((0, 0, 1),))))
    sp = node.dispatcher.services.share_partition_manager.share_partition(GROUP, (TOPIC, 0))
    assert sp is not None and sp.start_offset == 1 and sp.acquired_count == 0
    again = node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m2", 0)))
    assert _acquired(again) == [(1, 1, 2)]


def _ack_v2(node: Node, member: str, epoch: int, first: int, last: int, kind: int) -> Any:
    b = request_builder(SHARE_ACK, 2)
    return b.ShareAcknowledgeRequest(
        group_id=GROUP,
        member_id=member,
        share_session_epoch=epoch,
        is_renew_ack=kind == 4,
        topics=(
            b.AcknowledgeTopic(
                topic_id=_topic_id(node),
                partitions=(
                    b.AcknowledgePartition(
                        partition_index=0,
                        acknowledgement_batches=(
                            b.AcknowledgementBatch(
                                first_offset=first, last_offset=last, acknowledge_types=(kind,)
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )


async def test_renew_from_v2_keeps_the_lock_and_v1_refuses_it(node: Node) -> None:
    node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 0, max_wait=0)))
    _append(node, 1)
    assert _acquired(node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 1)))) == [(0, 0, 1)]
    refused = node.answer(node.send(SHARE_ACK, 1, _ack(node, "m1", 2, ((0, 0, 4),))))
    assert _partition(refused).error_code == ErrorCode.invalid_request
    # KIP-1222: share.renew.acknowledge.enable is false by default (Kafka 4.3)
    disabled = node.answer(node.send(SHARE_ACK, 2, _ack_v2(node, "m1", 3, 0, 0, 4)))
    assert _partition(disabled).error_code == ErrorCode.invalid_record_state
    group_configs = node.dispatcher.services.coordinators.consumer_group.group_configs
    group_configs.alter(GROUP, [("share.renew.acknowledge.enable", "true", 0)], False)
    _advance(node, LOCK_MS - 100)
    renewed = node.answer(node.send(SHARE_ACK, 2, _ack_v2(node, "m1", 4, 0, 0, 4)))
    assert _partition(renewed).error_code == ErrorCode.none
    _advance(node, 500)  # past the first lock's deadline: still m1's
    sp = node.dispatcher.services.share_partition_manager.share_partition(GROUP, (TOPIC, 0))
    assert sp is not None and sp.acquired_count == 1
    accepted = node.answer(node.send(SHARE_ACK, 2, _ack_v2(node, "m1", 5, 0, 0, 1)))
    assert _partition(accepted).error_code == ErrorCode.none and sp.start_offset == 1


async def test_absurd_fetch_values_get_answers_not_crashes(node: Node) -> None:
    # a negative max wait answers at once; a huge one parks (the wheel's overflow)
    now = node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 0, max_wait=-5)))
    assert now.error_code == ErrorCode.none and _acquired(now) == []
    parked = node.send(SHARE_FETCH, 1, _fetch(node, "m1", 1, max_wait=2**31 - 1))
    assert parked.future is not None and not parked.future.done()
    _append(node, 2)
    assert _acquired(node.answer(parked)) == [(0, 1, 1)]
    # max records 0 or negative: no limit of its own (the lock window still bounds it)
    _append(node, 3)
    got = node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 2, max_records=-1)))
    assert _acquired(got) == [(2, 4, 1)]
    # an empty group or member id: INVALID_REQUEST at the top level
    b = request_builder(SHARE_FETCH, 1)
    empty = b.ShareFetchRequest(
        group_id="", member_id="m1", share_session_epoch=0, max_wait=0, min_bytes=1,
        max_bytes=1, max_records=1, batch_size=1, topics=(), forgotten_topics_data=(),
    )  # fmt: skip
    assert node.answer(node.send(SHARE_FETCH, 1, empty)).error_code == ErrorCode.invalid_request


def _m1_holds_0_to_3(
    node: Node,
) -> tuple[SharePartitionManager, SharePartition, StatePersister]:
    """Four records appended and acquired by m1 (session epochs 0 and 1): the manager, the
    share partition and its persister."""
    node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 0, max_wait=0)))
    _append(node, 4)
    assert _acquired(node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 1)))) == [(0, 3, 1)]
    manager = node.dispatcher.services.share_partition_manager
    sp = manager.share_partition(GROUP, (TOPIC, 0))
    assert sp is not None and manager.persister is not None
    return manager, sp, manager.persister


async def test_a_share_partition_fenced_by_a_new_state_epoch_reads_the_new_state(
    node: Node,
) -> None:
    """AlterShareGroupOffsets initialises the state one state epoch later: the leader's
    in-memory share partition, still at the old epoch, is fenced on its next write
    (FENCED_STATE_EPOCH), dropped, and the next fetch reads the new start offset."""
    manager, sp, persister = _m1_holds_0_to_3(node)
    answers: list[ErrorCode] = []
    key = SharePartitionKey(GROUP, _topic_id(node), 0)
    persister.initialize_state(key, sp.state_epoch + 1, 2, answers.append)
    assert answers == [ErrorCode.none]
    acked = node.answer(node.send(SHARE_ACK, 1, _ack(node, "m1", 2, ((0, 3, 1),))))
    assert _partition(acked).error_code == ErrorCode.fenced_state_epoch
    assert manager.share_partition(GROUP, (TOPIC, 0)) is None
    again = node.answer(node.send(SHARE_FETCH, 1, _fetch(node, "m1", 3, max_wait=0)))
    assert _acquired(again) == [(2, 3, 1)]
    answers.clear()
    persister.delete_state(key, answers.append)
    assert answers == [ErrorCode.none]
    assert manager.reset_partitions(GROUP, [(TOPIC, 0), (TOPIC, 1)]) == 1


async def test_an_acknowledgement_a_newer_leader_epoch_fenced_is_not_kept(node: Node) -> None:
    """Another leader of the partition wrote its share state at a newer leader epoch: this
    leader's acknowledgement is refused (FENCED_LEADER_EPOCH, told to the client as Kafka's
    NOT_LEADER_OR_FOLLOWER), rolled back, and the share partition dropped, as Kafka's
    handleFencedSharePartitionException does: nothing of it is written later."""
    manager, sp, persister = _m1_holds_0_to_3(node)
    partition = node.dispatcher.services.replica_manager.online_partition((TOPIC, 0))
    assert partition is not None
    leader_epoch = partition.leader_epoch
    answers: list[ErrorCode] = []
    key = SharePartitionKey(GROUP, _topic_id(node), 0)
    persister.write_state(key, sp.state_epoch, leader_epoch + 1, 0, (), answers.append)
    assert answers == [ErrorCode.none]
    acked = node.answer(node.send(SHARE_ACK, 1, _ack(node, "m1", 2, ((0, 1, 1),))))
    assert _partition(acked).error_code == ErrorCode.not_leader_or_follower
    assert sp.record_state(0) == (RecordState.ACQUIRED, 1, "m1")  # rolled back
    assert sp.start_offset == 0
    assert manager.share_partition(GROUP, (TOPIC, 0)) is None
