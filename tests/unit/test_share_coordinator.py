"""The share coordinator on a log in memory: writes become a ShareSnapshot then
ShareUpdates (a snapshot again every ``snapshot_update_records_per_snapshot``), a new
leader loads what the old one wrote, epochs fence, and keys of partitions not led here
are NOT_COORDINATOR. The persister retries on the manual clock while the coordinator
cannot answer."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import SHARE_GROUP_STATE_TOPIC, ClusterMetadata
from broker.coordinator.coordinator_loader import ImmediateLoadScheduler, ManualLoadScheduler
from broker.server.purgatories import ParkedRequest
from broker.share.persister import InProcessStatePersister
from broker.share_coordinator.share_coordinator import ShareCoordinator, ShareCoordinatorConfig
from broker.share_coordinator.share_state_records import (
    KeyValue,
    ShareGroupOffset,
    SharePartitionKey,
    decode_key,
)
from broker.share_coordinator.share_state_records import PersisterStateBatch as B
from purgatory import ManualClock, SystemTimer

E = ErrorCode
AVAILABLE, ACKED = 0, 2


class MemoryStateLog:
    """``__share_group_state`` partitions as lists; ``error`` fails every append."""

    def __init__(self) -> None:
        self.records: dict[int, list[KeyValue]] = defaultdict(list)
        self.error = E.none

    def append_to_log(
        self,
        partition: int,
        records: list[KeyValue],
        on_done: Callable[[ErrorCode], None] | None = None,
        parked_request: ParkedRequest | None = None,
        *,
        timeout_ms: int | None = None,
        producer: tuple[int, int] | None = None,
    ) -> None:
        if self.error is E.none:
            self.records[partition].extend(records)
        assert on_done is not None
        on_done(self.error)

    def open_log(self, partition: int) -> Iterator[list[KeyValue]] | None:
        return iter([list(self.records[partition])])


def _cluster(
    per_snapshot: int = 500,
) -> tuple[ClusterMetadata, MemoryStateLog, ShareCoordinator, ManualLoadScheduler]:
    metadata = ClusterMetadata()
    for broker in (0, 1):
        metadata.register_broker(broker, "127.0.0.1", 9092 + broker)
    metadata.create_topic("t", 1, 1, {})
    state_log = MemoryStateLog()
    loads = ManualLoadScheduler()
    config = ShareCoordinatorConfig(2, 1, 1, 1 << 20, per_snapshot)
    coordinator = ShareCoordinator(0, config, metadata, state_log, loads)
    coordinator.startup()
    coordinator.partitions.ensure_topic()
    return metadata, state_log, coordinator, loads


def _key(
    metadata: ClusterMetadata, coordinator: ShareCoordinator, partition: int
) -> SharePartitionKey:
    """A key placed on ``__share_group_state`` partition ``partition``."""
    topic_id = metadata.topics["t"].topic_id
    for n in range(100):
        key = SharePartitionKey(f"g{n}", topic_id, 0)
        if coordinator.partition_for(key) == partition:
            return key
    raise AssertionError("no key")


def _write(
    coordinator: ShareCoordinator, key: SharePartitionKey, start: int, *batches: B, leader: int = 0
) -> list[ErrorCode]:
    answers: list[ErrorCode] = []
    coordinator.write_state(key, 0, leader, start, batches, lambda e, _m: answers.append(e))
    return answers


def test_keys_load_on_leadership_and_others_are_not_coordinator() -> None:
    metadata, _log, coordinator, loads = _cluster()
    mine, theirs = _key(metadata, coordinator, 0), _key(metadata, coordinator, 1)
    assert coordinator.read_state(mine, 0)[0] is E.coordinator_load_in_progress
    loads.run_all()
    assert coordinator.owned_partitions == frozenset({0})
    assert coordinator.read_state(mine, 0) == (E.none, None, ShareGroupOffset(0, 0, -1, -1, ()))
    assert coordinator.read_state(theirs, 0)[0] is E.not_coordinator
    assert _write(coordinator, theirs, 0) == [E.not_coordinator]


def test_a_snapshot_then_updates_then_a_snapshot_again() -> None:
    metadata, state_log, coordinator, loads = _cluster(per_snapshot=2)
    loads.run_all()
    key = _key(metadata, coordinator, 0)
    assert _write(coordinator, key, 0, B(0, 4, AVAILABLE, 1)) == [E.none]
    assert _write(coordinator, key, 0, B(0, 1, ACKED, 1)) == [E.none]
    assert _write(coordinator, key, 2, B(2, 2, ACKED, 1)) == [E.none]
    assert _write(coordinator, key, 3) == [E.none]  # the third after the snapshot
    kinds = [decode_key(k)[1] for k, _v in state_log.records[0]]
    assert kinds == [False, True, True, False]  # snapshot, update, update, snapshot
    state = coordinator.read_state(key, 0)[2]
    assert (state.start_offset, state.state_batches) == (3, (B(3, 4, AVAILABLE, 1),))


def test_a_new_leader_loads_what_the_old_one_wrote() -> None:
    metadata, state_log, coordinator, loads = _cluster()
    loads.run_all()
    key = _key(metadata, coordinator, 0)
    _write(coordinator, key, 0, B(0, 9, AVAILABLE, 1))
    _write(coordinator, key, 5, B(5, 6, ACKED, 2))
    before = coordinator.read_state(key, 0)
    # the partition moves to broker 1 (leader epoch + 1): a new coordinator loads it
    other = ShareCoordinator(1, coordinator.config, metadata, state_log, loads)
    other.startup()
    metadata.change_partition(SHARE_GROUP_STATE_TOPIC, 0, leader=1)
    assert coordinator.read_state(key, 0)[0] is E.not_coordinator
    loads.run_all()
    assert other.read_state(key, 0) == before


def test_older_epochs_are_fenced_and_a_newer_leader_epoch_is_recorded() -> None:
    metadata, _log, coordinator, loads = _cluster()
    loads.run_all()
    key = _key(metadata, coordinator, 0)
    assert _write(coordinator, key, 0, B(0, 0, ACKED, 1), leader=3) == [E.none]
    assert _write(coordinator, key, 1, leader=2) == [E.fenced_leader_epoch]
    assert coordinator.read_state(key, 2)[0] is E.fenced_leader_epoch
    assert coordinator.read_state(key, 4)[2].leader_epoch == 4
    answers: list[ErrorCode] = []
    coordinator.write_state(key, -1, 4, 1, (), lambda e, _m: answers.append(e))
    assert answers == [E.fenced_state_epoch]


def test_the_persister_retries_while_the_coordinator_loads() -> None:
    metadata, _log, coordinator, loads = _cluster()
    clock = ManualClock()
    timer = SystemTimer(clock)
    persister = InProcessStatePersister(
        coordinator, lambda b: coordinator if b == 0 else None, timer
    )
    key = _key(metadata, coordinator, 0)
    read: list[tuple[ErrorCode, ShareGroupOffset]] = []
    persister.read_state(key, 0, lambda e, s: read.append((e, s)))
    written: list[ErrorCode] = []
    persister.write_state(key, 0, 0, 0, (B(0, 0, ACKED, 1),), written.append)
    assert read == [] and written == [] and persister.pending() == 2
    loads.run_all()
    clock.advance(100)
    timer.advance_clock()
    assert [e for e, _s in read] == [E.none] and written == [E.none]
    assert coordinator.read_state(key, 0)[2].state_batches == (B(0, 0, ACKED, 1),)


def test_the_persister_gives_up_when_no_coordinator_answers() -> None:
    metadata, _log, coordinator, _loads = _cluster()
    clock = ManualClock()
    timer = SystemTimer(clock)
    persister = InProcessStatePersister(coordinator, lambda _b: None, timer)
    written: list[ErrorCode] = []
    persister.write_state(_key(metadata, coordinator, 0), 0, 0, 0, (), written.append)
    for _ in range(60):
        clock.advance(1000)
        timer.advance_clock()
    assert written == [E.coordinator_not_available] and persister.pending() == 0


def test_an_unknown_partition_is_unknown_topic_or_partition() -> None:
    _metadata, _log, coordinator, loads = _cluster()
    loads.run_all()
    for n in range(20):
        key = SharePartitionKey(f"g{n}", uuid.UUID(int=1), 0)
        if coordinator.partition_for(key) == 0:
            assert coordinator.read_state(key, 0)[0] is E.unknown_topic_or_partition
            assert _write(coordinator, key, 0) == [E.unknown_topic_or_partition]
            return
    raise AssertionError("no key")


def test_a_partition_led_again_at_a_new_epoch_is_loaded_again() -> None:
    metadata, state_log, coordinator, loads = _cluster()
    loads.run_all()
    key = _key(metadata, coordinator, 0)
    _write(coordinator, key, 0, B(0, 0, ACKED, 1))
    # led by broker 1 meanwhile (a change this broker did not hear of), which wrote more
    metadata.change_partition(SHARE_GROUP_STATE_TOPIC, 0, leader=1, notify=False)
    other = ShareCoordinator(1, coordinator.config, metadata, state_log, ImmediateLoadScheduler())
    other.startup()
    assert _write(other, key, 1) == [E.none]
    metadata.change_partition(SHARE_GROUP_STATE_TOPIC, 0, leader=0)
    assert coordinator.read_state(key, 0)[0] is E.coordinator_load_in_progress
    loads.run_all()
    assert coordinator.read_state(key, 0)[2].start_offset == 1


def test_absurd_state_batches_are_an_invalid_request() -> None:
    metadata, _log, coordinator, loads = _cluster()
    loads.run_all()
    key = _key(metadata, coordinator, 0)
    for bad in (B(5, 4, AVAILABLE, 1), B(-1, 4, AVAILABLE, 1), B(0, 4, 1, 1), B(0, 4, 0, -1)):
        assert _write(coordinator, key, 0, bad) == [E.invalid_request]
    assert coordinator.read_state(key, 0)[2].start_offset == -1  # nothing written


def test_an_archiving_run_is_durable_and_loaded_by_a_new_leader() -> None:
    """Kafka 4.4's ARCHIVING (3, a dead-letter write under way) is a durable state: a
    leader that takes over reads it and writes the DLQ record again."""
    metadata, state_log, coordinator, loads = _cluster()
    loads.run_all()
    key = _key(metadata, coordinator, 0)
    assert _write(coordinator, key, 0, B(0, 1, 3, 2), B(2, 4, ACKED, 1)) == [E.none]
    other = ShareCoordinator(1, coordinator.config, metadata, state_log, loads)
    other.startup()
    metadata.change_partition(SHARE_GROUP_STATE_TOPIC, 0, leader=1)
    loads.run_all()
    state = other.read_state(key, 0)[2]
    assert state.state_batches[0] == B(0, 1, 3, 2)
