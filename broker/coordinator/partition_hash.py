"""Which partition of a coordinator topic holds a key (a group id in ``__consumer_offsets``,
a transactional id in ``__transaction_state``).

Kafka computes ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``. Clients do
not compute it themselves (they ask FindCoordinator), but tools that read the offsets
topic, and anyone comparing our topic with a real broker's, expect the same partition
for the same group, so the Java arithmetic is reproduced exactly: ``String.hashCode``
runs over UTF-16 code units with 32-bit wrap-around, and ``Utils.abs`` maps
``Integer.MIN_VALUE`` to 0 (``Math.abs`` would leave it negative).
"""

from __future__ import annotations

from functools import lru_cache

_INT_MIN = -(2**31)


@lru_cache(maxsize=65536)  # asked on every group request: a group's id hashes once
def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` as a signed int32."""
    data = value.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: absolute value, with ``Integer.MIN_VALUE`` mapped to 0."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` (Kafka's ``partitionFor``)."""
    if num_partitions <= 0:
        raise ValueError(f"offsets.topic.num.partitions must be positive, got {num_partitions}")
    return kafka_abs(java_string_hash(group_id)) % num_partitions
