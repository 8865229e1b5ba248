"""Reading and waiting on a running cluster, and a raw producer that shows error codes."""

from __future__ import annotations

import time

from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.builders import request_builder
from protocol.record_builder import build_record_batch
from testkit.raw_client import RawClient

PRODUCE = 0


class ProduceClient(RawClient):
    """A raw connection that produces with our own codec, to see the error codes."""

    async def produce(
        self, topic: str, partition: int, value: bytes, *, acks: int = -1, timeout_ms: int = 10000
    ) -> tuple[ErrorCode, int]:
        """One record, Produce v7; returns (error code, base offset)."""
        batch = build_record_batch([(None, value, [])], timestamp_ms=int(time.time() * 1000))
        response = await self.request(
            PRODUCE,
            7,
            "ProduceRequest",
            transactional_id=None,
            acks=acks,
            timeout=timeout_ms,
            topic_data=(
                request_builder(PRODUCE, 7).TopicProduceData(
                    name=topic,
                    partition_data=(
                        request_builder(PRODUCE, 7).PartitionProduceData(
                            index=partition, records=batch
                        ),
                    ),
                ),
            ),
        )
        part = response.responses[0].partition_responses[0]
        return part.error_code, int(part.base_offset)


async def raw_to_leader(app: MiniKafka, topic: str, partition: int) -> ProduceClient:
    state = app.cluster.partition_state(topic, partition)
    assert state is not None
    endpoint = app.cluster.brokers[state.leader]
    return await ProduceClient.connect(endpoint.host, endpoint.port)


def isr(app: MiniKafka, topic: str, partition: int = 0) -> list[int]:
    state = app.cluster.partition_state(topic, partition)
    assert state is not None
    return list(state.isr)


def leader_of(app: MiniKafka, topic: str, partition: int = 0) -> int:
    state = app.cluster.partition_state(topic, partition)
    assert state is not None
    return state.leader
