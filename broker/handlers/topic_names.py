"""The topics a request names, by name or by topic id, for the handler modules.

Newer versions of Produce (v13+), Fetch (v13+), OffsetCommit and OffsetFetch (v10+) name
a topic by its id only (KIP-516, KIP-848). ``topic_name`` finds the name either way
(None for an id the cluster does not know: UNKNOWN_TOPIC_ID, where a name would have
been UNKNOWN_TOPIC_OR_PARTITION, as Kafka's ``KafkaApis`` answers); ``RequestTopicIds``
keeps the ids a request gave so that its answer names each topic as it was asked, and
``id_of`` is the id of a name. A module whose requests name topics
exposes ``topic_partitions(ctx, request)`` — the (topic, partition) pairs the request
names — so that a fault limited to a topic can tell whether a request concerns it.
The two group APIs' pair functions live here too, for ``offset_commit`` and
``offset_fetch`` to expose as their ``topic_partitions``.
"""

from __future__ import annotations

import uuid
from typing import Any

from broker.handlers.base import TopicPartitionPairs
from broker.server.context import RequestContext

__all__ = [
    "NO_UUID",
    "RequestTopicIds",
    "id_of",
    "offset_commit_topic_partitions",
    "offset_fetch_topic_partitions",
    "topic_id",
    "topic_name",
]

NO_UUID = uuid.UUID(int=0)


def topic_name(ctx: RequestContext, topic: Any) -> str | None:
    """The name of a request's topic entry, whether it gives the name or only the id;
    None for an id the cluster does not know."""
    name = getattr(topic, "name", None) or getattr(topic, "topic", None)
    if name:
        return str(name)
    topic_id = getattr(topic, "topic_id", None)
    if topic_id is not None and topic_id != NO_UUID:
        info = ctx.services.metadata.topic_by_id(topic_id)
        if info is not None:
            return info.name
    return None


def topic_id(topic: Any) -> uuid.UUID:
    """The topic id of a request's topic entry; the zero uuid when it has none."""
    found = getattr(topic, "topic_id", None)
    return found if isinstance(found, uuid.UUID) else NO_UUID


def id_of(ctx: RequestContext, name: str) -> uuid.UUID:
    """The id of the topic ``name``; the zero uuid for a topic the cluster does not
    have (Kafka's ``MetadataCache.getTopicId``)."""
    info = ctx.services.metadata.topics.get(name)
    return info.topic_id if info is not None else NO_UUID


class RequestTopicIds:
    """The topics a by-id request named: name -> the id it gave, and the ids the
    cluster does not know with the partitions named under them (answered
    UNKNOWN_TOPIC_ID). Made only for a request version that names topics by id."""

    __slots__ = ("by_name", "unknown")

    def __init__(self) -> None:
        self.by_name: dict[str, uuid.UUID] = {}
        self.unknown: dict[uuid.UUID, list[int]] = {}

    def resolve(self, ctx: RequestContext, topic: Any, partitions: list[int]) -> str | None:
        """The name of ``topic`` (an entry of a by-id request), remembering its id; None,
        and its partitions kept as unknown, when the cluster has no topic of that id."""
        name = topic_name(ctx, topic)
        found = topic_id(topic)
        if name is None:
            self.unknown.setdefault(found, []).extend(partitions)
            return None
        self.by_name[name] = found
        return name

    def id_for(self, ctx: RequestContext, name: str) -> uuid.UUID:
        """The id the request gave for ``name`` (the cluster's, for a name it did not
        give: an all-topics answer)."""
        found = self.by_name.get(name)
        return found if found is not None else id_of(ctx, name)


def offset_commit_topic_partitions(ctx: RequestContext, request: Any) -> TopicPartitionPairs:
    """The pairs an OffsetCommit request names."""
    pairs: TopicPartitionPairs = []
    for topic in request.topics:
        name = topic_name(ctx, topic)
        pairs.extend((name, int(p.partition_index)) for p in topic.partitions)
    return pairs


def offset_fetch_topic_partitions(ctx: RequestContext, request: Any) -> TopicPartitionPairs:
    """The pairs an OffsetFetch request names, in every group of a v8+ request (none
    for a group that asks for all its topics)."""
    groups = getattr(request, "groups", None)
    topic_lists = [request.topics] if groups is None else [g.topics for g in groups]
    pairs: TopicPartitionPairs = []
    for topics in topic_lists:
        for topic in topics or ():
            name = topic_name(ctx, topic)
            pairs.extend((name, int(i)) for i in topic.partition_indexes)
    return pairs
