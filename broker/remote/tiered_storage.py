"""The remote tier the whole cluster shares: storage, its model, and the segment metadata.

Built once by the composition root when ``remote.log.storage.system.enable`` is true
(None otherwise, and nothing of tiered storage runs): the store under
``<data dir>/remote-storage`` (memory without a data dir), the metadata manager's events
beside it, and the latency model from the broker's ``rsm.config.*`` keys with the
cluster's random source (seeded in a simulation).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from broker.config.broker_config import BrokerConfig
from broker.remote.local_tiered_storage import REMOTE_STORAGE_DIR, LocalTieredStorage
from broker.remote.remote_log_metadata_manager import RemoteLogMetadataManager
from broker.remote.storage_model import LatencyModel, RemoteOperation, RemoteStorageModel


@dataclass(frozen=True, slots=True)
class TieredStorage:
    storage: LocalTieredStorage
    metadata: RemoteLogMetadataManager
    model: RemoteStorageModel

    @classmethod
    def build(
        cls, config: BrokerConfig, data_dir: Path | None, rng: random.Random
    ) -> TieredStorage:
        latency = LatencyModel(
            config.rsm_latency_p50_ms, config.rsm_latency_p99_ms, config.rsm_bytes_per_second
        )
        root = data_dir / REMOTE_STORAGE_DIR if data_dir is not None else None
        return cls(
            storage=LocalTieredStorage(root),
            metadata=RemoteLogMetadataManager(data_dir),
            model=RemoteStorageModel(rng, dict.fromkeys(RemoteOperation, latency)),
        )
