"""What the transactional APIs share: the error an older client gets for a fenced producer.

KIP-588 added PRODUCER_FENCED; a client of a version before it knows only
INVALID_PRODUCER_EPOCH, which Kafka answers instead (InitProducerId before v4,
AddPartitionsToTxn, AddOffsetsToTxn and EndTxn before v2). And the check they all make
with an authorizer: WRITE on the transactional id.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.authorizer.authorization import AclOperation, ResourceType, authorize
from broker.server.context import RequestContext


def fenced_error_for_version(
    error: ErrorCode, api_version: int, producer_fenced_version: int
) -> ErrorCode:
    """``error``, with PRODUCER_FENCED turned into INVALID_PRODUCER_EPOCH for a request
    older than ``producer_fenced_version``."""
    if error is ErrorCode.producer_fenced and api_version < producer_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return error


def txn_id_denied(ctx: RequestContext, transactional_id: str) -> bool:
    """Whether an authorizer refuses WRITE on the transactional id: the transactional
    APIs then answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as ``KafkaApis``."""
    if ctx.services.security.authorizer is None:
        return False
    return not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
