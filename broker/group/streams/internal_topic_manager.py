"""Kafka's ``InternalTopicManager.configureTopics``: a topology against the cluster.

In Kafka's order, each step a class of Kafka's ``streams/topics`` package:

1. every source topic must exist, else MISSING_SOURCE_TOPICS ("Source topics a, b are
   missing.");
2. ``RepartitionTopics``: a repartition topic without a fixed count gets the most
   partitions among the source and repartition source topics of the subtopology that
   writes it (repeated until nothing changes; a loop that never resolves, or a
   repartition source topic no subtopology writes, is STREAMS_INVALID_TOPOLOGY);
3. ``CopartitionedTopicsEnforcer``: in each copartition group the user topics must have
   one partition count (else INCORRECTLY_PARTITIONED_TOPICS, "Following topics do not
   have the same number of partitions: [{a=2, b=3}]"), and the group's repartition
   topics take it (all-repartition groups: the fixed count, or the largest);
4. ``ChangelogTopics``: a changelog topic gets as many partitions as its subtopology has
   tasks;
5. the internal topics the cluster lacks are to be created (MISSING_INTERNAL_TOPICS,
   "Internal topics are missing: [a, b]"); one that exists with another partition count
   is INCORRECTLY_PARTITIONED_TOPICS ("Existing topic t has different number of
   partitions: expected 4, found 2").

A configuration error leaves the topology not ready (no tasks assigned); the coordinator
answers its status on every heartbeat until the topics fit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from broker.group.streams.configured_topology import (
    ConfiguredSubtopology,
    ConfiguredTopology,
    CreatableTopic,
    Status,
    StreamsInvalidTopologyError,
    TopicConfigurationError,
)
from broker.group.streams.streams_topology import StreamsTopology, Subtopology, TopicInfo

log = logging.getLogger("broker.group.streams")

PartitionCounts = Mapping[str, int]  # the cluster's topics: name -> partitions
CountOf = Callable[[str], int | None]  # a topic's partitions, decided or existing


def configure_topics(
    topology: StreamsTopology, metadata_hash: int, cluster: PartitionCounts
) -> ConfiguredTopology:
    """The topology checked against ``cluster``; see the module docstring. Raises
    ``StreamsInvalidTopologyError`` for a topology no cluster can satisfy."""
    try:
        _throw_on_missing_source_topics(topology, cluster)
        decided = _decide_partition_counts(topology, cluster)
        configured = {
            s.subtopology_id: _configured(s, cluster, decided)
            for s in sorted(topology.subtopologies.values(), key=lambda s: s.subtopology_id)
        }
        to_create = _missing_internal_topics(topology, configured, cluster)
    except TopicConfigurationError as failed:
        log.warning(
            "Topic configuration failed for topology epoch %d: %s", topology.topology_epoch, failed
        )
        return ConfiguredTopology(topology.topology_epoch, metadata_hash, None, {}, failed)
    error: TopicConfigurationError | None = None
    if to_create:
        error = TopicConfigurationError(
            Status.MISSING_INTERNAL_TOPICS, f"Internal topics are missing: [{', '.join(to_create)}]"
        )
        log.info(
            "Valid topic configuration found, but internal topics are missing for topology "
            "epoch %d: %s",
            topology.topology_epoch,
            error,
        )
    else:
        log.info(
            "Valid topic configuration found, topology epoch %d is now initialized.",
            topology.topology_epoch,
        )
    return ConfiguredTopology(topology.topology_epoch, metadata_hash, configured, to_create, error)


def _throw_on_missing_source_topics(topology: StreamsTopology, cluster: PartitionCounts) -> None:
    missing = sorted(
        {t for s in topology.subtopologies.values() for t in s.source_topics if t not in cluster}
    )
    if missing:
        raise TopicConfigurationError(
            Status.MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing."
        )


def _decide_partition_counts(topology: StreamsTopology, cluster: PartitionCounts) -> dict[str, int]:
    decided: dict[str, int] = {}

    def count(topic: str) -> int | None:
        return cluster.get(topic, decided.get(topic))

    subtopologies = list(topology.subtopologies.values())
    decided.update(_repartition_counts(subtopologies, count))
    fixed = {t.name for s in subtopologies for t in s.repartition_source_topics if t.partitions}
    flexible = {
        t.name for s in subtopologies for t in s.repartition_source_topics if not t.partitions
    }
    for s in subtopologies:
        for group in s.copartition_topic_sets():
            decided.update(_enforce_copartitioning(group, fixed, flexible, count))
    for s in subtopologies:
        tasks = _number_of_tasks(s, count)
        for changelog in s.state_changelog_topics:
            decided[changelog.name] = tasks
    return decided


def _repartition_counts(subtopologies: list[Subtopology], count: CountOf) -> dict[str, int]:
    """Kafka's ``RepartitionTopics.setup``."""
    counts = {
        t.name: t.partitions
        for s in subtopologies
        for t in s.repartition_source_topics
        if t.partitions
    }
    while True:
        needed = progress = False
        for s in subtopologies:
            for sink in s.repartition_sink_topics:
                if sink in counts:
                    continue
                candidates = [
                    counts[t.name] for t in s.repartition_source_topics if t.name in counts
                ]
                candidates += [c for t in s.source_topics if (c := count(t)) is not None]
                if candidates:
                    counts[sink] = max(candidates)
                    progress = True
                else:
                    needed = True
        if not needed:
            break
        if not progress:
            raise StreamsInvalidTopologyError(
                "Failed to compute number of partitions for all repartition topics. There may "
                "be loops in the topology that cannot be resolved."
            )
    for s in subtopologies:
        if any(t.name not in counts for t in s.repartition_source_topics):
            raise StreamsInvalidTopologyError(
                "Failed to compute number of partitions for all repartition topics, because "
                "a repartition source topic is never used as a sink topic."
            )
    return counts


def _enforce_copartitioning(
    group: frozenset[str], fixed: set[str], flexible: set[str], count: CountOf
) -> dict[str, int]:
    """Kafka's ``CopartitionedTopicsEnforcer.enforce``."""
    repartition = {t: _count_or_fail(t, count) for t in group if t in fixed or t in flexible}
    others = {t: _count_or_fail(t, count) for t in group if t not in repartition}
    if not group:
        return {}
    if not others:
        fixed_here = sorted(t for t in repartition if t in fixed)
        if fixed_here:
            partitions = repartition[fixed_here[0]]
            if any(repartition[t] != partitions for t in fixed_here):
                raise _not_copartitioned(repartition)
        else:
            partitions = max(repartition.values(), default=0)
            if partitions == 0:
                raise StreamsInvalidTopologyError(
                    "All topics in the copartition group had undefined partition number: "
                    f"{sorted(repartition)}"
                )
    else:
        partitions = next(iter(others.values()))
        if any(p != partitions for p in others.values()):
            raise _not_copartitioned(others)
    for topic, current in repartition.items():
        if topic in fixed and current != partitions:
            raise TopicConfigurationError(
                Status.INCORRECTLY_PARTITIONED_TOPICS,
                f"Number of partitions [{current}] of repartition topic [{topic}] doesn't match "
                f"number of partitions [{partitions}] of the source topic.",
            )
    return dict.fromkeys(repartition, partitions)


def _not_copartitioned(counts: Mapping[str, int]) -> TopicConfigurationError:
    listed = ", ".join(f"{t}={c}" for t, c in sorted(counts.items()))
    return TopicConfigurationError(
        Status.INCORRECTLY_PARTITIONED_TOPICS,
        f"Following topics do not have the same number of partitions: [{{{listed}}}]",
    )


def _count_or_fail(topic: str, count: CountOf) -> int:
    partitions = count(topic)
    if partitions is None:
        raise RuntimeError(f"Number of partitions is not set for topic: {topic}")
    return partitions


def _number_of_tasks(subtopology: Subtopology, count: CountOf) -> int:
    inputs = [*subtopology.source_topics, *(t.name for t in subtopology.repartition_source_topics)]
    if not inputs:
        raise StreamsInvalidTopologyError(
            f"No source topics found for subtopology {subtopology.subtopology_id}"
        )
    return max(_count_or_fail(t, count) for t in inputs)


def _configured(
    s: Subtopology, cluster: PartitionCounts, decided: Mapping[str, int]
) -> ConfiguredSubtopology:
    def count(topic: str) -> int | None:
        return cluster.get(topic, decided.get(topic))

    return ConfiguredSubtopology(
        number_of_tasks=_number_of_tasks(s, count),
        source_topics=frozenset(s.source_topics),
        repartition_source_topics={t.name: decided[t.name] for t in s.repartition_source_topics},
        repartition_sink_topics=frozenset(s.repartition_sink_topics),
        state_changelog_topics={t.name: decided[t.name] for t in s.state_changelog_topics},
    )


def _missing_internal_topics(
    topology: StreamsTopology,
    configured: Mapping[str, ConfiguredSubtopology],
    cluster: PartitionCounts,
) -> dict[str, CreatableTopic]:
    infos: dict[str, TopicInfo] = {}
    for s in topology.subtopologies.values():
        for info in (*s.repartition_source_topics, *s.state_changelog_topics):
            infos[info.name] = info
    wanted: dict[str, int] = {}
    for c in configured.values():
        wanted.update(c.repartition_source_topics)
        wanted.update(c.state_changelog_topics)
    to_create = {}
    for name in sorted(wanted):
        found = cluster.get(name)
        if found is None:
            info = infos[name]
            to_create[name] = CreatableTopic(
                name, wanted[name], info.replication_factor or -1, info.topic_configs
            )
        elif found != wanted[name]:
            raise TopicConfigurationError(
                Status.INCORRECTLY_PARTITIONED_TOPICS,
                f"Existing topic {name} has different number of partitions: expected "
                f"{wanted[name]}, found {found}",
            )
    return to_create
