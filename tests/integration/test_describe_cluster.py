"""DescribeCluster v1+ as Kafka 4 answers it: the endpoint type, and fenced brokers (v2).

Raw requests show the exact codes: a CONTROLLER endpoint type sent to a broker is
MISMATCHED_ENDPOINT_TYPE, an unknown one UNSUPPORTED_ENDPOINT_TYPE; v2's
``include_fenced_brokers`` lists a stopped broker with ``is_fenced``. kafka-python's
``describe_cluster`` (v2, fenced brokers included) sees the same.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kafka.admin import KafkaAdminClient
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

DESCRIBE_CLUSTER = 60


async def describe(app: MiniKafka, version: int, **fields: Any) -> Any:
    broker = app.brokers[0]
    client = await RawClient.connect(broker.advertised_host, broker.port)
    try:
        return await client.request(
            DESCRIBE_CLUSTER,
            version,
            "DescribeClusterRequest",
            include_cluster_authorized_operations=False,
            **fields,
        )
    finally:
        await client.close()


def kafka_python_brokers(bootstrap: str) -> list[dict[str, Any]]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        brokers: list[dict[str, Any]] = admin.describe_cluster()["brokers"]
        return brokers
    finally:
        admin.close()


async def test_endpoint_types_and_fenced_brokers() -> None:
    async with running_cluster(3) as app:
        answer = await describe(app, 1, endpoint_type=1)
        assert answer.error_code is ErrorCode.none and answer.endpoint_type == 1
        assert [int(b.broker_id) for b in answer.brokers] == [0, 1, 2]
        answer = await describe(app, 1, endpoint_type=2)
        assert answer.error_code is ErrorCode.mismatched_endpoint_type
        assert answer.brokers == ()
        answer = await describe(app, 1, endpoint_type=7)
        assert answer.error_code is ErrorCode.unsupported_endpoint_type

        await app.stop_broker(2)
        live = await describe(app, 2, endpoint_type=1, include_fenced_brokers=False)
        assert [int(b.broker_id) for b in live.brokers] == [0, 1]
        every = await describe(app, 2, endpoint_type=1, include_fenced_brokers=True)
        assert [(int(b.broker_id), b.is_fenced) for b in every.brokers] == [
            (0, False),
            (1, False),
            (2, True),
        ]
        bootstrap = f"{app.brokers[0].advertised_host}:{app.brokers[0].port}"
        brokers = await asyncio.to_thread(kafka_python_brokers, bootstrap)
        assert {(b["broker_id"], b["is_fenced"]) for b in brokers} == {
            (0, False),
            (1, False),
            (2, True),
        }
