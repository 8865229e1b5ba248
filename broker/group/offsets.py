"""Committed offsets: the value stored per partition, and Kafka's expiry rule.

A group's committed offsets live in its :class:`~broker.group.group_metadata.GroupMetadata`
(as in Kafka); this module holds the value type and the retention arithmetic, which is
the part with rules worth reading on its own (``GroupMetadata.removeExpiredOffsets``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from broker.group.results import TopicPartition

NO_LEADER_EPOCH = -1
NO_OFFSET = -1
NO_METADATA = ""


@dataclass(frozen=True)
class OffsetAndMetadata:
    """One committed offset, Kafka's ``OffsetAndMetadata``.

    ``expire_timestamp`` is only set by OffsetCommit v1-v4 clients that asked for a
    per-commit retention; modern commits leave it ``None`` and expire by the group rule.
    """

    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = NO_METADATA
    commit_timestamp: int = 0
    expire_timestamp: int | None = None


def expired_partitions(
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    now_ms: int,
    retention_ms: int,
    base_timestamp: Callable[[OffsetAndMetadata], int],
    subscribed_topics: Iterable[str] = (),
) -> list[TopicPartition]:
    """The partitions whose offsets have outlived ``retention_ms``.

    ``base_timestamp`` picks the clock the retention counts from: the moment the group
    became Empty for an empty group, the commit time otherwise. Topics the group still
    subscribes to never expire while it has members (they would be re-read from the
    start). An explicit ``expire_timestamp`` (old clients) wins over the rule.
    """
    subscribed = set(subscribed_topics)
    expired: list[TopicPartition] = []
    for tp, om in offsets.items():
        if tp.topic in subscribed:
            continue
        if om.expire_timestamp is not None:
            if now_ms >= om.expire_timestamp:
                expired.append(tp)
        elif now_ms - base_timestamp(om) >= retention_ms:
            expired.append(tp)
    return expired
