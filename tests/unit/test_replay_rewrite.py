"""Rewriting what a fresh broker assigns: member ids, generations, producer ids."""

from __future__ import annotations

import asyncio
import struct
import time
from datetime import timedelta
from typing import Any

from protocol.builders import request_builder, response_builder
from protocol.codec import decode_request, encode_request, encode_response, parse_request_header
from protocol.record_batch import iter_batches, parse_batch_header
from protocol.record_builder import build_record_batch
from spark_jobs.replay_client import (
    CapturedTiming,
    ReplaySchedule,
    causal_prerequisites,
    replay_rows,
)
from spark_jobs.replay_rewrite import (
    FETCH,
    HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    PRODUCE,
    SYNC_GROUP,
    ProducerMapping,
    ReplayRewriter,
    rewrite_producer_in_batches,
)
from testkit.requests import fetch_fields

CONN = "c1"


def _join(member_id: str) -> object:
    b = request_builder(JOIN_GROUP, 5)
    return b.JoinGroupRequest(
        group_id="g",
        session_timeout=timedelta(seconds=10),
        rebalance_timeout=timedelta(seconds=10),
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(),
    )


def _join_response(member_id: str, error: int, generation: int) -> object:
    return response_builder(JOIN_GROUP, 5).JoinGroupResponse(
        throttle_time=timedelta(0),
        error_code=error,
        generation_id=generation,
        protocol_name="range",
        leader=member_id,
        member_id=member_id,
        members=(),
    )


def test_member_id_and_generation_learned_from_join_answers() -> None:
    rw = ReplayRewriter()
    first = rw.rewrite(CONN, JOIN_GROUP, _join(""))
    rw.learn(CONN, JOIN_GROUP, first, _join_response("new-1", 79, -1))  # MEMBER_ID_REQUIRED
    second = rw.rewrite(CONN, JOIN_GROUP, _join("old-1"))
    assert second.member_id == "new-1"
    rw.learn(CONN, JOIN_GROUP, second, _join_response("new-1", 0, 7))
    s = request_builder(SYNC_GROUP, 3)
    sync = s.SyncGroupRequest(
        group_id="g",
        generation_id=1,
        member_id="old-1",
        group_instance_id=None,
        assignments=(s.SyncGroupRequestAssignment(member_id="old-1", assignment=b"x"),),
    )
    out = rw.rewrite(CONN, SYNC_GROUP, sync)
    assert (out.member_id, out.generation_id) == ("new-1", 7)
    assert out.assignments[0].member_id == "new-1"
    hb = request_builder(HEARTBEAT, 4).HeartbeatRequest(
        group_id="g", generation_id=1, member_id="old-1", group_instance_id=None
    )
    out = rw.rewrite(CONN, HEARTBEAT, hb)
    assert (out.member_id, out.generation_id) == ("new-1", 7)


def test_unknown_ids_pass_unchanged_before_anything_is_learned() -> None:
    rw = ReplayRewriter()
    hb = request_builder(HEARTBEAT, 4).HeartbeatRequest(
        group_id="g", generation_id=3, member_id="m", group_instance_id=None
    )
    assert rw.rewrite(CONN, HEARTBEAT, hb) is hb


def _batch(pid: int, epoch: int) -> bytes:
    return build_record_batch(
        [(None, b"v", [])], timestamp_ms=1, producer_id=pid, producer_epoch=epoch, base_sequence=0
    )


def test_producer_id_rewritten_with_a_valid_crc() -> None:
    records = _batch(1000, 0) + _batch(-1, -1)
    out, unknown = rewrite_producer_in_batches(records, {1000: ProducerMapping(0, 42, 3)})
    assert unknown == []
    headers = [h for _, h in iter_batches(out, verify_crc=True)]  # raises on a bad CRC
    assert [(h.producer_id, h.producer_epoch) for h in headers] == [(42, 3), (-1, -1)]


def test_produce_learns_producer_from_init_producer_id() -> None:
    rw = ReplayRewriter()
    init = request_builder(INIT_PRODUCER_ID, 4).InitProducerIdRequest(
        transactional_id=None,
        transaction_timeout=timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )
    rw.learn(
        CONN,
        INIT_PRODUCER_ID,
        init,
        response_builder(INIT_PRODUCER_ID, 4).InitProducerIdResponse(
            throttle_time=timedelta(0), error_code=0, producer_id=77, producer_epoch=0
        ),
    )
    produce = _produce(_batch(5, 0))
    out = rw.rewrite(CONN, PRODUCE, produce)
    header = parse_batch_header(out.topic_data[0].partition_data[0].records)
    assert header.producer_id == 77


def _init_answer(rw: ReplayRewriter, connection: str, pid: int, epoch: int) -> None:
    init = request_builder(INIT_PRODUCER_ID, 4).InitProducerIdRequest(
        transactional_id="tx",
        transaction_timeout=timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )
    rw.learn(
        connection,
        INIT_PRODUCER_ID,
        init,
        response_builder(INIT_PRODUCER_ID, 4).InitProducerIdResponse(
            throttle_time=timedelta(0), error_code=0, producer_id=pid, producer_epoch=epoch
        ),
    )


def test_a_transaction_names_the_new_producer_everywhere() -> None:
    """Captured: producer 5 at epoch 2. The new broker answered 77 at epoch 0."""
    rw = ReplayRewriter()
    _init_answer(rw, CONN, 77, 0)
    add = request_builder(24, 3).AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=5,
        v3_and_below_producer_epoch=2,
        v3_and_below_topics=(),
    )
    out = rw.rewrite(CONN, 24, add)
    assert (out.v3_and_below_producer_id, out.v3_and_below_producer_epoch) == (77, 0)
    offsets = request_builder(25, 3).AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=5, producer_epoch=2, group_id="g"
    )
    out = rw.rewrite(CONN, 25, offsets)
    assert (out.producer_id, out.producer_epoch) == (77, 0)
    commit = request_builder(28, 3).TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id="g",
        producer_id=5,
        producer_epoch=2,
        generation_id=1,
        member_id="old-1",
        group_instance_id=None,
        topics=(),
    )
    rw.learn(CONN, JOIN_GROUP, _join(""), _join_response("new-1", 0, 4))
    out = rw.rewrite(CONN, 28, commit)
    assert (out.producer_id, out.producer_epoch, out.member_id, out.generation_id) == (
        77,
        0,
        "new-1",
        4,
    )
    end = request_builder(26, 3).EndTxnRequest(
        transactional_id="tx", producer_id=5, producer_epoch=2, committed=True
    )
    out = rw.rewrite(CONN, 26, end)
    assert (out.producer_id, out.producer_epoch) == (77, 0)


def test_epochs_stay_in_step_when_the_producer_is_initialised_again() -> None:
    """A restarted transactional producer: captured epoch 3, one above the first seen."""
    rw = ReplayRewriter()
    _init_answer(rw, CONN, 77, 0)
    b = request_builder(24, 4)
    batch_of_two = b.AddPartitionsToTxnRequest(
        transactions=(
            b.AddPartitionsToTxnTransaction(
                transactional_id="tx", producer_id=5, producer_epoch=2, verify_only=False, topics=()
            ),
            b.AddPartitionsToTxnTransaction(
                transactional_id="tx", producer_id=5, producer_epoch=3, verify_only=False, topics=()
            ),
        )
    )
    out = rw.rewrite(CONN, 24, batch_of_two)
    assert [(t.producer_id, t.producer_epoch) for t in out.transactions] == [(77, 0), (77, 1)]
    out_batch = rw.rewrite(CONN, PRODUCE, _produce(_batch(5, 3)))
    header = parse_batch_header(out_batch.topic_data[0].partition_data[0].records)
    assert (header.producer_id, header.producer_epoch) == (77, 1)


def _produce(records: bytes) -> Any:
    b = request_builder(PRODUCE, 9)
    return b.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=timedelta(seconds=30),
        topic_data=(
            b.TopicProduceData(
                name="t", partition_data=(b.PartitionProduceData(index=0, records=records),)
            ),
        ),
    )


def _session_fetch(session_id: int, epoch: int) -> Any:
    fields = fetch_fields("t", 0, 500, version=12)
    fields.update(session_id=session_id, session_epoch=epoch)
    return request_builder(FETCH, 12).FetchRequest(**fields)


def _fetch_answer(session_id: int) -> Any:
    return response_builder(FETCH, 12).FetchResponse(
        throttle_time=timedelta(0), error_code=0, session_id=session_id, responses=()
    )


def test_fetch_sessions_are_mapped_to_the_new_brokers_ids() -> None:
    rw = ReplayRewriter()
    sessionless = _session_fetch(0, -1)
    assert rw.rewrite(CONN, FETCH, sessionless) is sessionless
    opening = rw.rewrite(CONN, FETCH, _session_fetch(0, 0))
    rw.learn(CONN, FETCH, opening, _fetch_answer(555))
    assert rw.rewrite(CONN, FETCH, _session_fetch(77, 1)).session_id == 555
    assert rw.rewrite(CONN, FETCH, _session_fetch(77, 2)).session_epoch == 2
    reopened = rw.rewrite(CONN, FETCH, _session_fetch(0, 0))  # e.g. after an error
    rw.learn(CONN, FETCH, reopened, _fetch_answer(666))
    assert rw.rewrite(CONN, FETCH, _session_fetch(88, 1)).session_id == 666
    assert rw.rewrite(CONN, FETCH, _session_fetch(77, 3)).session_id == 555
    # Another connection's sessions are its own.
    assert rw.rewrite("c2", FETCH, _session_fetch(77, 1)).session_id == 77


# -- causality across a client's connections ------------------------------------------


def test_a_request_waits_for_what_its_client_was_answered_on_other_connections() -> None:
    # The dying member: FindCoordinator on broker 0, then its JoinGroups on broker 1.
    find = CapturedTiming("client:dying", connection=0, received_us=1000, done_us=1100)
    join_1 = CapturedTiming("client:dying", connection=1, received_us=1200, done_us=1300)
    join_2 = CapturedTiming("client:dying", connection=1, received_us=1400, done_us=1500)
    # Another client, sent after the FindCoordinator was answered: not its answer.
    other = CapturedTiming("client:other", connection=2, received_us=1250, done_us=1260)
    # Pipelined on one connection: sent before the previous answer, so no wait.
    pipelined = CapturedTiming("client:dying", connection=0, received_us=1050, done_us=1600)
    plan = causal_prerequisites([find, pipelined, join_1, join_2, other])
    assert plan == [[], [], [0], [2], []]


def test_no_wait_on_a_request_of_another_connection_received_at_the_same_instant() -> None:
    # Answered in no time, both at one instant: neither can have caused the other, and
    # waiting both ways would deadlock.
    a = CapturedTiming("client:c", connection=0, received_us=5, done_us=5)
    b = CapturedTiming("client:c", connection=1, received_us=5, done_us=5)
    assert causal_prerequisites([a, b]) == [[], []]


FIND_COORDINATOR, API_VERSIONS = 10, 18
COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED = 15, 25, 79


class _FreshCluster:
    """Two fake brokers that answer like a fresh minikafka cluster: a JoinGroup before any
    FindCoordinator has created ``__consumer_offsets`` gets COORDINATOR_NOT_AVAILABLE, an
    id the group never issued UNKNOWN_MEMBER_ID. To play a replay task that runs late, broker
    0 handles the first FindCoordinator only once a request of client "other" has come."""

    def __init__(self) -> None:
        self.offsets_topic = False
        self.other_arrived = asyncio.Event()
        self.issued: set[str] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                header, offset = parse_request_header(frame)
                request = decode_request(header, frame, offset)
                response = await self._answer(header.api_key, header.client_id, request)
                writer.write(
                    encode_response(
                        header.api_key, header.api_version, header.correlation_id, response
                    )
                )
        except asyncio.IncompleteReadError:
            writer.close()

    async def _answer(self, api_key: int, client_id: str | None, request: Any) -> Any:
        if client_id == "other":
            self.other_arrived.set()
        if api_key == API_VERSIONS:
            return response_builder(API_VERSIONS, 0).ApiVersionsResponse(error_code=0, api_keys=())
        if api_key == FIND_COORDINATOR:
            await self.other_arrived.wait()
            self.offsets_topic = True
            return response_builder(FIND_COORDINATOR, 1).FindCoordinatorResponse(
                throttle_time=timedelta(0),
                error_code=0,
                error_message=None,
                node_id=1,
                host="127.0.0.1",
                port=0,
            )
        assert api_key == JOIN_GROUP
        if not self.offsets_topic:
            return _join_response("", COORDINATOR_NOT_AVAILABLE, -1)
        if not request.member_id:
            self.issued.add(f"new-{len(self.issued) + 1}")
            return _join_response(f"new-{len(self.issued)}", MEMBER_ID_REQUIRED, -1)
        if request.member_id not in self.issued:
            return _join_response("", UNKNOWN_MEMBER_ID, -1)
        return _join_response(request.member_id, 0, 1)


def _row(broker: int, connection: str, seq: int, client: str, at_ms: float, frame: bytes) -> Any:
    header, _ = parse_request_header(frame[4:])
    return {
        "broker_id": broker,
        "connection_id": connection,
        "sequence": seq,
        "api_key": header.api_key,
        "api_name": str(header.api_key),
        "api_version": header.api_version,
        "client_id": client,
        "request": frame[4:],  # captured frames carry no length prefix
        "received_unix_us": int(at_ms * 1000),
        "total_time_ms": 0.5,
        "remote_time_ms": 0.0,
        "purgatory": None,
        "purgatory_outcome": None,
    }


async def test_join_group_is_not_sent_before_the_find_coordinator_answer_of_its_client() -> None:
    """The flaky e2e replay: the dying member's FindCoordinator (broker 0) and JoinGroups
    (broker 1) are two connections of one client. Replayed independently, the JoinGroup
    overtook the late FindCoordinator, got COORDINATOR_NOT_AVAILABLE without a member id,
    and the rejoin then carried the captured member id: UNKNOWN_MEMBER_ID."""
    cluster = _FreshCluster()
    servers = [await asyncio.start_server(cluster.serve, "127.0.0.1", 0) for _ in range(2)]
    addresses = {i: server.sockets[0].getsockname()[:2] for i, server in enumerate(servers)}
    find = request_builder(FIND_COORDINATOR, 1).FindCoordinatorRequest(key="g", key_type=0)
    versions = request_builder(API_VERSIONS, 0).ApiVersionsRequest()
    rows = [
        _row(0, "find", 0, "dying", 0.0, encode_request(FIND_COORDINATOR, 1, 1, "dying", find)),
        _row(1, "join", 0, "dying", 2.0, encode_request(JOIN_GROUP, 5, 2, "dying", _join(""))),
        _row(1, "join", 1, "dying", 3.0, encode_request(JOIN_GROUP, 5, 3, "dying", _join("old"))),
        # Another client, later on the schedule: its arrival lets broker 0 answer.
        _row(0, "other", 0, "other", 30.0, encode_request(API_VERSIONS, 0, 1, "other", versions)),
    ]
    schedule = ReplaySchedule(
        addresses=addresses,
        start_unix_s=time.time(),
        first_received_us=0,
        response_timeout_s=10.0,
    )
    try:
        results = await asyncio.to_thread(lambda: list(replay_rows(rows, schedule)))
    finally:
        for server in servers:
            server.close()
    joins = [(r[4], r[12], r[13]) for r in results if r[0] == JOIN_GROUP]
    assert joins == [(0, [MEMBER_ID_REQUIRED], None), (1, [0], None)]


def test_client_telemetry_is_skipped_not_replayed() -> None:
    """KIP-714's requests carry the captured broker's instance and subscription ids and
    report the client, not load: a skip with its reason, as inter-broker requests."""
    import uuid

    from spark_jobs.traffic import SKIP_CLIENT_TELEMETRY

    get = request_builder(71, 0).GetTelemetrySubscriptionsRequest(
        client_instance_id=uuid.UUID(int=0)
    )
    assert ReplayRewriter.skip_reason(71, get) == SKIP_CLIENT_TELEMETRY
    push = request_builder(72, 0).PushTelemetryRequest(
        client_instance_id=uuid.UUID(int=5),
        subscription_id=1,
        terminating=False,
        compression_type=4,
        metrics=b"",
    )
    assert ReplayRewriter.skip_reason(72, push) == SKIP_CLIENT_TELEMETRY
    assert ReplayRewriter.skip_reason(3, object()) is None
