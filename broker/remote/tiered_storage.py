"""The remote tier the whole cluster shares: storage, its model, and the segment metadata.

Built once by the composition root when ``remote.log.storage.system.enable`` is true
(None otherwise, and nothing of tiered storage runs): the store under
``<data dir>/remote-storage`` (memory without a data dir), the ``__remote_log_metadata``
topic (``rlmm.config.remote.log.metadata.topic.*``: Kafka's topic-based metadata
manager's configs, under its ``remote.log.metadata.manager.impl.prefix``) over the
brokers' replica managers, and the latency model from the broker's ``rsm.config.*`` keys
with the cluster's random source (seeded in a simulation). Each broker reads the topic
into a metadata cache of its own (``new_metadata_manager``); ``metadata`` is one more,
the cluster's view for the control endpoint and the console.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.config.broker_config import BrokerConfig
from broker.remote.local_tiered_storage import REMOTE_STORAGE_DIR, LocalTieredStorage
from broker.remote.remote_log_metadata_manager import RemoteLogMetadataManager
from broker.remote.remote_log_metadata_topic import MetadataTopicReplicas, RemoteLogMetadataTopic
from broker.remote.storage_model import LatencyModel, RemoteOperation, RemoteStorageModel


@dataclass(frozen=True, slots=True)
class TieredStorage:
    storage: LocalTieredStorage
    topic: RemoteLogMetadataTopic
    metadata: RemoteLogMetadataManager
    model: RemoteStorageModel

    @classmethod
    def build(
        cls,
        config: BrokerConfig,
        data_dir: Path | None,
        rng: random.Random,
        cluster: ClusterMetadata,
        replicas: Callable[[], Mapping[int, MetadataTopicReplicas]],
        wall_clock_ms: Callable[[], int],
    ) -> TieredStorage:
        latency = LatencyModel(
            config.rsm_latency_p50_ms, config.rsm_latency_p99_ms, config.rsm_bytes_per_second
        )
        root = data_dir / REMOTE_STORAGE_DIR if data_dir is not None else None
        topic = RemoteLogMetadataTopic(
            cluster,
            replicas,
            wall_clock_ms,
            num_partitions=config.rlmm_topic_num_partitions,
            replication_factor=config.rlmm_topic_replication_factor,
            retention_ms=config.rlmm_topic_retention_ms,
            min_isr=config.rlmm_topic_min_isr,
        )
        return cls(
            storage=LocalTieredStorage(root),
            topic=topic,
            metadata=RemoteLogMetadataManager(topic),
            model=RemoteStorageModel(rng, dict.fromkeys(RemoteOperation, latency)),
        )

    def new_metadata_manager(self) -> RemoteLogMetadataManager:
        """A broker's own cache of the topic (Kafka's RLMM on that broker)."""
        return RemoteLogMetadataManager(self.topic)
