"""Replication quotas: Kafka's ReplicationQuotaManager, leader side and follower side.

A broker has two (Kafka's ``QuotaType.LeaderReplication`` and ``FollowerReplication``):
the bytes it serves to followers, and the bytes it fetches as a follower, of the
*throttled* partitions, measured as Kafka's ``SimpleRate`` over
``replication.quota.window.num`` windows of ``replication.quota.window.size.seconds``,
against ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``
(dynamic broker configs: this broker's, else the cluster default, else unbounded).

Which partitions are throttled is each topic's ``leader.replication.throttled.replicas``
/ ``follower.replication.throttled.replicas``: ``*`` (every replica) or
``partition:broker,...``, of which a broker keeps the partitions listed with its own id
(Kafka's ``parseThrottledPartitions``) — what ``kafka-reassign-partitions.sh
--throttle`` sets (leader side: the current replicas; follower side: the moving ones).

As Kafka, a throttle only ever holds back a replica that is *out of sync*:
``should_leader_throttle`` is "not in the ISR, throttled, and the leader quota exceeded"
(``ReplicaManager.shouldLeaderThrottle``: the leader answers that partition with no
records), ``should_follower_throttle`` is "lagging, throttled, and the follower quota
exceeded" (``RemoteLeaderEndPoint.shouldFollowerThrottle``: the follower leaves the
partition out of its fetch). The traffic of in-sync replicas of throttled partitions is
still recorded, so that the total stays within the rate. So a throttle slows a replica
catching up — after a restart, a pause, a reassignment — and keeps it out of the ISR
longer; it never holds an acks=all produce whose ISR is whole.

``ReplicationQuotas`` reads the configs from the cluster metadata, again only when its
version has moved (one integer compared per check). Everything reads the injected clock.
Differences from Kafka: the bytes recorded are the records' (Kafka's leader counts the
fetch response's size of the throttled partitions, a few dozen bytes more each).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Final

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.quota.sampled_rate import MetricConfig, SimpleRate
from purgatory import Clock

LEADER_THROTTLED_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE: Final = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS: Final = "follower.replication.throttled.replicas"
#: Kafka's QUOTA_BYTES_PER_SECOND_DEFAULT (Long.MAX_VALUE): no throttle.
UNBOUNDED: Final = 2**63 - 1

ALL_REPLICAS: Final = "*"
ThrottledPartitions = frozenset[int] | str  # partition ids, or ALL_REPLICAS

_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


class ReplicationQuotaType(StrEnum):
    """Kafka's ``QuotaType`` names of the replication quotas (their metric group)."""

    LEADER = "LeaderReplication"
    FOLLOWER = "FollowerReplication"


def throttled_replicas_error(name: str, value: str) -> str | None:
    """Kafka's ``ThrottledReplicaListValidator``: the message, or None when valid."""
    proposed = [part.strip() for part in value.split(",")]
    if all(_REPLICA.fullmatch(part) for part in proposed) or "".join(proposed) == ALL_REPLICAS:
        return None
    return (
        f"{name} must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def parse_throttled_partitions(value: str, broker_id: int) -> ThrottledPartitions:
    """Kafka's ``parseThrottledPartitions``: this broker's partitions of the list."""
    text = value.strip()
    if text == ALL_REPLICAS:
        return ALL_REPLICAS
    partitions = set()
    for entry in text.split(","):
        entry = entry.strip()
        if not entry:
            continue
        partition, _, broker = entry.partition(":")
        if int(broker) == broker_id:
            partitions.add(int(partition))
    return frozenset(partitions)


class ReplicationQuotaManager:
    """One side's quota (Kafka's ``ReplicationQuotaManager``): rate, bound, partitions."""

    def __init__(
        self,
        quota_type: ReplicationQuotaType,
        clock: Clock,
        samples: int = 11,
        window_seconds: int = 1,
    ) -> None:
        self.quota_type = quota_type
        self._clock = clock
        self._config = MetricConfig(samples=samples, window_ms=window_seconds * 1000)
        self._rate = SimpleRate()
        self._throttled: dict[str, ThrottledPartitions] = {}
        # Partition reads (leader) or fetches (follower) held back: for tests and
        # benches, not a Kafka metric.
        self.throttled_count = 0

    def update_quota(self, bound: float | None) -> None:
        """The new upper bound in bytes a second (None or Long.MAX_VALUE: none)."""
        if bound is not None and bound >= UNBOUNDED:
            bound = None
        self._config = MetricConfig(self._config.samples, self._config.window_ms, bound)

    @property
    def upper_bound(self) -> float | None:
        return self._config.quota

    def is_quota_exceeded(self) -> bool:
        """``Sensor.checkQuotas``: the measured rate above the bound."""
        bound = self._config.quota
        return bound is not None and self.byte_rate() > bound

    def is_throttled(self, topic: str, partition: int) -> bool:
        partitions = self._throttled.get(topic)
        if partitions is None:
            return False
        return partitions == ALL_REPLICAS or partition in partitions

    def record(self, value: int) -> None:
        """Add traffic to the rate, whatever the bound (``record(v, t, false)``)."""
        self._rate.record(self._config, float(value), self._clock.now_ms())

    def byte_rate(self) -> float:
        return self._rate.measure(self._config, self._clock.now_ms())

    def mark_throttled(self, topic: str, partitions: ThrottledPartitions) -> None:
        self._throttled[topic] = partitions

    def remove_throttle(self, topic: str) -> None:
        self._throttled.pop(topic, None)

    @property
    def throttles_any(self) -> bool:
        return bool(self._throttled)

    def throttled_topics(self) -> dict[str, ThrottledPartitions]:
        return dict(self._throttled)


class ReplicationQuotas:
    """A broker's leader and follower replication quotas, kept in step with the
    cluster's configs (``QuotaFactory``'s ``leader``/``follower`` plus the parts of
    Kafka's ``BrokerConfigHandler``/``TopicConfigHandler`` that feed them)."""

    def __init__(
        self,
        broker_id: int,
        metadata: ClusterMetadata,
        clock: Clock,
        samples: int = 11,
        window_seconds: int = 1,
    ) -> None:
        self.broker_id = broker_id
        self._metadata = metadata
        self.leader = ReplicationQuotaManager(
            ReplicationQuotaType.LEADER, clock, samples, window_seconds
        )
        self.follower = ReplicationQuotaManager(
            ReplicationQuotaType.FOLLOWER, clock, samples, window_seconds
        )
        self._version = -1

    def managers(self) -> tuple[ReplicationQuotaManager, ReplicationQuotaManager]:
        return (self.leader, self.follower)

    def refresh(self) -> None:
        """Read the rates and throttled replicas again if the metadata moved."""
        metadata = self._metadata
        if metadata.version == self._version:
            return
        self._version = metadata.version
        per_broker = metadata.broker_configs.get(str(self.broker_id), {})
        default = metadata.broker_configs.get("", {})
        sides = (
            (self.leader, LEADER_THROTTLED_RATE, LEADER_THROTTLED_REPLICAS),
            (self.follower, FOLLOWER_THROTTLED_RATE, FOLLOWER_THROTTLED_REPLICAS),
        )
        for manager, rate_name, replicas_name in sides:
            rate = per_broker.get(rate_name, default.get(rate_name))
            manager.update_quota(_bound(rate))
            for gone in set(manager.throttled_topics()) - set(metadata.topics):
                manager.remove_throttle(gone)
            for name, info in metadata.topics.items():
                value = info.configs.get(replicas_name, "")
                parsed = _parsed(value, self.broker_id)
                if parsed:
                    manager.mark_throttled(name, parsed)
                else:
                    manager.remove_throttle(name)

    def should_leader_throttle(self, topic: str, partition: int, in_sync: bool) -> bool:
        """``shouldLeaderThrottle``: answer this follower's partition with no records."""
        self.refresh()
        return _should_throttle(self.leader, topic, partition, in_sync)

    def should_follower_throttle(self, topic: str, partition: int, in_sync: bool) -> bool:
        """``shouldFollowerThrottle``: leave this partition out of the next fetch."""
        self.refresh()
        return _should_throttle(self.follower, topic, partition, in_sync)


def _should_throttle(
    quota: ReplicationQuotaManager, topic: str, partition: int, in_sync: bool
) -> bool:
    if in_sync or not quota.is_throttled(topic, partition) or not quota.is_quota_exceeded():
        return False
    quota.throttled_count += 1
    return True


def _bound(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(int(text.strip()))
    except ValueError:
        return None  # validated when set; a bad stored value throttles nothing


def _parsed(value: str, broker_id: int) -> ThrottledPartitions:
    if not value.strip() or throttled_replicas_error("", value) is not None:
        return frozenset()
    return parse_throttled_partitions(value, broker_id)
