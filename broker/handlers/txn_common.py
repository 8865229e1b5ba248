"""What the transactional APIs share: the error an older client gets for a fenced producer.

KIP-588 added PRODUCER_FENCED; a client of a version before it knows only
INVALID_PRODUCER_EPOCH, which Kafka answers instead (InitProducerId before v4,
AddPartitionsToTxn, AddOffsetsToTxn and EndTxn before v2).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


def fenced_error_for_version(
    error: ErrorCode, api_version: int, producer_fenced_version: int
) -> ErrorCode:
    """``error``, with PRODUCER_FENCED turned into INVALID_PRODUCER_EPOCH for a request
    older than ``producer_fenced_version``."""
    if error is ErrorCode.producer_fenced and api_version < producer_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return error
