"""The persister over TCP: ReadShareGroupState (84), ReadShareGroupStateSummary (87) and
WriteShareGroupState (85) requests to the share coordinator's broker, as Kafka's
``PersisterStateManager`` sends them (see ``persister.py`` for the calls and retries).

The requests go through ``BrokerChannels`` (``broker_channels.py``: one connection and
sender task per destination broker, requests in order). A request whose connection
fails is answered COORDINATOR_NOT_AVAILABLE, which the manager retries after its
backoff; the next request opens a new connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.security.sasl_client import InterBrokerClient
from broker.share.broker_channels import BrokerChannels
from broker.share.persister import PersisterStateManager, ReadDone, WriteDone
from broker.share_coordinator.share_coordinator import UNINITIALIZED, ShareCoordinator
from broker.share_coordinator.share_state_records import (
    PersisterStateBatch,
    ShareGroupOffset,
    SharePartitionKey,
    StateSummary,
)
from protocol.builders import request_builder
from purgatory import SystemTimer

log = logging.getLogger("broker.share")

READ, READ_VERSION = 84, 0
SUMMARY, SUMMARY_VERSION = 87, 1
WRITE, WRITE_VERSION = 85, 1
INITIALIZE, INITIALIZE_VERSION = 83, 0
DELETE, DELETE_VERSION = 86, 0


class NetworkStatePersister(PersisterStateManager):
    """Kafka's persister: the share state APIs to the coordinator's broker over TCP."""

    def __init__(
        self,
        source_id: int,
        placement: ShareCoordinator,
        metadata: ClusterMetadata,
        timer: SystemTimer,
        security: InterBrokerClient | None = None,
    ) -> None:
        super().__init__(placement, timer)
        self.source_id = source_id
        self._channels = BrokerChannels(f"share-persister-{source_id}", metadata, security)

    async def stop(self) -> None:
        await super().stop()
        await self._channels.stop()

    def _read(
        self,
        broker_id: int,
        key: SharePartitionKey,
        leader_epoch: int,
        summary: bool,
        answer: ReadDone,
    ) -> None:
        api_key, version = (SUMMARY, SUMMARY_VERSION) if summary else (READ, READ_VERSION)
        b = request_builder(api_key, version)
        data = b.ReadStateSummaryData if summary else b.ReadStateData
        name = "ReadShareGroupStateSummaryRequest" if summary else "ReadShareGroupStateRequest"
        body = getattr(b, name)(
            group_id=key.group_id,
            topics=(
                data(
                    topic_id=key.topic_id,
                    partitions=(
                        b.PartitionData(partition=key.partition, leader_epoch=leader_epoch),
                    ),
                ),
            ),
        )

        def on_response(response: Any | None) -> None:
            answer(*_read_result(response))

        self._channels.send(broker_id, api_key, version, body, on_response)

    def _write(
        self,
        broker_id: int,
        key: SharePartitionKey,
        state: tuple[int, int, int, tuple[PersisterStateBatch, ...]],
        answer: WriteDone,
    ) -> None:
        state_epoch, leader_epoch, start_offset, batches = state
        b = request_builder(WRITE, WRITE_VERSION)
        partition = b.PartitionData(
            partition=key.partition,
            state_epoch=state_epoch,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            state_batches=tuple(
                b.StateBatch(
                    first_offset=s.first_offset,
                    last_offset=s.last_offset,
                    delivery_state=s.delivery_state,
                    delivery_count=s.delivery_count,
                )
                for s in batches
            ),
        )
        body = b.WriteShareGroupStateRequest(
            group_id=key.group_id,
            topics=(b.WriteStateData(topic_id=key.topic_id, partitions=(partition,)),),
        )

        def on_response(response: Any | None) -> None:
            answer(
                _partition(response)[0]
                if response is not None
                else ErrorCode.coordinator_not_available
            )

        self._channels.send(broker_id, WRITE, WRITE_VERSION, body, on_response)

    def _initialize(
        self,
        broker_id: int,
        key: SharePartitionKey,
        state_epoch: int,
        start_offset: int,
        answer: WriteDone,
    ) -> None:
        b = request_builder(INITIALIZE, INITIALIZE_VERSION)
        partition = b.PartitionData(
            partition=key.partition, state_epoch=state_epoch, start_offset=start_offset
        )
        body = b.InitializeShareGroupStateRequest(
            group_id=key.group_id,
            topics=(b.InitializeStateData(topic_id=key.topic_id, partitions=(partition,)),),
        )
        self._channels.send(broker_id, INITIALIZE, INITIALIZE_VERSION, body, _answer_of(answer))

    def _delete(self, broker_id: int, key: SharePartitionKey, answer: WriteDone) -> None:
        b = request_builder(DELETE, DELETE_VERSION)
        body = b.DeleteShareGroupStateRequest(
            group_id=key.group_id,
            topics=(
                b.DeleteStateData(
                    topic_id=key.topic_id, partitions=(b.PartitionData(partition=key.partition),)
                ),
            ),
        )
        self._channels.send(broker_id, DELETE, DELETE_VERSION, body, _answer_of(answer))


def _answer_of(answer: WriteDone) -> Callable[[Any | None], None]:
    """A response's one partition error to ``answer`` (none: unreachable, retried)."""

    def on_response(response: Any | None) -> None:
        answer(
            _partition(response)[0] if response is not None else ErrorCode.coordinator_not_available
        )

    return on_response


def _partition(response: Any) -> tuple[ErrorCode, Any]:
    """The one partition's error and result of a share state response."""
    try:
        result = response.results[0].partitions[0]
    except (AttributeError, IndexError):
        return ErrorCode.unknown_server_error, None
    return ErrorCode(result.error_code), result


def _read_result(response: Any | None) -> tuple[ErrorCode, ShareGroupOffset]:
    if response is None:
        return ErrorCode.coordinator_not_available, UNINITIALIZED
    error, result = _partition(response)
    if error is not ErrorCode.none:
        return error, UNINITIALIZED
    batches = tuple(
        PersisterStateBatch(
            int(s.first_offset), int(s.last_offset), int(s.delivery_state), int(s.delivery_count)
        )
        for s in getattr(result, "state_batches", ())
    )
    leader_epoch = int(getattr(result, "leader_epoch", -1))
    if hasattr(result, "delivery_complete_count"):  # a summary
        return error, StateSummary(
            0,
            int(result.state_epoch),
            leader_epoch,
            int(result.start_offset),
            (),
            int(result.delivery_complete_count),
        )
    return error, ShareGroupOffset(
        0, int(result.state_epoch), leader_epoch, int(result.start_offset), batches
    )
