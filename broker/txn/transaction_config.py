"""The transaction coordinator's settings (Kafka's ``TransactionConfig``), from the
broker config's keys of the same names."""

from __future__ import annotations

from dataclasses import dataclass

from broker.config.broker_config import BrokerConfig

# Kafka's request.timeout.ms default: how long a marker append on a partition leader, and
# a transactional id tombstone, wait for the in-sync replicas.
REQUEST_TIMEOUT_MS = 30000
# Kafka's retry.backoff.ms default: between two attempts to write markers to a partition
# whose leader moved or is not known yet, and between attempts of a completion append.
RETRY_BACKOFF_MS = 100


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    transactional_id_expiration_ms: int = 604800000
    transaction_max_timeout_ms: int = 900000
    transaction_log_num_partitions: int = 50
    transaction_log_replication_factor: int = 3
    transaction_log_segment_bytes: int = 104857600
    transaction_log_load_buffer_size: int = 5242880
    transaction_log_min_insync_replicas: int = 2
    abort_timed_out_transactions_interval_ms: int = 10000
    remove_expired_transactional_ids_interval_ms: int = 3600000
    request_timeout_ms: int = REQUEST_TIMEOUT_MS
    retry_backoff_ms: int = RETRY_BACKOFF_MS

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> TransactionConfig:
        return cls(
            transactional_id_expiration_ms=config.transactional_id_expiration_ms,
            transaction_max_timeout_ms=config.transaction_max_timeout_ms,
            transaction_log_num_partitions=config.transaction_state_log_num_partitions,
            transaction_log_replication_factor=config.transaction_state_log_replication_factor,
            transaction_log_segment_bytes=config.transaction_state_log_segment_bytes,
            transaction_log_load_buffer_size=config.transaction_state_log_load_buffer_size,
            transaction_log_min_insync_replicas=config.transaction_state_log_min_isr,
            abort_timed_out_transactions_interval_ms=(
                config.transaction_abort_timed_out_transaction_cleanup_interval_ms
            ),
            remove_expired_transactional_ids_interval_ms=(
                config.transaction_remove_expired_transaction_cleanup_interval_ms
            ),
        )
