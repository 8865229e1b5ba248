"""Rewriting what a fresh broker assigns: member ids, generations, producer ids."""

from __future__ import annotations

from datetime import timedelta

from protocol.builders import request_builder, response_builder
from protocol.record_batch import build_record_batch, iter_batches, parse_batch_header
from spark_jobs.replay_rewrite import (
    HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    PRODUCE,
    SYNC_GROUP,
    ReplayRewriter,
    rewrite_producer_in_batches,
)

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
    out, unknown = rewrite_producer_in_batches(records, {1000: (42, 3)})
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
    b = request_builder(PRODUCE, 9)
    produce = b.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=timedelta(seconds=30),
        topic_data=(
            b.TopicProduceData(
                name="t", partition_data=(b.PartitionProduceData(index=0, records=_batch(5, 0)),)
            ),
        ),
    )
    out = rw.rewrite(CONN, PRODUCE, produce)
    header = parse_batch_header(out.topic_data[0].partition_data[0].records)
    assert header.producer_id == 77
