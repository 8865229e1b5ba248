"""Transactional offset commits waiting for their transaction's marker.

Kafka's ``GroupMetadata.pendingTransactionalOffsetCommits``: a TxnOffsetCommit's offsets
are written to ``__consumer_offsets`` at once (a transactional batch of the producer),
but they become the group's committed offsets only when the transaction commits — when
the COMMIT marker lands in that partition (``complete_pending_txn_offset_commit``) —
and are dropped on ABORT. Meanwhile OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for those partitions, so a consumer starting up does not read
from an offset that may yet be rolled back.

A partition being loaded does the same (``group_loader.load_partition``): records of a
committed transaction take effect at their marker, those of an aborted one never, and
those with no marker yet come back pending (``restore_pending_txn_offsets``).

Where this differs from Kafka: a committed transactional offset replaces the group's
current one for that partition even when a plain OffsetCommit was written between the
transaction's offset record and its marker (Kafka keeps the later record by log
offset); transactional offsets whose record is not written yet are dropped (Kafka
raises: it cannot happen there).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from broker.group.group_log import KeyValue, OffsetCommitRecord, decode_record
from broker.group.group_state import GroupState
from broker.group.offsets import OffsetAndMetadata
from broker.group.results import TopicPartition

log = logging.getLogger("broker.group")


@dataclass(slots=True)
class PendingTxnOffset:
    """Kafka's ``CommitRecordMetadataAndOffset``: the offset, and whether its record is
    in the log yet (``appendedBatchOffset.isDefined``)."""

    offset: OffsetAndMetadata
    appended: bool = False


class PendingTxnOffsets:
    """One group's transactional offsets, by producer id, until their markers."""

    __slots__ = ("_by_producer",)

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[TopicPartition, PendingTxnOffset]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_producer)

    @property
    def producer_ids(self) -> list[int]:
        return list(self._by_producer)

    def prepare_txn_offset_commit(
        self, producer_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Before the append: the offsets are pending (OffsetFetch sees them unstable)."""
        pending = self._by_producer.setdefault(producer_id, {})
        for tp, offset in offsets.items():
            pending[tp] = PendingTxnOffset(offset)

    def on_txn_offset_commit_append(
        self, producer_id: int, tp: TopicPartition, offset: OffsetAndMetadata
    ) -> None:
        """The append succeeded: the record is in the log (if still the pending one)."""
        entry = self._by_producer.get(producer_id, {}).get(tp)
        if entry is not None and entry.offset == offset:
            entry.appended = True

    def fail_pending_txn_offset_commit(self, producer_id: int, tp: TopicPartition) -> None:
        """The append failed: forget the offset."""
        pending = self._by_producer.get(producer_id)
        if pending is None:
            return
        pending.pop(tp, None)
        if not pending:
            del self._by_producer[producer_id]

    def complete_pending_txn_offset_commit(
        self, producer_id: int, is_commit: bool
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The producer's marker: the offsets to commit (none on abort)."""
        pending = self._by_producer.pop(producer_id, {})
        if not is_commit:
            return {}
        committed = {}
        for tp, entry in pending.items():
            if entry.appended:
                committed[tp] = entry.offset
            else:
                log.warning(
                    "Dropping a transactional offset commit for producerId %d and %s even "
                    "though its record has not been appended to the log",
                    producer_id,
                    tp,
                )
        return committed

    def has_pending_offset_commits_from_producer(self, producer_id: int) -> bool:
        return producer_id in self._by_producer

    def has_pending_offset_commits_for_topic_partition(self, tp: TopicPartition) -> bool:
        return any(tp in pending for pending in self._by_producer.values())

    def remove_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            for pending in self._by_producer.values():
                pending.pop(tp, None)


class HasPendingTxnOffsets(Protocol):
    """A group, as far as loading its pending transactional offsets goes."""

    @property
    def pending_txn_offsets(self) -> PendingTxnOffsets: ...


class TxnOffsetsGroup(HasPendingTxnOffsets, Protocol):
    """A group, as far as a transaction's marker goes."""

    @property
    def group_id(self) -> str: ...

    @property
    def offsets(self) -> dict[TopicPartition, OffsetAndMetadata]: ...

    def is_in(self, *states: GroupState) -> bool: ...


def complete_pending_txn_offsets(
    groups: Iterable[TxnOffsetsGroup], producer_id: int, is_commit: bool
) -> int:
    """The producer's marker: its pending offsets in ``groups`` become their committed
    offsets (COMMIT) or are dropped (ABORT). Returns how many groups it completed."""
    completed = 0
    for group in groups:
        pending = group.pending_txn_offsets
        if group.is_in(GroupState.DEAD) or not pending.has_pending_offset_commits_from_producer(
            producer_id
        ):
            continue
        committed = pending.complete_pending_txn_offset_commit(producer_id, is_commit)
        group.offsets.update(committed)
        completed += 1
        log.debug(
            "TxnOffsetCommit for producer %d and group %s %s: %d offsets",
            producer_id,
            group.group_id,
            "committed" if is_commit else "aborted",
            len(committed),
        )
    return completed


def restore_pending_txn_offsets(
    open_txns: Mapping[int, list[KeyValue]], get_group: Callable[[str], HasPendingTxnOffsets]
) -> None:
    """Put the offsets of transactions with no marker yet back in their groups, pending
    (``get_group`` creates a group that has nothing else)."""
    for producer_id, records in open_txns.items():
        for key, value in records:
            record = decode_record(key, value)
            if not isinstance(record, OffsetCommitRecord) or record.value is None:
                continue
            tp = TopicPartition(record.topic, record.partition)
            pending = get_group(record.group_id).pending_txn_offsets
            pending.prepare_txn_offset_commit(producer_id, {tp: record.value})
            pending.on_txn_offset_commit_append(producer_id, tp, record.value)
