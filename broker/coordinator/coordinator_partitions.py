"""The partitions of a coordinator's internal topic, and this broker's place in them.

The group coordinator (``__consumer_offsets``), the transaction coordinator
(``__transaction_state``) and the share coordinator (``__share_group_state``) place their
keys the same way, and Kafka writes that part twice
(``GroupMetadataManager`` and ``TransactionStateManager``); here it is written once:

* **placement**: which partition holds a key (``partition_for``: Java's
  ``String.hashCode``, see ``broker/coordinator/partition_hash.py``), the number of partitions
  kept in step with the topic;
* **the topic**, created on first use with the replication factor capped by the live
  brokers (``ensure_topic``), and the coordinator of a key: the leader of its partition,
  if alive (``coordinator_endpoint``);
* **leadership**: the partitions this broker leads and their leader epochs
  (``led_partitions``, ``leads``), and a callback on every change of the topic
  (``follow``), from which each manager loads and unloads its own state;
* **append errors**: the failed appends to the topic that every coordinator answers as
  "the coordinator is not available" or "not the coordinator" (Kafka's mappings in
  ``storeGroup``, ``storeOffsets`` and ``appendTransactionToLog`` agree on these).

What each manager keeps per partition (groups, transactional ids, loads under way) stays
in the manager: those differ, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import BrokerEndpoint, ClusterMetadata, TopicInfo
from broker.coordinator.partition_hash import partition_for

E = ErrorCode

# A failed append to a coordinator partition whose leader cannot take it now: the client
# retries, after FindCoordinator if need be.
PARTITION_UNAVAILABLE_ERRORS = frozenset(
    {E.unknown_topic_or_partition, E.not_enough_replicas, E.not_enough_replicas_after_append}
)
# A failed append on a broker that no longer leads the partition: the client rediscovers
# the coordinator.
LEADER_MOVED_ERRORS = frozenset({E.not_leader_or_follower, E.kafka_storage_error})


class CoordinatorPartitions:
    """Placement and leadership of one internal topic's partitions. See the module
    docstring."""

    def __init__(
        self,
        topic_name: str,
        broker_id: int,
        metadata: ClusterMetadata,
        num_partitions: int,
        replication_factor: int,
        topic_configs: Callable[[int], dict[str, str]],
    ) -> None:
        """``num_partitions`` and ``replication_factor`` are the configured ones (the
        topic, once it exists, decides the number of partitions); ``topic_configs``
        gives the topic's configs for the replication factor it is created with."""
        self.topic_name = topic_name
        self.broker_id = broker_id
        self._metadata = metadata
        self._configured_partitions = num_partitions
        self._replication_factor = replication_factor
        self._topic_configs = topic_configs
        self._num_partitions = num_partitions
        self._on_change: Callable[[], None] | None = None

    # ============================================================== placement
    def partition_for(self, key: str) -> int:
        """Kafka's ``Utils.abs(key.hashCode) % partitions``."""
        return partition_for(key, self._num_partitions)

    def topic(self) -> TopicInfo | None:
        """The topic, if it exists yet."""
        return self._metadata.topics.get(self.topic_name)

    def ensure_topic(self) -> TopicInfo:
        """Create the topic on first use, as Kafka does, with the replication factor
        capped by the live brokers."""
        cluster = self._metadata
        topic = cluster.topics.get(self.topic_name)
        if topic is None:
            alive = max(len(cluster.alive_brokers()), 1)
            replication = min(self._replication_factor, alive)
            topic = cluster.create_topic(
                self.topic_name,
                self._configured_partitions,
                replication,
                self._topic_configs(replication),
            )
        self._num_partitions = len(topic.partitions)
        return topic

    def coordinator_endpoint(self, key: str) -> tuple[ErrorCode, BrokerEndpoint | None]:
        """FindCoordinator: the leader of the key's partition, if it is alive."""
        topic = self.ensure_topic()
        state = topic.partitions[self.partition_for(key)]
        endpoint = self._metadata.brokers.get(state.leader)
        if endpoint is None or not endpoint.alive:
            return E.coordinator_not_available, None
        return E.none, endpoint

    # ============================================================= leadership
    def led_partitions(self) -> dict[int, int]:
        """The partitions this broker leads now, with their leader epochs."""
        topic = self.topic()
        if topic is None:
            return {}
        return {s.partition: s.leader_epoch for s in topic.partitions if s.leader == self.broker_id}

    def leads(self, partition: int, leader_epoch: int) -> bool:
        """Whether this broker still leads ``partition`` at ``leader_epoch``."""
        topic = self.topic()
        if topic is None or partition >= len(topic.partitions):
            return False
        state = topic.partitions[partition]
        return state.leader == self.broker_id and state.leader_epoch == leader_epoch

    def follow(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change`` now and on every change of the topic (its leaders)."""
        self._on_change = on_change
        self._refresh(self.topic())
        self._metadata.subscribe(self._on_metadata_change)
        on_change()

    def unfollow(self) -> None:
        self._metadata.unsubscribe(self._on_metadata_change)
        self._on_change = None

    def _refresh(self, topic: TopicInfo | None) -> None:
        if topic is not None:
            self._num_partitions = len(topic.partitions)

    def _on_metadata_change(self, name: str, topic: TopicInfo | None) -> None:
        if name != self.topic_name:
            return
        self._refresh(topic)
        if self._on_change is not None:
            self._on_change()
