"""Replaying share groups: member epochs and share session epochs follow the new broker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.builders import request_builder, response_builder
from spark_jobs.replay_rewrite import DECODE_APIS, LEARN_APIS, ReplayRewriter
from spark_jobs.replay_share_rewrite import SHARE_ACKNOWLEDGE, SHARE_FETCH, SHARE_GROUP_HEARTBEAT

CONN = "c1"


def _heartbeat(member: str, epoch: int) -> Any:
    b = request_builder(SHARE_GROUP_HEARTBEAT, 1)
    return b.ShareGroupHeartbeatRequest(
        group_id="g", member_id=member, member_epoch=epoch, subscribed_topic_names=("t",)
    )


def _heartbeat_answer(member: str, epoch: int) -> Any:
    b = response_builder(SHARE_GROUP_HEARTBEAT, 1)
    return b.ShareGroupHeartbeatResponse(
        throttle_time=timedelta(0),
        error_code=ErrorCode.none,
        member_id=member,
        member_epoch=epoch,
        heartbeat_interval=timedelta(seconds=5),
    )


def _fetch(member: str, epoch: int) -> Any:
    b = request_builder(SHARE_FETCH, 1)
    return b.ShareFetchRequest(
        group_id="g", member_id=member, share_session_epoch=epoch, max_wait=timedelta(0),
        min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500, topics=(),
        forgotten_topics_data=(),
    )  # fmt: skip


def _ack(member: str, epoch: int) -> Any:
    b = request_builder(SHARE_ACKNOWLEDGE, 1)
    return b.ShareAcknowledgeRequest(
        group_id="g", member_id=member, share_session_epoch=epoch, topics=()
    )


def _answer(api_key: int, error: ErrorCode = ErrorCode.none) -> Any:
    b = response_builder(api_key, 1)
    name = "ShareFetchResponse" if api_key == SHARE_FETCH else "ShareAcknowledgeResponse"
    fields: dict[str, Any] = {"throttle_time": timedelta(0), "error_code": error}
    if api_key == SHARE_FETCH:
        fields["acquisition_lock_timeout"] = timedelta(seconds=30)
    return getattr(b, name)(**fields, responses=(), node_endpoints=())


def _send(rewriter: ReplayRewriter, api_key: int, captured: Any, answer: Any) -> Any:
    sent = rewriter.rewrite(CONN, api_key, captured)
    rewriter.learn(CONN, api_key, sent, answer)
    return sent


def test_the_share_apis_are_decoded_and_learned_from() -> None:
    assert {SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE} <= DECODE_APIS & LEARN_APIS


def test_member_epochs_follow_what_the_new_broker_answered() -> None:
    rewriter = ReplayRewriter()
    joined = _send(rewriter, SHARE_GROUP_HEARTBEAT, _heartbeat("m", 0), _heartbeat_answer("m", 5))
    assert joined.member_epoch == 0  # a join goes as captured
    # captured at epoch 3 (the capture's broker had answered 3): the new broker said 5
    beat = _send(rewriter, SHARE_GROUP_HEARTBEAT, _heartbeat("m", 3), _heartbeat_answer("m", 6))
    assert (beat.member_id, beat.member_epoch) == ("m", 5)
    assert rewriter.rewrite(CONN, SHARE_GROUP_HEARTBEAT, _heartbeat("m", 4)).member_epoch == 6
    assert rewriter.rewrite(CONN, SHARE_GROUP_HEARTBEAT, _heartbeat("m", -1)).member_epoch == -1
    # unknown members pass unchanged
    assert rewriter.rewrite(CONN, SHARE_GROUP_HEARTBEAT, _heartbeat("x", 7)).member_epoch == 7


def test_a_member_id_the_broker_answered_differently_is_mapped_everywhere() -> None:
    rewriter = ReplayRewriter()
    _send(rewriter, SHARE_GROUP_HEARTBEAT, _heartbeat("m", 0), _heartbeat_answer("new-m", 1))
    assert rewriter.rewrite(CONN, SHARE_GROUP_HEARTBEAT, _heartbeat("m", 1)).member_id == "new-m"
    assert rewriter.rewrite(CONN, SHARE_FETCH, _fetch("m", 0)).member_id == "new-m"
    assert rewriter.rewrite(CONN, SHARE_ACKNOWLEDGE, _ack("m", 1)).member_id == "new-m"


def test_share_session_epochs_stay_in_step_with_the_new_broker() -> None:
    rewriter = ReplayRewriter()
    assert (
        _send(rewriter, SHARE_FETCH, _fetch("m", 0), _answer(SHARE_FETCH)).share_session_epoch == 0
    )
    # answered as captured: nothing to change
    same = _send(rewriter, SHARE_FETCH, _fetch("m", 1), _answer(SHARE_FETCH))
    assert same.share_session_epoch == 1
    # the new broker refused epoch 2 (say, a session error): the session stays at 2
    refused = _answer(SHARE_FETCH, ErrorCode.invalid_share_session_epoch)
    assert _send(rewriter, SHARE_FETCH, _fetch("m", 2), refused).share_session_epoch == 2
    # so the captured epoch 3 goes as the 2 the new broker expects, and so on
    ack = _send(rewriter, SHARE_ACKNOWLEDGE, _ack("m", 3), _answer(SHARE_ACKNOWLEDGE))
    assert ack.share_session_epoch == 2
    assert rewriter.rewrite(CONN, SHARE_FETCH, _fetch("m", 4)).share_session_epoch == 3
    # closing forgets the session; a new one opens at 0 as captured
    _send(rewriter, SHARE_FETCH, _fetch("m", -1), _answer(SHARE_FETCH))
    assert rewriter.rewrite(CONN, SHARE_FETCH, _fetch("m", 5)).share_session_epoch == 5
