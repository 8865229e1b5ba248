"""Kafka's ``StreamsTopology``: the topology a Kafka Streams application sends when a
member joins (StreamsGroupHeartbeat's ``Topology``), as the group keeps it.

A topology is an epoch and its subtopologies by id. A subtopology reads its source
topics (user topics) and repartition source topics (internal, created by the broker),
writes repartition sink topics (read by another subtopology), keeps its state in
changelog topics (internal, one partition per task), and names copartition groups:
topics (by index into its source and repartition source lists) whose partitions must
line up, since one task reads the same partition of each.

Every field keeps the order the member sent (Kafka compares a rejoining member's
topology with the group's field by field); ``required_topics`` are all the topics the
topology names.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic the topology asks for (Kafka's ``TopicInfo``): partitions 0
    means "as many as the broker decides" (always 0 for a changelog topic),
    replication factor 0 the broker's default."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    topic_configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    """Indexes into the subtopology's source topics, source topic regexes and
    repartition source topics."""

    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()

    @property
    def is_stateful(self) -> bool:
        """Kafka's ``TopologyDescriber.isStateful``: it has changelog topics (standby
        tasks are only assigned for stateful subtopologies)."""
        return bool(self.state_changelog_topics)

    def copartition_topic_sets(self) -> list[frozenset[str]]:
        """Each copartition group as the names of its topics."""
        groups = []
        for group in self.copartition_groups:
            names = {self.source_topics[i] for i in group.source_topics}
            names |= {
                self.repartition_source_topics[i].name for i in group.repartition_source_topics
            }
            groups.append(frozenset(names))
        return groups


@dataclass(frozen=True, slots=True)
class StreamsTopology:
    topology_epoch: int
    subtopologies: Mapping[str, Subtopology]

    @classmethod
    def of(cls, epoch: int, subtopologies: list[Subtopology]) -> StreamsTopology:
        return cls(epoch, {s.subtopology_id: s for s in subtopologies})

    def required_topics(self) -> Iterator[str]:
        """Every topic the topology names (Kafka's ``requiredTopics``), once, sorted."""
        names: set[str] = set()
        for s in self.subtopologies.values():
            names.update(s.source_topics)
            names.update(s.repartition_sink_topics)
            names.update(t.name for t in s.repartition_source_topics)
            names.update(t.name for t in s.state_changelog_topics)
        return iter(sorted(names))
