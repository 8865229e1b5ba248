"""The group coordinator's side of transactions: TxnOffsetCommit, and the markers.

Kafka's ``GroupCoordinator.handleTxnCommitOffsets`` and
``GroupMetadataManager.storeOffsets`` for a transactional producer, and
``handleTxnCompletion`` (``scheduleHandleTxnCompletion``):

* **TxnOffsetCommit** (``handle_txn_commit_offsets``): validated as Kafka's
  ``validateTransactionalOffsetCommit`` (``validate_txn_offset_commit``): a KIP-848
  consumer group's member by member id and member epoch (the request's generation id)
  beside the consumer group, a classic group's by member id, instance id and generation;
  older clients (before v3) name nobody and are accepted as Kafka accepts them. A zombie
  (a member fenced, or whose epoch moved on in a rebalance) gets UNKNOWN_MEMBER_ID or
  ILLEGAL_GENERATION and its producer aborts. The rule does not depend on the request's
  version. Accepted, the offsets are put *pending* for
  the producer (``PendingTxnOffsets``), then written to ``__consumer_offsets`` as one
  transactional batch of that producer id and epoch, acks=all — the request waits in the
  Produce purgatory meanwhile. The log checks the epoch: a fenced producer's write is
  refused (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH reach the client as they are).
* **The marker** (``handle_txn_completion``): once WriteTxnMarkers has written a
  producer's COMMIT or ABORT into an offsets partition, the pending offsets of that
  producer in that partition's groups become committed offsets, or are dropped.

Functions over the coordinator and its manager, as ``group_join.py`` and
``group_sync.py`` are.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from kio.schema.errors import ErrorCode

from broker.group.append_errors import commit_error
from broker.group.group_coordinator import GroupCoordinator
from broker.group.group_log import OffsetCommitRecord, Record
from broker.group.group_metadata import GroupMetadata
from broker.group.group_metadata_manager import CommitValue, GroupMetadataManager
from broker.group.group_state import GroupState
from broker.group.results import UNKNOWN_MEMBER_ID, CommitCallback, TopicPartition
from broker.group.txn_offsets import complete_pending_txn_offsets
from broker.server.purgatories import ParkedRequest

log = logging.getLogger("broker.group")

E = ErrorCode

# Errors of a transactional append the client must see as they are (it is fenced, or its
# transaction is not in a state to write), not as a coordinator problem.
_PRODUCER_ERRORS = frozenset(
    {
        E.producer_fenced,
        E.invalid_producer_epoch,
        E.invalid_txn_state,
        E.invalid_producer_id_mapping,
        E.transaction_coordinator_fenced,
    }
)


def txn_commit_error(append_error: ErrorCode) -> ErrorCode:
    """TxnOffsetCommit's error for a failed append (Kafka keeps producer errors)."""
    if append_error in _PRODUCER_ERRORS:
        return append_error
    return commit_error(append_error)


def handle_txn_commit_offsets(
    coordinator: GroupCoordinator,
    group_id: str,
    producer_id: int,
    producer_epoch: int,
    member_id: str,
    group_instance_id: str | None,
    generation_id: int,
    offsets: Mapping[tuple[str, int], CommitValue],
    response_callback: CommitCallback,
    parked_request: ParkedRequest | None = None,
) -> None:
    """TxnOffsetCommit, to the group coordinator (the handler checked placement).
    ``response_callback`` gets an error per partition, now or when the append is done."""
    group = validate_txn_offset_commit(
        coordinator, group_id, member_id, group_instance_id, generation_id
    )
    if isinstance(group, ErrorCode):
        response_callback({TopicPartition(*tp): group for tp in offsets})
        return
    store_txn_offsets(
        coordinator.group_manager,
        group,
        producer_id,
        producer_epoch,
        offsets,
        response_callback,
        parked_request,
    )


def validate_txn_offset_commit(
    coordinator: GroupCoordinator,
    group_id: str,
    member_id: str,
    group_instance_id: str | None,
    generation_id: int,
) -> GroupMetadata | ErrorCode:
    """Kafka's ``OffsetMetadataManager.validateTransactionalOffsetCommit``: the group that
    keeps the offsets when the commit is accepted, else the error.

    A KIP-848 consumer group's commit is checked beside that group
    (``consumer/offset_validation.py``: member id, and the generation id as the member
    epoch), STALE_MEMBER_EPOCH answered as ILLEGAL_GENERATION as Kafka answers it; its
    offsets live in the Empty classic group of its id. A streams group's (KIP-1071) the
    same way. An unknown group is created
    (a "simple" group) for generation -1, and is ILLEGAL_GENERATION otherwise; a classic
    group's is ``ClassicGroup.validateOffsetCommit(isTransactional = true)``."""
    manager = coordinator.group_manager
    consumer_groups = coordinator.consumer_groups
    if consumer_groups is not None and consumer_groups.is_consumer_group(group_id):
        error = consumer_groups.validate_offset_commit(
            group_id, member_id, generation_id, group_instance_id, is_transactional=True
        )
        if error is E.stale_member_epoch:
            error = E.illegal_generation
        return error if error is not None else _offsets_holder(manager, group_id)
    streams = coordinator.streams_groups
    if streams is not None and streams.is_streams_group(group_id):  # KIP-1071, the same way
        error = streams.validate_offset_commit(
            group_id, member_id, generation_id, is_transactional=True
        )
        if error is E.stale_member_epoch:
            error = E.illegal_generation
        return error if error is not None else _offsets_holder(manager, group_id)
    group = manager.get_or_maybe_create_group(group_id, False)
    if group is None:
        if generation_id >= 0:
            return E.illegal_generation
        log.info(
            "[GroupId %s] Creating a simple consumer group via manual offset commit.", group_id
        )
        return _offsets_holder(manager, group_id)
    error = _validate_classic_txn_offset_commit(
        coordinator, group, generation_id, member_id, group_instance_id
    )
    return error if error is not None else group


def _offsets_holder(manager: GroupMetadataManager, group_id: str) -> GroupMetadata:
    """The classic group of the id (created Empty when there is none), which keeps the
    offsets of a simple group and of a KIP-848 consumer group."""
    group = manager.get_or_maybe_create_group(group_id, True)
    assert group is not None
    return group


def _validate_classic_txn_offset_commit(
    coordinator: GroupCoordinator,
    group: GroupMetadata,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
) -> ErrorCode | None:
    """Kafka's ``ClassicGroup.validateOffsetCommit(isTransactional = true)``: generation -1
    is accepted while the group is Empty; a commit that names a member (member id,
    generation or instance id, v3+) is checked as a member's (UNKNOWN_MEMBER_ID,
    FENCED_INSTANCE_ID, ILLEGAL_GENERATION); one that names nobody is accepted whatever
    the group's state, and CompletingRebalance refuses nothing here (both unlike a plain
    OffsetCommit)."""
    if group.is_in(GroupState.DEAD):
        return E.coordinator_not_available
    if generation_id < 0 and group.is_in(GroupState.EMPTY):
        return None
    if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
        error = coordinator.validate_current_member(
            group, member_id, group_instance_id, "txn-offset-commit"
        )
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return E.illegal_generation
    return None


def store_txn_offsets(
    manager: GroupMetadataManager,
    group: GroupMetadata,
    producer_id: int,
    producer_epoch: int,
    offsets: Mapping[tuple[str, int], CommitValue],
    callback: CommitCallback,
    parked_request: ParkedRequest | None = None,
) -> None:
    """Kafka's ``storeOffsets`` for a transactional producer: pending now, written as
    the producer's transactional batch, committed by its marker."""
    results, accepted = manager.accept_offsets(offsets)
    if not accepted:
        callback(results)
        return
    group.pending_txn_offsets.prepare_txn_offset_commit(producer_id, accepted)
    records: list[Record] = [
        OffsetCommitRecord(group.group_id, tp.topic, tp.partition, om)
        for tp, om in accepted.items()
    ]

    def on_appended(append_error: ErrorCode) -> None:
        error = txn_commit_error(append_error)
        pending = group.pending_txn_offsets
        for tp, om in accepted.items():
            if error is E.none:
                pending.on_txn_offset_commit_append(producer_id, tp, om)
            else:
                pending.fail_pending_txn_offset_commit(producer_id, tp)
            results[tp] = error
        if error is not E.none:
            log.debug(
                "Transactional offset commit of group %s (producer %d) failed when appending "
                "to __consumer_offsets: %s",
                group.group_id,
                producer_id,
                append_error.name,
            )
        callback(results)

    manager._append_for_group(
        group.group_id, records, on_appended, parked_request, producer=(producer_id, producer_epoch)
    )


def handle_txn_completion(
    manager: GroupMetadataManager, producer_id: int, partitions: Collection[int], is_commit: bool
) -> int:
    """A producer's marker is in these ``__consumer_offsets`` partitions: its pending
    offsets there are committed (or dropped); in a partition still loading, once it is
    loaded. Returns how many groups it completed now."""
    manager.defer_txn_completion_while_loading(producer_id, partitions, is_commit)
    return complete_pending_txn_offsets(
        [g for g in manager.current_groups if manager.partition_for(g.group_id) in partitions],
        producer_id,
        is_commit,
    )
