"""The errors a group request gets when its append to ``__consumer_offsets`` failed
(Kafka's mappings in ``GroupMetadataManager.storeOffsets`` and ``storeGroup``).

The append's own error (``GroupLog.append_to_log``'s callback) is mapped to one the
client knows what to do with: retry, rediscover the coordinator, or rejoin.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.coordinator.coordinator_partitions import (
    LEADER_MOVED_ERRORS,
    PARTITION_UNAVAILABLE_ERRORS,
)

E = ErrorCode

# An append too large for the offsets topic.
_RECORDS_TOO_LARGE_ERRORS = frozenset(
    {E.message_too_large, E.record_list_too_large, E.invalid_fetch_size}
)


def commit_error(append_error: ErrorCode) -> ErrorCode:
    """OffsetCommit's error for a failed append to ``__consumer_offsets`` (Kafka's
    ``storeOffsets``): the client retries or rediscovers the coordinator on these."""
    if append_error is E.none:
        return E.none
    if append_error in PARTITION_UNAVAILABLE_ERRORS or append_error is E.request_timed_out:
        return E.coordinator_not_available
    if append_error in LEADER_MOVED_ERRORS:
        return E.not_coordinator
    if append_error in _RECORDS_TOO_LARGE_ERRORS:
        return E.invalid_commit_offset_size
    return E.unknown_server_error


def store_group_error(append_error: ErrorCode) -> ErrorCode:
    """SyncGroup's (and a static rejoin's) error for a failed group-metadata append
    (Kafka's ``storeGroup``): a timeout asks the members to rejoin."""
    if append_error in PARTITION_UNAVAILABLE_ERRORS:
        return E.coordinator_not_available
    if append_error in LEADER_MOVED_ERRORS:
        return E.not_coordinator
    if append_error is E.request_timed_out:
        return E.rebalance_in_progress
    if append_error in _RECORDS_TOO_LARGE_ERRORS:
        return E.unknown_server_error
    return append_error


def coordinator_write_error(append_error: ErrorCode) -> ErrorCode:
    """A KIP-848 request's error for a failed write of its group's records (Kafka's
    ``GroupCoordinatorService.handleOperationException``): the client rediscovers the
    coordinator and retries."""
    if append_error is E.none:
        return E.none
    if append_error in PARTITION_UNAVAILABLE_ERRORS or append_error is E.request_timed_out:
        return E.coordinator_not_available
    if append_error in LEADER_MOVED_ERRORS:
        return E.not_coordinator
    return E.unknown_server_error
