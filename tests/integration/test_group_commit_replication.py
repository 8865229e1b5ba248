"""OffsetCommit waits for the offsets topic's in-sync replicas, as in Kafka (acks=all).

Three brokers, ``__consumer_offsets`` with replication factor 3. A follower of the
group's offsets partition stops replicating: the commit stays parked in the leader's
Produce purgatory (unanswered, not yet visible) until the follower resumes, or is
answered COORDINATOR_NOT_AVAILABLE when ``offsets.commit.timeout.ms`` runs out first —
the committed offset then stays what it was.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from broker.server.broker_server import Broker
from broker.server.context import RequestContext
from protocol.builders import request_builder
from testkit.polling import wait_until
from testkit.raw_client import RawClient, answered_later
from tests.integration.conftest import running_cluster

pytestmark = pytest.mark.asyncio

OFFSET_COMMIT = 8
GROUP = "replicated-commits"


class CommitObserver:
    """Keeps the request context of every OffsetCommit a broker answered."""

    def __init__(self) -> None:
        self.commits: list[RequestContext] = []

    def request_received(self, ctx: RequestContext, request: Any, frame: bytes) -> None:
        pass

    def request_completed(self, ctx: RequestContext, response: Any, size: int) -> None:
        if ctx.header.api_key == OFFSET_COMMIT:
            self.commits.append(ctx)


async def commit(raw: RawClient, offset: int) -> ErrorCode:
    """A simple (generation -1) commit of events-0, OffsetCommit v8."""
    b = request_builder(OFFSET_COMMIT, 8)
    response = await raw.request(
        OFFSET_COMMIT,
        8,
        "OffsetCommitRequest",
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            b.OffsetCommitRequestTopic(
                name="events",
                partitions=(
                    b.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )
    error: ErrorCode = response.topics[0].partitions[0].error_code
    return error


def committed(coordinator: Broker) -> int:
    offsets = coordinator.services.coordinators.group_metadata_manager.get_offsets(
        GROUP, [("events", 0)]
    )
    return next(iter(offsets.values())).offset


async def coordinator_and_followers(app: MiniKafka) -> tuple[Broker, list[Broker], Any]:
    """The group's coordinator once it has loaded, its followers in the ISR."""
    manager = app.brokers[0].services.coordinators.group_metadata_manager
    manager.ensure_offsets_topic()
    tp = (OFFSETS_TOPIC, manager.partition_for(GROUP))
    state = app.cluster.partition_state(*tp)
    assert state is not None and len(state.replicas) == 3
    leader = app.brokers[state.leader]
    await wait_until(
        lambda: (
            leader.services.coordinators.group_metadata_manager.check_coordinator(GROUP)
            is ErrorCode.none
        ),
        "coordinator load",
    )
    await wait_until(
        lambda: len(app.cluster.partition_state(*tp).isr) == 3,  # type: ignore[union-attr]
        "full ISR",
    )
    return leader, [b for b in app.brokers if b is not leader], tp


async def test_a_commit_is_answered_only_once_both_followers_have_it() -> None:
    observer = CommitObserver()
    async with running_cluster(3, observers=[observer]) as app:
        leader, followers, tp = await coordinator_and_followers(app)
        raw = await RawClient.connect(leader.advertised_host, leader.port)
        try:
            assert await commit(raw, 3) is ErrorCode.none
            lagging = followers[0]
            lagging.replica_manager.fetcher_manager.pause_replication(tp)
            parked_before = leader.replica_manager.delayed_produces

            pending = asyncio.create_task(commit(raw, 7))
            await wait_until(
                lambda: leader.replica_manager.delayed_produces > parked_before, "a parked commit"
            )
            # The leader has heard from the other follower that it has the commit, and has
            # answered a later request since: the commit still waits for the lagging one.
            partition = leader.replica_manager.partitions[tp]
            other = followers[1].broker_id
            await wait_until(
                lambda: partition.followers[other].log_end_offset >= partition.log_end_offset,
                "the other follower's fetch past the commit",
            )
            await answered_later(leader.advertised_host, leader.port)
            assert not pending.done()
            assert committed(leader) == 3  # not visible before it is replicated

            lagging.replica_manager.fetcher_manager.resume_replication(tp)
            assert await asyncio.wait_for(pending, 10) is ErrorCode.none
            assert committed(leader) == 7
            leader_end = leader.replica_manager.partitions[tp].log_end_offset
            for follower in followers:
                assert follower.replica_manager.partitions[tp].log_end_offset == leader_end
        finally:
            await raw.close()
        # Like an acks=all produce, the commit waited in the Produce purgatory.
        ours = [c for c in observer.commits if c.services.broker_id == leader.broker_id]
        last = ours[-1].timing
        assert (last.purgatory, last.purgatory_outcome) == ("Produce", "completed")


async def test_a_commit_the_isr_does_not_get_in_time_is_refused_and_not_applied() -> None:
    async with running_cluster(3, None, **{"offsets.commit.timeout.ms": "300"}) as app:
        leader, followers, tp = await coordinator_and_followers(app)
        raw = await RawClient.connect(leader.advertised_host, leader.port)
        try:
            assert await commit(raw, 3) is ErrorCode.none
            followers[1].replica_manager.fetcher_manager.pause_replication(tp)
            # REQUEST_TIMED_OUT of the append is COORDINATOR_NOT_AVAILABLE to the client,
            # which retries (after rediscovering the coordinator).
            assert await commit(raw, 7) is ErrorCode.coordinator_not_available
            assert committed(leader) == 3
            followers[1].replica_manager.fetcher_manager.resume_replication(tp)
            assert await commit(raw, 8) is ErrorCode.none
            assert committed(leader) == 8
        finally:
            await raw.close()
