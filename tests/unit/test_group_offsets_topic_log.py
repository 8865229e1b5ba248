"""The group metadata manager over the real replica manager, on the manual clock.

One broker's ``ReplicaManager`` leads ``__consumer_offsets`` (one partition, replicas
0 and 1, broker 1 simulated by follower fetches), and the manager writes through
``offsets_topic_log`` as ``build_broker`` wires it. An OffsetCommit waits in the Produce
purgatory until broker 1 has the commit, or until ``offsets.commit.timeout.ms``; the
leadership of the partition decides what the manager loads and unloads.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import OFFSETS_TOPIC, ClusterMetadata
from broker.cluster.controller import Controller
from broker.config.broker_config import BrokerConfig
from broker.group import (
    GroupConfig,
    GroupCoordinator,
    GroupMetadataManager,
    JoinGroupParams,
    OffsetConfig,
)
from broker.group.group_log import offsets_topic_log
from broker.log import LogManager
from broker.replica.delayed_fetch import FetchParams, FetchPartitionStatus
from broker.replica.partition import Partition, TopicPartition
from broker.replica.replica_fetcher import ReplicaFetcherManager
from broker.replica.replica_manager import ReplicaManager
from broker.server.purgatories import PurgatoryName, PurgatoryOutcome, PurgatorySet
from purgatory import ManualClock
from tests.helpers.group_harness import Box, Request

E = ErrorCode
OFFSETS_TP: TopicPartition = (OFFSETS_TOPIC, 0)
COMMIT_TIMEOUT_MS = 5_000
TP = ("orders", 0)


@dataclass
class Node:
    clock: ManualClock
    metadata: ClusterMetadata
    purgatories: PurgatorySet
    replica_manager: ReplicaManager
    manager: GroupMetadataManager
    coordinator: GroupCoordinator

    def tick(self, ms: int) -> None:
        self.clock.advance(ms)
        for timer in self.purgatories.timers.values():
            timer.advance_clock()
        self.purgatories.scheduler_timer.advance_clock()

    def follower_fetch(self) -> None:
        """Broker 1 fetches at the leader's log end: it has everything."""
        partition = self.replica_manager.online_partition(OFFSETS_TP)
        assert partition is not None
        answer = Box()
        self.replica_manager.fetch_messages(
            FetchParams(1, 0, 1, 1 << 20),
            [FetchPartitionStatus(OFFSETS_TP, partition.log_end_offset, 1 << 20)],
            answer,
            None,
        )
        assert answer.done

    def commit(self, offset: int, request: Request | None = None, group: str = "s") -> Box:
        box = Box()
        self.coordinator.handle_commit_offsets(
            group, "", None, -1, {TP: (offset, -1, "")}, box, parked_request=request
        )
        return box

    def committed(self, group: str = "s") -> int:
        return self.manager.get_offsets(group, [TP])[TP].offset  # type: ignore[index]


@contextlib.asynccontextmanager
async def offsets_leader(logs: LogManager | None = None) -> AsyncIterator[Node]:
    clock = ManualClock(1_000)
    config = BrokerConfig.model_validate(
        {"broker.id": 0, "offsets.commit.timeout.ms": COMMIT_TIMEOUT_MS}
    )
    metadata = ClusterMetadata(cluster_id="test-cluster")
    for broker_id in (0, 1):
        metadata.register_broker(broker_id, "127.0.0.1", 1)  # never dialled
    metadata.create_topic(OFFSETS_TOPIC, 1, 2, {}, assignment=[[0, 1]])
    purgatories = PurgatorySet(clock, config)
    hosted: dict[TopicPartition, Partition] = {}
    fetchers = ReplicaFetcherManager(0, config, metadata, clock, hosted)
    fetchers.pause_replication()
    replica_manager = ReplicaManager(
        0,
        metadata,
        config,
        clock,
        purgatories.produce,
        purgatories.fetch,
        logs or LogManager(None),
        Controller(metadata),
        fetchers,
        purgatories.scheduler_timer,
        hosted,
        wall_clock_ms=clock.now_ms,
        delete_records_purgatory=purgatories.delete_records,
    )
    offset_config = OffsetConfig.from_broker_config(config)
    manager = GroupMetadataManager(
        0,
        offset_config,
        clock,
        metadata,
        offsets_topic_log(
            replica_manager,
            clock,
            offset_config.offsets_commit_timeout_ms,
            offset_config.offsets_commit_required_acks,
        ),
        purgatories.scheduler_timer,
    )
    coordinator = GroupCoordinator(
        GroupConfig.from_broker_config(config),
        purgatories.heartbeat,
        purgatories.rebalance,
        manager,
    )
    await replica_manager.start()
    await coordinator.start()
    try:
        yield Node(clock, metadata, purgatories, replica_manager, manager, coordinator)
    finally:
        await coordinator.stop()
        await replica_manager.stop()


async def test_the_leader_of_the_partition_coordinates_its_groups() -> None:
    async with offsets_leader() as node:
        assert node.manager.partition_for("s") == 0
        assert node.manager.check_coordinator("s") is E.none
        assert node.manager.check_coordinator("") is E.invalid_group_id


async def test_a_commit_waits_in_produce_until_the_follower_has_it() -> None:
    async with offsets_leader() as node:
        request = Request()
        box = node.commit(7, request)
        assert not box.done and request.purgatories == [PurgatoryName.PRODUCE]
        assert node.committed() == -1  # on the leader's log, not yet acknowledged
        node.follower_fetch()
        assert box.result == {TP: E.none}
        assert request.outcome is PurgatoryOutcome.COMPLETED
        assert node.committed() == 7


async def test_a_commit_the_follower_never_fetches_expires_after_the_commit_timeout() -> None:
    async with offsets_leader() as node:
        request = Request()
        box = node.commit(7, request)
        node.tick(COMMIT_TIMEOUT_MS - 1)
        assert not box.done
        node.tick(1)
        assert box.result == {TP: E.coordinator_not_available}
        assert request.purgatory is PurgatoryName.PRODUCE
        assert request.outcome is PurgatoryOutcome.EXPIRED
        assert node.committed() == -1
        assert node.purgatories.produce.expired_count == 1


async def test_a_new_leader_loads_what_the_old_one_wrote() -> None:
    logs = LogManager(None)
    async with offsets_leader(logs) as node:
        box = node.commit(7)
        node.follower_fetch()
        assert box.result == {TP: E.none}
    async with offsets_leader(logs) as restarted:  # the same log, a new broker
        assert restarted.manager.check_coordinator("s") is E.none
        assert restarted.committed() == 7


async def test_losing_the_leadership_unloads_the_groups_and_answers_parked_joins() -> None:
    async with offsets_leader() as node:
        answers: list[Any] = []
        params = JoinGroupParams(
            group_id="g",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            protocol_type="consumer",
            protocols=(("range", b""),),
        )
        request = Request()
        node.coordinator.handle_join_group(params, answers.append, request)
        assert answers == [] and request.purgatories == [PurgatoryName.REBALANCE]
        node.metadata.change_partition(OFFSETS_TOPIC, 0, leader=1)
        [result] = answers
        assert result.error is E.not_coordinator
        assert request.outcome is PurgatoryOutcome.COMPLETED
        assert node.manager.get_group("g") is None
        assert node.manager.check_coordinator("g") is E.not_coordinator
        node.metadata.change_partition(OFFSETS_TOPIC, 0, leader=0)
        assert node.manager.check_coordinator("g") is E.none
