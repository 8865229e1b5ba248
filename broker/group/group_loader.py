"""Reading a ``__consumer_offsets`` partition back into groups, in steps (Kafka's
``GroupMetadataManager.loadGroupsAndOffsets``).

:func:`load_partition` is a generator for a :class:`~broker.coordinator.coordinator_loader.LoadJob`:
between two ``yield``\\ s it does a bounded piece of work and yields how many units it
did; it returns what it read as a :class:`LoadedPartition`, which the
:class:`~broker.group.group_metadata_manager.GroupMetadataManager` installs. Nothing here
touches the manager's cache: until it is installed, the partition's groups answer
COORDINATOR_LOAD_IN_PROGRESS and its load can be given up at any yield.

1. **Read** (a record batch a step): each record kept by key, the later winning -- what
   compaction keeps, and what replaying every record in order would leave, since the
   later record for a key always wins. Keys are kept in the order of their last record,
   so two encodings of one key (offset commit key versions 0 and 1) still apply in log
   order. A transaction's records (a TxnOffsetCommit's batch) wait for its marker: at
   COMMIT they take effect there, at ABORT they are dropped, with no marker yet they
   come back pending (``txn_offsets.restore_pending_txn_offsets``).
   Nothing is decoded yet: after a long run of commits to the same partitions most
   records are superseded, and decoding is the expensive part.
2. **Decode** the survivors, ``DECODE_UNIT`` a step: committed offsets by group, and
   each group's last metadata; a group tombstone removes the group's metadata (its
   offsets go with their own tombstones, as in Kafka). A KIP-848 consumer group's
   records (key versions 3-8) are replayed (``ConsumerGroupLoad``, Kafka's ``replay``)
   and its groups built at the end of this step: those with a group epoch record; a
   streams group's (key types 17-23) the same way (``StreamsGroupLoad``).
3. **Build** the groups, ``BUILD_UNIT`` a step (Kafka's ``GroupMetadata.loadGroup``):
   Stable with its members or Empty, its offsets attached; a group with offsets and no
   metadata comes back Empty; then the offsets of transactions with no marker yet, put
   back pending.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

from broker.coordinator.coordinator_loader import LoadJob
from broker.group.consumer.consumer_group import ConsumerGroup
from broker.group.consumer.consumer_group_records import (
    ConsumerGroupLoad,
    decode_or_skip,
    is_consumer_group_key,
)
from broker.group.group_log import (
    GroupMetadataValue,
    KeyValue,
    LogEntry,
    OffsetCommitRecord,
    TxnRecord,
    decode_record,
)
from broker.group.group_metadata import GroupMetadata
from broker.group.group_state import GroupState
from broker.group.member_metadata import MemberMetadata
from broker.group.offsets import OffsetAndMetadata
from broker.group.results import TopicPartition
from broker.group.streams.streams_group import StreamsGroup
from broker.group.streams.streams_group_records import StreamsGroupLoad, is_streams_group_key
from broker.group.streams.streams_group_records import decode_or_skip as decode_streams_record
from broker.group.txn_offsets import restore_pending_txn_offsets

DECODE_UNIT = 64  # records decoded a step (a few hundred microseconds)
BUILD_UNIT = 16  # groups built a step

NewGroup = Callable[[str, GroupState], GroupMetadata]


@dataclass(eq=False)
class PartitionLoad:
    """A partition being loaded (the manager's bookkeeping)."""

    partition: int
    leader_epoch: int | None  # None: not checked (a direct call, e.g. a unit test)
    started_ms: int
    job: LoadJob | None = None
    # Markers (producer id, commit?) that reached the partition meanwhile.
    txn_completions: list[tuple[int, bool]] = field(default_factory=list)


@dataclass
class LoadedPartition:
    """What a partition's records hold."""

    groups: dict[str, GroupMetadata] = field(default_factory=dict)
    # Of ``groups``, those restored from a group metadata record (the coordinator is told
    # of each: their members must heartbeat).
    with_metadata: list[str] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)  # group tombstones
    # KIP-848 consumer groups (their records, key versions 3-8, replayed).
    consumer_groups: dict[str, ConsumerGroup] = field(default_factory=dict)
    # KIP-1071 streams groups (their records, key types 17-23, replayed).
    streams_groups: dict[str, StreamsGroup] = field(default_factory=dict)
    records: int = 0  # records read (markers included)
    survivors: int = 0  # records left once each key's last was kept


def load_partition(
    entries: Iterator[list[LogEntry]], new_group: NewGroup
) -> Generator[int, None, LoadedPartition]:
    """The steps of a load of the partition whose batches ``entries`` gives (see the
    module docstring); ``new_group`` makes a group object (the manager's clock)."""
    loaded = LoadedPartition()
    latest: dict[bytes, bytes | None] = {}
    open_txns: dict[int, list[KeyValue]] = {}
    for batch in entries:
        for entry in batch:
            if isinstance(entry, tuple):
                key, value = entry
                latest.pop(key, None)
                latest[key] = value
            elif isinstance(entry, TxnRecord):
                open_txns.setdefault(entry.producer_id, []).append((entry.key, entry.value))
            else:
                done = open_txns.pop(entry.producer_id, [])
                if entry.commit:
                    for key, value in done:
                        latest.pop(key, None)
                        latest[key] = value
        loaded.records += len(batch)
        yield len(batch)

    survivors = list(latest.items())
    latest.clear()
    loaded.survivors = len(survivors)
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
    metadata: dict[str, GroupMetadataValue] = {}
    consumer_groups = ConsumerGroupLoad()
    streams_groups = StreamsGroupLoad()
    for start in range(0, len(survivors), DECODE_UNIT):
        for key, value in survivors[start : start + DECODE_UNIT]:
            if is_consumer_group_key(key):
                consumer_record = decode_or_skip(key, value)
                if consumer_record is not None:
                    consumer_groups.replay(consumer_record)
                continue
            if is_streams_group_key(key):
                streams_record = decode_streams_record(key, value)
                if streams_record is not None:
                    streams_groups.replay(streams_record)
                continue
            record = decode_record(key, value)
            if isinstance(record, OffsetCommitRecord):
                per_group = offsets.setdefault(record.group_id, {})
                tp = TopicPartition(record.topic, record.partition)
                if record.value is None:
                    per_group.pop(tp, None)
                else:
                    per_group[tp] = record.value
            elif record is None:
                continue
            elif record.value is None:
                metadata.pop(record.group_id, None)
                loaded.removed.add(record.group_id)
            else:
                metadata[record.group_id] = record.value
                loaded.removed.discard(record.group_id)
        yield DECODE_UNIT
    survivors.clear()
    loaded.consumer_groups = consumer_groups.groups()
    loaded.streams_groups = streams_groups.groups()
    yield max(len(loaded.consumer_groups) + len(loaded.streams_groups), 1)

    groups = loaded.groups
    built = 0
    for group_id, group_value in metadata.items():
        group = group_from_record(new_group, group_id, group_value)
        group.offsets.update(offsets.pop(group_id, {}))
        groups[group_id] = group
        loaded.with_metadata.append(group_id)
        built += 1
        if built % BUILD_UNIT == 0:
            yield BUILD_UNIT
    for group_id, group_offsets in offsets.items():
        if group_offsets:
            group = new_group(group_id, GroupState.EMPTY)
            group.offsets.update(group_offsets)
            groups[group_id] = group
            built += 1
            if built % BUILD_UNIT == 0:
                yield BUILD_UNIT

    def group_for_pending(group_id: str) -> GroupMetadata:
        group = groups.get(group_id)
        if group is None:
            group = groups[group_id] = new_group(group_id, GroupState.EMPTY)
        return group

    restore_pending_txn_offsets(open_txns, group_for_pending)
    yield 1
    return loaded


def group_from_record(
    new_group: NewGroup, group_id: str, value: GroupMetadataValue
) -> GroupMetadata:
    """Kafka's ``GroupMetadata.loadGroup``: Stable with its members, or Empty."""
    group = new_group(group_id, GroupState.STABLE if value.members else GroupState.EMPTY)
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    for m in value.members:
        protocols = [(value.protocol, m.subscription)] if value.protocol is not None else []
        group.add(
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocol_type=value.protocol_type,
                supported_protocols=protocols,
                assignment=m.assignment,
            )
        )
    group.leader_id = value.leader if value.leader in group.all_members else group.leader_id
    group.current_state_timestamp = (
        value.current_state_timestamp if value.current_state_timestamp >= 0 else None
    )
    group.refresh_subscribed_topics()
    return group
