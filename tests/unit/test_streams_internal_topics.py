"""Kafka's ``InternalTopicManager.configureTopics`` for streams groups: partition counts
of repartition and changelog topics, copartitioning, and the status of a topology the
cluster's topics do not fit."""

from __future__ import annotations

import pytest

from broker.group.streams.configured_topology import Status, StreamsInvalidTopologyError
from broker.group.streams.internal_topic_manager import configure_topics
from broker.group.streams.streams_topology import (
    CopartitionGroup,
    StreamsTopology,
    Subtopology,
    TopicInfo,
)


def topology(*subtopologies: Subtopology) -> StreamsTopology:
    return StreamsTopology.of(1, list(subtopologies))


JOIN = topology(
    Subtopology(
        "0",
        source_topics=("left", "right"),
        state_changelog_topics=(TopicInfo("join-store-changelog"),),
        repartition_sink_topics=("rep",),
        copartition_groups=(CopartitionGroup((0, 1)),),
    ),
    Subtopology(
        "1",
        repartition_source_topics=(TopicInfo("rep"),),
        state_changelog_topics=(TopicInfo("agg-changelog"),),
    ),
)


def test_internal_topics_take_their_partition_counts_from_the_sources() -> None:
    configured = configure_topics(JOIN, 1, {"left": 3, "right": 3})
    assert configured.error is not None
    assert configured.error.status is Status.MISSING_INTERNAL_TOPICS
    assert configured.error.message == (
        "Internal topics are missing: [agg-changelog, join-store-changelog, rep]"
    )
    counts = {n: t.num_partitions for n, t in configured.internal_topics_to_create.items()}
    assert counts == {"agg-changelog": 3, "join-store-changelog": 3, "rep": 3}
    ready = configure_topics(JOIN, 1, {"left": 3, "right": 3, **counts})
    assert ready.is_ready and ready.subtopologies is not None
    assert {s: c.number_of_tasks for s, c in ready.subtopologies.items()} == {"0": 3, "1": 3}


def test_a_fixed_repartition_count_wins() -> None:
    fixed = topology(
        Subtopology("0", source_topics=("in",), repartition_sink_topics=("rep",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("rep", 8),)),
    )
    configured = configure_topics(fixed, 1, {"in": 2})
    assert configured.internal_topics_to_create["rep"].num_partitions == 8


def test_copartitioned_sources_must_agree() -> None:
    configured = configure_topics(JOIN, 1, {"left": 3, "right": 4})
    assert configured.error is not None and not configured.is_ready
    assert configured.error.status is Status.INCORRECTLY_PARTITIONED_TOPICS
    assert configured.error.message == (
        "Following topics do not have the same number of partitions: [{left=3, right=4}]"
    )


def test_missing_source_topics_are_named_sorted() -> None:
    configured = configure_topics(JOIN, 1, {})
    assert configured.error is not None
    assert (configured.error.status, configured.error.message) == (
        Status.MISSING_SOURCE_TOPICS,
        "Source topics left, right are missing.",
    )


def test_a_repartition_topic_nobody_writes_is_an_invalid_topology() -> None:
    orphan = topology(Subtopology("0", repartition_source_topics=(TopicInfo("nobody"),)))
    with pytest.raises(StreamsInvalidTopologyError):
        configure_topics(orphan, 1, {})
