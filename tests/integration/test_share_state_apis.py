"""The share coordinator's inter-broker APIs over TCP (KIP-932): FindCoordinator with a
SHARE key, then WriteShareGroupState (85), ReadShareGroupState (84),
ReadShareGroupStateSummary (87), InitializeShareGroupState (83) and
DeleteShareGroupState (86) on that coordinator, with Kafka's errors for bad input."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from protocol.builders import request_builder
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster
from tests.integration.test_share_groups import WAIT

pytestmark = pytest.mark.asyncio

E = ErrorCode
GROUP = "apis"


def _partitions(response: Any) -> list[Any]:
    return [p for r in response.results for p in r.partitions]


async def _write(raw: RawClient, topic_id: uuid.UUID, partition: int, **fields: Any) -> Any:
    b = request_builder(85, 1)
    data = {"state_epoch": 0, "leader_epoch": 1, "start_offset": 0, "state_batches": ()}
    data.update(fields)
    return await raw.request(
        85,
        1,
        "WriteShareGroupStateRequest",
        group_id=GROUP,
        topics=(
            b.WriteStateData(
                topic_id=topic_id, partitions=(b.PartitionData(partition=partition, **data),)
            ),
        ),
    )


async def _read(raw: RawClient, api_key: int, topic_id: uuid.UUID, leader_epoch: int = 1) -> Any:
    b = request_builder(api_key, 0)
    name = "ReadShareGroupStateRequest" if api_key == 84 else "ReadShareGroupStateSummaryRequest"
    data = b.ReadStateData if api_key == 84 else b.ReadStateSummaryData
    return await raw.request(
        api_key,
        0,
        name,
        group_id=GROUP,
        topics=(
            data(
                topic_id=topic_id,
                partitions=(b.PartitionData(partition=0, leader_epoch=leader_epoch),),
            ),
        ),
    )


async def test_share_state_apis_on_the_coordinator_of_a_share_key() -> None:
    async with running_cluster(**{"share.coordinator.state.topic.num.partitions": "3"}) as app:
        app.cluster.create_topic("t", 1, 1, {})
        topic_id = app.cluster.topics["t"].topic_id
        raw = await RawClient.connect(app.bootstrap)
        try:
            found = await raw.request(
                10, 4, "FindCoordinatorRequest", key_type=2,
                coordinator_keys=(f"{GROUP}:{topic_id}:0", "no-topic-id", f"{GROUP}:{topic_id}:-1"),
            )  # fmt: skip
            assert [c.error_code for c in found.coordinators] == [
                E.none,
                E.invalid_request,
                E.invalid_request,
            ]
            assert "__share_group_state" in app.cluster.topics
            coordinator = app.brokers[0].services.coordinators.share
            await wait_until(
                lambda: len(coordinator.owned_partitions) == 3, "the partitions loaded", **WAIT
            )
            batch = request_builder(85, 1).StateBatch
            written = await _write(
                raw, topic_id, 0,
                state_batches=(
                    batch(first_offset=0, last_offset=1, delivery_state=2, delivery_count=1),
                    batch(first_offset=2, last_offset=2, delivery_state=0, delivery_count=3),
                ),
            )  # fmt: skip
            assert [p.error_code for p in _partitions(written)] == [E.none]
            read = _partitions(await _read(raw, 84, topic_id))[0]
            assert (read.error_code, read.start_offset) == (E.none, 0)
            assert [(s.first_offset, s.last_offset, s.delivery_state, s.delivery_count)
                    for s in read.state_batches] == [(0, 1, 2, 1), (2, 2, 0, 3)]  # fmt: skip
            summary = _partitions(await _read(raw, 87, topic_id))[0]
            assert (summary.start_offset, summary.leader_epoch) == (0, 1)
            # an older leader epoch is fenced; unknown partitions and bad ids are refused
            assert [
                p.error_code for p in _partitions(await _write(raw, topic_id, 0, leader_epoch=0))
            ] == [E.fenced_leader_epoch]
            assert _partitions(await _read(raw, 84, topic_id, leader_epoch=0))[0].error_code == (
                E.fenced_leader_epoch
            )
            assert [p.error_code for p in _partitions(await _write(raw, topic_id, 7))] == [
                E.unknown_topic_or_partition
            ]
            assert [p.error_code for p in _partitions(await _write(raw, uuid.UUID(int=0), 0))] == [
                E.invalid_request
            ]
            b83, b86 = request_builder(83, 0), request_builder(86, 0)
            initialized = await raw.request(
                83, 0, "InitializeShareGroupStateRequest", group_id=GROUP,
                topics=(b83.InitializeStateData(topic_id=topic_id, partitions=(
                    b83.PartitionData(partition=0, state_epoch=0, start_offset=5),)),),
            )  # fmt: skip
            assert [p.error_code for p in _partitions(initialized)] == [E.fenced_state_epoch]
            deleted = await raw.request(
                86, 0, "DeleteShareGroupStateRequest", group_id=GROUP,
                topics=(b86.DeleteStateData(topic_id=topic_id, partitions=(
                    b86.PartitionData(partition=0),)),),
            )  # fmt: skip
            assert [p.error_code for p in _partitions(deleted)] == [E.none]
            gone = _partitions(await _read(raw, 84, topic_id))[0]
            assert (gone.error_code, gone.start_offset, gone.state_batches) == (E.none, -1, ())
            initialized = await raw.request(
                83, 0, "InitializeShareGroupStateRequest", group_id=GROUP,
                topics=(b83.InitializeStateData(topic_id=topic_id, partitions=(
                    b83.PartitionData(partition=0, state_epoch=1, start_offset=5),)),),
            )  # fmt: skip
            assert [p.error_code for p in _partitions(initialized)] == [E.none]
            summary = _partitions(await _read(raw, 87, topic_id))[0]
            assert (summary.state_epoch, summary.start_offset) == (1, 5)
        finally:
            await raw.close()
