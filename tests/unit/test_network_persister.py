"""How the network persister reads the share coordinator's answers: a partition's error,
its state (start offset, state epoch, batches), and COORDINATOR_NOT_AVAILABLE for a
coordinator that could not be reached (the manager retries that)."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from broker.share.network_persister import _read_result
from broker.share_coordinator.share_state_records import PersisterStateBatch
from protocol.builders import response_builder


def _read_response(error: ErrorCode, start: int = 4) -> object:
    b = response_builder(84, 0)
    batch = b.StateBatch(first_offset=4, last_offset=6, delivery_state=0, delivery_count=2)
    partition = b.PartitionResult(
        partition=0,
        error_code=error,
        error_message=None,
        state_epoch=3,
        start_offset=start,
        state_batches=(batch,),
    )
    return b.ReadShareGroupStateResponse(
        results=(b.ReadStateResult(topic_id=uuid.UUID(int=1), partitions=(partition,)),)
    )


def test_a_read_answer_becomes_the_state() -> None:
    error, state = _read_result(_read_response(ErrorCode.none))
    assert error is ErrorCode.none
    assert (state.state_epoch, state.start_offset) == (3, 4)
    assert state.state_batches == (PersisterStateBatch(4, 6, 0, 2),)


def test_errors_and_unreachable_coordinators() -> None:
    error, state = _read_result(_read_response(ErrorCode.coordinator_load_in_progress))
    assert error is ErrorCode.coordinator_load_in_progress and state.start_offset == -1
    assert _read_result(None)[0] is ErrorCode.coordinator_not_available
    empty = response_builder(84, 0).ReadShareGroupStateResponse(results=())
    assert _read_result(empty)[0] is ErrorCode.unknown_server_error
