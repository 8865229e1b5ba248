"""Kafka's ``ConfiguredTopology`` / ``ConfiguredSubtopology`` and the heartbeat's
status codes: a topology checked against the cluster's topics.

``InternalTopicManager.configure_topics`` (``internal_topic_manager.py``) makes one:
the number of tasks of each subtopology (the most partitions among its source topics),
the partition counts of its internal topics, the internal topics still to create, and
the status that keeps the topology from being ready (a ``TopicConfigurationError``).
A group assigns tasks only from a ready topology.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum


class Status(IntEnum):
    """Kafka's ``StreamsGroupHeartbeatResponse.Status`` codes."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4


class TopicConfigurationError(Exception):
    """Kafka's ``TopicConfigurationException``: the topology is valid but the cluster's
    topics do not fit it yet; the heartbeat answers the status with the message."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class StreamsInvalidTopologyError(Exception):
    """Kafka's ``StreamsInvalidTopologyException``: STREAMS_INVALID_TOPOLOGY."""


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    """An internal topic to create (Kafka's ``CreatableTopic``): replication factor -1
    for the broker's default."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ConfiguredSubtopology:
    number_of_tasks: int
    source_topics: frozenset[str]
    repartition_source_topics: Mapping[str, int]  # name -> partitions
    repartition_sink_topics: frozenset[str]
    state_changelog_topics: Mapping[str, int]

    @property
    def is_stateful(self) -> bool:
        return bool(self.state_changelog_topics)


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    topology_epoch: int
    metadata_hash: int
    subtopologies: Mapping[str, ConfiguredSubtopology] | None
    internal_topics_to_create: Mapping[str, CreatableTopic] = field(default_factory=dict)
    error: TopicConfigurationError | None = None

    @property
    def is_ready(self) -> bool:
        """Kafka's ``isReady``: every topic there with the right partition count."""
        return self.error is None and self.subtopologies is not None
