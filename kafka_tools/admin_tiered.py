"""What ``topics describe`` adds for a tiered topic (``remote.storage.enable=true``).

``kafka-topics.sh --describe`` shows no sizes or tiers; minikafka's adds, on each partition
line of a tiered topic, what Kafka's own APIs tell a client about the two tiers:

- ``LocalLogStartOffset``: ListOffsets EARLIEST_LOCAL (-4, v8+) at the leader -- below it
  the records are in the remote tier only;
- ``TieredOffset``: ListOffsets LATEST_TIERED (-5, v9+) -- the highest offset copied to the
  tier (-1: nothing yet);
- ``LocalSize``: the leader's replica's bytes on disk, from DescribeLogDirs (Kafka's
  ``PartitionSize`` counts the local log only).

The remote tier's bytes are in no Kafka API (Kafka publishes them as the
``RemoteLogSizeBytes`` metric, KIP-963): minikafka's are in ``/metrics`` under that name,
in ``GET /remote`` and on the console's topic page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.client import KafkaClient
from kafka_tools.client.cluster import DESCRIBE_LOG_DIRS
from protocol.builders import Builder

EARLIEST_LOCAL, LATEST_TIERED = -4, -5


def is_tiered(overrides: dict[str, str]) -> bool:
    return overrides.get("remote.storage.enable", "").strip().lower() == "true"


async def tier_fields(client: KafkaClient, topic: str, leaders: dict[int, int]) -> dict[int, str]:
    """Partition -> the text its describe line gains (``leaders``: partition -> leader)."""
    online = [p for p, leader in leaders.items() if leader >= 0]
    tps = [(topic, p) for p in online]
    local_start = await client.list_offsets(tps, EARLIEST_LOCAL)
    tiered = await client.list_offsets(tps, LATEST_TIERED)
    sizes: dict[int, int] = {}
    for leader in sorted({leaders[p] for p in online}):
        led = [p for p in online if leaders[p] == leader]
        sizes.update(await _local_sizes(client, leader, topic, led))
    return {
        p: f"\tLocalLogStartOffset: {local_start[(topic, p)]}\t"
        f"TieredOffset: {tiered[(topic, p)]}\tLocalSize: {sizes.get(p, '-')}"
        for p in online
    }


async def _local_sizes(
    client: KafkaClient, broker: int, topic: str, partitions: Sequence[int]
) -> dict[int, int]:
    def build(b: Builder, version: int) -> Any:
        return b.DescribeLogDirsRequest(
            topics=(b.DescribableLogDirTopic(topic=topic, partitions=tuple(partitions)),)
        )

    response = await client.call(DESCRIBE_LOG_DIRS, build, broker)
    sizes: dict[int, int] = {}
    for result in response.results:
        if result.error_code is not ErrorCode.none:
            continue
        for described in result.topics:
            if str(described.name) == topic:
                for p in described.partitions:
                    sizes[int(p.partition_index)] = int(p.partition_size)
    return sizes
