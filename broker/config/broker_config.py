"""Broker configuration under Kafka's own config names.

Users bring a ``server.properties`` from a real Kafka installation or pass
``--override key=value``; both use Kafka's dotted names, so the model is keyed by those
names (pydantic aliases). Defaults are Kafka's.

The two sources differ on keys the model does not know, on purpose:

* A properties file is Kafka's: Kafka's stock ``server.properties`` (KRaft:
  ``process.roles``, ``node.id``, ``controller.quorum.bootstrap.servers``,
  ``num.network.threads``, ...) sets many things a simulator has no use for. Like Kafka,
  which logs a supplied config it does not know and goes on, minikafka ignores them and
  ``read_config`` returns them, for one log line listing them all. ``listeners`` and
  ``advertised.listeners`` are modelled: they give the listen host, the port of
  broker 0 and the advertised host (``client_listener``).
* ``--override`` is typed by a person for minikafka: a key the model does not know is
  an error that names it (with the closest known key), since ``num.partiton=3`` would
  otherwise be a silent no-op.

A bad value of a modelled key is an error from either source.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from broker.cluster.kraft_quorum import parse_quorum_voters
from broker.config.config_error import ConfigError as ConfigError
from broker.config.java_properties import parse_properties as parse_properties
from broker.config.plugin_names import CLIENT_TELEMETRY_RECEIVER as CLIENT_TELEMETRY_RECEIVER
from broker.security.authorizer.acl import STANDARD_AUTHORIZER

#: The metrics reporter (``metric.reporters``) that turns client telemetry on: a name, no
#: Java class (KIP-714's receiver is a ``ClientTelemetry`` reporter plugin in Kafka).


class BrokerConfig(BaseModel):
    """Kafka broker settings that minikafka honours (Kafka's names and defaults)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    broker_id: int = Field(0, alias="broker.id", ge=0)
    log_dirs: str | None = Field(None, alias="log.dirs")
    # Kafka's listener settings; ``client_listener()`` picks the one clients use.
    listeners: str | None = Field(None, alias="listeners")
    advertised_listeners: str | None = Field(None, alias="advertised.listeners")
    listener_security_protocol_map: str | None = Field(None, alias="listener.security.protocol.map")
    controller_listener_names: str | None = Field(None, alias="controller.listener.names")
    # The simulated KRaft quorum (broker/cluster/kraft_quorum.py): id@host:port voters; unset,
    # every broker is a voter (controller.quorum.bootstrap.servers is ignored).
    controller_quorum_voters: str = Field("", alias="controller.quorum.voters")
    inter_broker_listener_name: str | None = Field(None, alias="inter.broker.listener.name")
    # Kafka's ssl.*, sasl.* and listener.name.<l>.* keys, read by broker/security/listeners.py
    # (sorted (key, value) pairs: the config is hashable).
    security_configs: tuple[tuple[str, str], ...] = Field((), alias="security.configs")
    # The authorizer (broker/security/authorizer/): Kafka's StandardAuthorizer when named;
    # super.users is ``;``-separated principals.
    authorizer_class_name: str = Field("", alias="authorizer.class.name")
    super_users: str = Field("", alias="super.users")
    allow_everyone_if_no_acl_found: bool = Field(False, alias="allow.everyone.if.no.acl.found")
    # Delegation tokens (KIP-48, broker/security/delegation_token_manager.py): off until
    # delegation.token.secret.key is set, as in Kafka; the expiry check runs on the
    # scheduler's clock.
    delegation_token_secret_key: str | None = Field(None, alias="delegation.token.secret.key")
    delegation_token_max_lifetime_ms: int = Field(
        604800000, alias="delegation.token.max.lifetime.ms", ge=1
    )
    delegation_token_expiry_time_ms: int = Field(
        86400000, alias="delegation.token.expiry.time.ms", ge=1
    )
    delegation_token_expiry_check_interval_ms: int = Field(
        3600000, alias="delegation.token.expiry.check.interval.ms", ge=1
    )
    num_partitions: int = Field(1, alias="num.partitions", ge=1)
    # Kafka's request handler and network threads: one event loop in real time; modelled
    # in a simulation (simulation/request_handlers.py) so a what-if grid can vary them.
    num_io_threads: int = Field(8, alias="num.io.threads", ge=1)
    num_network_threads: int = Field(3, alias="num.network.threads", ge=1)
    default_replication_factor: int = Field(1, alias="default.replication.factor", ge=1)
    auto_create_topics_enable: bool = Field(True, alias="auto.create.topics.enable")
    delete_topic_enable: bool = Field(True, alias="delete.topic.enable")
    min_insync_replicas: int = Field(1, alias="min.insync.replicas", ge=1)
    socket_request_max_bytes: int = Field(104857600, alias="socket.request.max.bytes", ge=1024)
    message_max_bytes: int = Field(1048588, alias="message.max.bytes", ge=0)
    # A connection with no request or response in flight for this long is closed.
    connections_max_idle_ms: int = Field(600000, alias="connections.max.idle.ms", ge=1)
    # The listener's accept backlog (Kafka's default 50).
    socket_listen_backlog_size: int = Field(50, alias="socket.listen.backlog.size", ge=1)

    log_segment_bytes: int = Field(1073741824, alias="log.segment.bytes", ge=14)
    log_retention_hours: int = Field(168, alias="log.retention.hours")
    log_retention_minutes: int | None = Field(None, alias="log.retention.minutes")
    log_retention_ms: int | None = Field(None, alias="log.retention.ms")
    log_retention_bytes: int = Field(-1, alias="log.retention.bytes")
    log_retention_check_interval_ms: int = Field(
        300000, alias="log.retention.check.interval.ms", ge=1
    )
    log_message_timestamp_type: Literal["CreateTime", "LogAppendTime"] = Field(
        "CreateTime", alias="log.message.timestamp.type"
    )
    # KIP-937: with CreateTime, a produced record further before / after the broker's
    # clock than these is refused (INVALID_TIMESTAMP). Kafka 4's defaults: no bound
    # before, one hour after (Long.MAX_VALUE before Kafka 4.0, KIP-1030).
    log_message_timestamp_before_max_ms: int = Field(
        2**63 - 1, alias="log.message.timestamp.before.max.ms", ge=0, le=2**63 - 1
    )
    log_message_timestamp_after_max_ms: int = Field(
        3_600_000, alias="log.message.timestamp.after.max.ms", ge=0, le=2**63 - 1
    )
    # A LIST Kafka lets be empty (ValidList checks only the items): "" is no policy.
    log_cleanup_policy: Literal["delete", "compact", "compact,delete", "delete,compact", ""] = (
        Field("delete", alias="log.cleanup.policy")
    )
    log_flush_interval_messages: int = Field(
        9223372036854775807, alias="log.flush.interval.messages", ge=1
    )
    # flush.ms's broker default (None: log.flush.scheduler.interval.ms's value), and how
    # often the log flusher looks for logs whose last flush is older (never by default).
    log_flush_interval_ms: int | None = Field(None, alias="log.flush.interval.ms", ge=0)
    log_flush_scheduler_interval_ms: int = Field(
        9223372036854775807, alias="log.flush.scheduler.interval.ms", ge=1
    )
    # The log cleaner (compaction of cleanup.policy=compact topics).
    log_cleaner_enable: bool = Field(True, alias="log.cleaner.enable")
    log_cleaner_backoff_ms: int = Field(15000, alias="log.cleaner.backoff.ms", ge=1)
    log_cleaner_threads: int = Field(1, alias="log.cleaner.threads", ge=0)
    log_cleaner_dedupe_buffer_size: int = Field(
        134217728, alias="log.cleaner.dedupe.buffer.size", ge=1
    )
    log_cleaner_delete_retention_ms: int = Field(
        86400000, alias="log.cleaner.delete.retention.ms", ge=0
    )
    log_cleaner_min_cleanable_ratio: float = Field(
        0.5, alias="log.cleaner.min.cleanable.ratio", ge=0.0, le=1.0
    )
    log_cleaner_min_compaction_lag_ms: int = Field(
        0, alias="log.cleaner.min.compaction.lag.ms", ge=0
    )

    replica_lag_time_max_ms: int = Field(30000, alias="replica.lag.time.max.ms", ge=1)
    replica_fetch_wait_max_ms: int = Field(500, alias="replica.fetch.wait.max.ms", ge=0)
    replica_fetch_min_bytes: int = Field(1, alias="replica.fetch.min.bytes", ge=1)
    replica_fetch_max_bytes: int = Field(1048576, alias="replica.fetch.max.bytes", ge=0)
    # Incremental fetch sessions (KIP-227, broker/replica/fetch_session.py) kept at most.
    max_incremental_fetch_session_cache_slots: int = Field(
        1000, alias="max.incremental.fetch.session.cache.slots", ge=0
    )
    # Idle producers' state (sequences, epochs) is dropped after this long (Kafka's
    # ProducerStateManager expiry, checked every producer.id.expiration.check.interval.ms).
    producer_id_expiration_ms: int = Field(86400000, alias="producer.id.expiration.ms", ge=1)
    producer_id_expiration_check_interval_ms: int = Field(
        600000, alias="producer.id.expiration.check.interval.ms", ge=1
    )

    fetch_purgatory_purge_interval_requests: int = Field(
        1000, alias="fetch.purgatory.purge.interval.requests", ge=1
    )
    producer_purgatory_purge_interval_requests: int = Field(
        1000, alias="producer.purgatory.purge.interval.requests", ge=1
    )
    delete_records_purgatory_purge_interval_requests: int = Field(
        1, alias="delete.records.purgatory.purge.interval.requests", ge=1
    )

    group_initial_rebalance_delay_ms: int = Field(
        3000, alias="group.initial.rebalance.delay.ms", ge=0
    )
    group_min_session_timeout_ms: int = Field(6000, alias="group.min.session.timeout.ms", ge=0)
    group_max_session_timeout_ms: int = Field(1800000, alias="group.max.session.timeout.ms", ge=0)
    group_max_size: int = Field(2147483647, alias="group.max.size", ge=1)
    # Kafka 4's consumer group protocol (KIP-848, broker/group/consumer/): Kafka's names and
    # defaults (GroupCoordinatorConfig); ConsumerGroupConfig checks the bounds at start.
    group_consumer_session_timeout_ms: int = Field(
        45000, alias="group.consumer.session.timeout.ms", ge=1
    )
    group_consumer_min_session_timeout_ms: int = Field(
        45000, alias="group.consumer.min.session.timeout.ms", ge=1
    )
    group_consumer_max_session_timeout_ms: int = Field(
        60000, alias="group.consumer.max.session.timeout.ms", ge=1
    )
    group_consumer_heartbeat_interval_ms: int = Field(
        5000, alias="group.consumer.heartbeat.interval.ms", ge=1
    )
    group_consumer_min_heartbeat_interval_ms: int = Field(
        5000, alias="group.consumer.min.heartbeat.interval.ms", ge=1
    )
    group_consumer_max_heartbeat_interval_ms: int = Field(
        15000, alias="group.consumer.max.heartbeat.interval.ms", ge=1
    )
    group_consumer_max_size: int = Field(2147483647, alias="group.consumer.max.size", ge=1)
    group_consumer_assignors: str = Field("uniform,range", alias="group.consumer.assignors")
    group_coordinator_rebalance_protocols: str = Field(
        "classic,consumer,streams", alias="group.coordinator.rebalance.protocols"
    )
    group_consumer_migration_policy: str = Field(
        "bidirectional", alias="group.consumer.migration.policy"
    )
    # Streams groups (KIP-1071, broker/group/streams/): Kafka 4.2's names and defaults;
    # StreamsGroupConfig checks the bounds at start.
    group_streams_session_timeout_ms: int = Field(
        45000, alias="group.streams.session.timeout.ms", ge=1
    )
    group_streams_min_session_timeout_ms: int = Field(
        45000, alias="group.streams.min.session.timeout.ms", ge=1
    )
    group_streams_max_session_timeout_ms: int = Field(
        60000, alias="group.streams.max.session.timeout.ms", ge=1
    )
    group_streams_heartbeat_interval_ms: int = Field(
        5000, alias="group.streams.heartbeat.interval.ms", ge=1
    )
    group_streams_min_heartbeat_interval_ms: int = Field(
        5000, alias="group.streams.min.heartbeat.interval.ms", ge=1
    )
    group_streams_max_heartbeat_interval_ms: int = Field(
        15000, alias="group.streams.max.heartbeat.interval.ms", ge=1
    )
    group_streams_max_size: int = Field(2147483647, alias="group.streams.max.size", ge=1)
    group_streams_num_standby_replicas: int = Field(
        0, alias="group.streams.num.standby.replicas", ge=0
    )
    group_streams_max_standby_replicas: int = Field(
        2, alias="group.streams.max.standby.replicas", ge=0
    )
    # The share coordinator (broker/share_coordinator/): __share_group_state, Kafka's
    # names and defaults.
    share_coordinator_state_topic_num_partitions: int = Field(
        50, alias="share.coordinator.state.topic.num.partitions", ge=1
    )
    share_coordinator_state_topic_replication_factor: int = Field(
        3, alias="share.coordinator.state.topic.replication.factor", ge=1
    )
    share_coordinator_state_topic_min_isr: int = Field(
        2, alias="share.coordinator.state.topic.min.isr", ge=1
    )
    share_coordinator_state_topic_segment_bytes: int = Field(
        104857600, alias="share.coordinator.state.topic.segment.bytes", ge=14
    )
    share_coordinator_snapshot_update_records_per_snapshot: int = Field(
        500, alias="share.coordinator.snapshot.update.records.per.snapshot", ge=0, le=500
    )
    share_coordinator_write_timeout_ms: int = Field(
        5000, alias="share.coordinator.write.timeout.ms", ge=1
    )
    share_coordinator_load_buffer_size: int = Field(
        5242880, alias="share.coordinator.load.buffer.size", ge=1
    )
    # Share groups (KIP-932, broker/group/share/, broker/share/): Kafka's names and
    # defaults; ShareGroupConfig checks Kafka's bounds at start.
    group_share_enable: bool = Field(True, alias="group.share.enable")
    group_share_session_timeout_ms: int = Field(45000, alias="group.share.session.timeout.ms")
    group_share_min_session_timeout_ms: int = Field(
        45000, alias="group.share.min.session.timeout.ms"
    )
    group_share_max_session_timeout_ms: int = Field(
        60000, alias="group.share.max.session.timeout.ms"
    )
    group_share_heartbeat_interval_ms: int = Field(5000, alias="group.share.heartbeat.interval.ms")
    group_share_min_heartbeat_interval_ms: int = Field(
        5000, alias="group.share.min.heartbeat.interval.ms"
    )
    group_share_max_heartbeat_interval_ms: int = Field(
        15000, alias="group.share.max.heartbeat.interval.ms"
    )
    group_share_max_size: int = Field(200, alias="group.share.max.size")
    group_share_record_lock_duration_ms: int = Field(
        30000, alias="group.share.record.lock.duration.ms"
    )
    group_share_min_record_lock_duration_ms: int = Field(
        15000, alias="group.share.min.record.lock.duration.ms"
    )
    group_share_max_record_lock_duration_ms: int = Field(
        60000, alias="group.share.max.record.lock.duration.ms"
    )
    group_share_delivery_count_limit: int = Field(5, alias="group.share.delivery.count.limit")
    # Kafka 4.4, KIP-1191: the share groups' dead-letter queue (broker/share/dlq/)
    errors_deadletterqueue_auto_create_topics_enable: bool = Field(
        False, alias="errors.deadletterqueue.auto.create.topics.enable"
    )
    errors_deadletterqueue_topic_name_prefix: str = Field(
        "dlq.", alias="errors.deadletterqueue.topic.name.prefix"
    )
    # KIP-1240: the bounds of the per-group share.delivery.count.limit and
    # share.partition.max.record.locks GROUP configs
    group_share_min_delivery_count_limit: int = Field(
        2, alias="group.share.min.delivery.count.limit"
    )
    group_share_max_delivery_count_limit: int = Field(
        10, alias="group.share.max.delivery.count.limit"
    )
    group_share_partition_max_record_locks: int = Field(
        2000, alias="group.share.partition.max.record.locks"
    )
    group_share_min_partition_max_record_locks: int = Field(
        100, alias="group.share.min.partition.max.record.locks"
    )
    group_share_max_partition_max_record_locks: int = Field(
        10000, alias="group.share.max.partition.max.record.locks"
    )
    group_share_max_share_sessions: int = Field(2000, alias="group.share.max.share.sessions")
    share_fetch_purgatory_purge_interval_requests: int = Field(
        1000, alias="share.fetch.purgatory.purge.interval.requests", ge=1
    )
    offsets_topic_num_partitions: int = Field(50, alias="offsets.topic.num.partitions", ge=1)
    offsets_topic_replication_factor: int = Field(3, alias="offsets.topic.replication.factor", ge=1)
    offsets_retention_minutes: int = Field(10080, alias="offsets.retention.minutes", ge=1)
    offsets_retention_check_interval_ms: int = Field(
        600000, alias="offsets.retention.check.interval.ms", ge=1
    )
    # Offset commits and group metadata wait for the offsets topic's ISR (acks=all) up to
    # this long, as Kafka's coordinator does; the timeout answers COORDINATOR_NOT_AVAILABLE.
    offsets_commit_timeout_ms: int = Field(5000, alias="offsets.commit.timeout.ms", ge=1)
    offsets_commit_required_acks: int = Field(-1, alias="offsets.commit.required.acks", ge=-1, le=1)
    # __consumer_offsets is created with this segment.bytes, so that the cleaner can
    # compact all but its last segment (the active segment is never cleaned).
    offsets_topic_segment_bytes: int = Field(104857600, alias="offsets.topic.segment.bytes", ge=14)
    # A coordinator's load reads its __consumer_offsets partition this many bytes at a time.
    offsets_load_buffer_size: int = Field(5242880, alias="offsets.load.buffer.size", ge=1)

    transactional_id_expiration_ms: int = Field(
        604800000, alias="transactional.id.expiration.ms", ge=1
    )
    # Client quotas (broker/quota/): Kafka's sampled-rate windows.
    quota_window_num: int = Field(11, alias="quota.window.num", ge=1)
    quota_window_size_seconds: int = Field(1, alias="quota.window.size.seconds", ge=1)
    # Replication quotas (broker/quota/replication_quota_manager.py): their windows.
    replication_quota_window_num: int = Field(11, alias="replication.quota.window.num", ge=1)
    replication_quota_window_size_seconds: int = Field(
        1, alias="replication.quota.window.size.seconds", ge=1
    )
    # The transaction coordinator (broker/txn/), Kafka's names and defaults.
    transaction_max_timeout_ms: int = Field(900000, alias="transaction.max.timeout.ms", ge=1)
    transaction_state_log_num_partitions: int = Field(
        50, alias="transaction.state.log.num.partitions", ge=1
    )
    transaction_state_log_replication_factor: int = Field(
        3, alias="transaction.state.log.replication.factor", ge=1
    )
    transaction_state_log_min_isr: int = Field(2, alias="transaction.state.log.min.isr", ge=1)
    transaction_state_log_segment_bytes: int = Field(
        104857600, alias="transaction.state.log.segment.bytes", ge=14
    )
    # A load reads its __transaction_state partition this many bytes at a time.
    transaction_state_log_load_buffer_size: int = Field(
        5242880, alias="transaction.state.log.load.buffer.size", ge=1
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = Field(
        10000, alias="transaction.abort.timed.out.transaction.cleanup.interval.ms", ge=1
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = Field(
        3600000, alias="transaction.remove.expired.transaction.cleanup.interval.ms", ge=1
    )
    # Tiered storage (KIP-405, broker/remote/): Kafka's names and defaults. The rsm.config.*
    # keys (Kafka's remote.log.storage.manager.impl.prefix) are the embedded store's model
    # (broker/remote/storage_model.py): latency p50/p99 and throughput, every operation alike.
    remote_log_storage_system_enable: bool = Field(False, alias="remote.log.storage.system.enable")
    remote_log_manager_task_interval_ms: int = Field(
        30000, alias="remote.log.manager.task.interval.ms", ge=1
    )
    remote_log_manager_copy_max_bytes_per_second: int = Field(
        2**63 - 1, alias="remote.log.manager.copy.max.bytes.per.second", ge=1
    )
    remote_log_manager_fetch_max_bytes_per_second: int = Field(
        2**63 - 1, alias="remote.log.manager.fetch.max.bytes.per.second", ge=1
    )
    remote_fetch_max_wait_ms: int = Field(500, alias="remote.fetch.max.wait.ms", ge=1)
    remote_list_offsets_request_timeout_ms: int = Field(
        30000, alias="remote.list.offsets.request.timeout.ms", ge=1
    )
    remote_log_reader_threads: int = Field(10, alias="remote.log.reader.threads", ge=1)
    remote_log_reader_max_pending_tasks: int = Field(
        100, alias="remote.log.reader.max.pending.tasks", ge=1
    )
    remote_log_index_file_cache_total_size_bytes: int = Field(
        1073741824, alias="remote.log.index.file.cache.total.size.bytes", ge=1
    )
    # The topic-based metadata manager's configs, under Kafka's rlmm.config. prefix.
    rlmm_topic_num_partitions: int = Field(
        50, alias="rlmm.config.remote.log.metadata.topic.num.partitions", ge=1
    )
    rlmm_topic_replication_factor: int = Field(
        3, alias="rlmm.config.remote.log.metadata.topic.replication.factor", ge=1
    )
    rlmm_topic_retention_ms: int = Field(
        -1, alias="rlmm.config.remote.log.metadata.topic.retention.ms", ge=-1
    )
    rlmm_topic_min_isr: int = Field(2, alias="rlmm.config.remote.log.metadata.topic.min.isr", ge=1)
    rsm_latency_p50_ms: float = Field(0.0, alias="rsm.config.latency.p50.ms", ge=0)
    rsm_latency_p99_ms: float = Field(0.0, alias="rsm.config.latency.p99.ms", ge=0)
    rsm_bytes_per_second: int = Field(0, alias="rsm.config.bytes.per.second", ge=0)
    # Client telemetry (KIP-714, broker/observability/client_telemetry/): on when
    # metric.reporters names CLIENT_TELEMETRY_RECEIVER, as Kafka's is a metrics reporter.
    metric_reporters: str = Field(
        "org.apache.kafka.common.metrics.JmxReporter", alias="metric.reporters"
    )
    telemetry_max_bytes: int = Field(1048576, alias="telemetry.max.bytes", ge=1)

    @model_validator(mode="after")
    def _check_session_bounds(self) -> BrokerConfig:
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError(
                "group.min.session.timeout.ms must not exceed group.max.session.timeout.ms"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _gather_security_configs(cls, data: object) -> object:
        if isinstance(data, dict) and any(is_security_key(k) for k in data):
            gathered = dict(data.get("security.configs") or ())
            rest = {}
            for key, value in data.items():
                if is_security_key(key):
                    gathered[key] = value
                else:
                    rest[key] = value
            rest["security.configs"] = tuple(sorted(gathered.items()))
            return rest
        return data

    @field_validator("authorizer_class_name")
    @classmethod
    def _check_authorizer(cls, value: str) -> str:
        value = value.strip()
        if value not in ("", STANDARD_AUTHORIZER):
            raise ValueError(
                f"authorizer.class.name={value!r}: minikafka has only {STANDARD_AUTHORIZER}"
            )
        return value

    @model_validator(mode="after")
    def _check_quorum(self) -> BrokerConfig:
        parse_quorum_voters(self.controller_quorum_voters)
        return self

    @model_validator(mode="after")
    def _check_listeners(self) -> BrokerConfig:
        self.client_listener()  # a listener minikafka cannot serve fails at start
        return self

    def client_listener(self) -> ListenerEndpoint | None:
        """The listener clients connect to, from ``listeners`` (None when not set).

        Kafka's rules: ``NAME://host:port`` entries; the security protocol of a name is
        ``listener.security.protocol.map``'s (default: the name itself); listeners named
        in ``controller.listener.names`` are the KRaft controller's, not the broker's.
        Of the others, ``inter.broker.listener.name``'s is taken when it is PLAINTEXT,
        else the first PLAINTEXT one: inter-broker traffic stays on PLAINTEXT; the TLS and
        SASL listeners open beside it (``broker/security/listeners.py``).
        """
        if not self.listeners:
            return None
        entries = parse_listeners(self.listeners, "listeners")
        protocols = security_protocol_map(self.listener_security_protocol_map)
        controllers = {n.strip().upper() for n in (self.controller_listener_names or "").split(",")}
        candidates = [e for e in entries if e.name not in controllers]
        if not candidates:
            raise ValueError(
                f"listeners={self.listeners!r} has no broker listener (every one is in "
                f"controller.listener.names)"
            )
        plaintext = [e for e in candidates if protocols.get(e.name, e.name) == "PLAINTEXT"]
        if not plaintext:
            raise ValueError(
                f"listeners={self.listeners!r}: minikafka keeps inter-broker traffic on "
                f"PLAINTEXT, and no broker listener is PLAINTEXT "
                f"({', '.join(e.name for e in candidates)})"
            )
        preferred = (self.inter_broker_listener_name or "").strip().upper()
        chosen = next((e for e in plaintext if e.name == preferred), plaintext[0])
        advertised = None
        if self.advertised_listeners:
            for entry in parse_listeners(self.advertised_listeners, "advertised.listeners"):
                if entry.name == chosen.name:
                    advertised = entry.host or None
        return ListenerEndpoint(chosen.name, chosen.host, chosen.port, advertised)

    @property
    def client_telemetry_enabled(self) -> bool:
        """Whether ``metric.reporters`` names minikafka's client-telemetry receiver."""
        reporters = (r.strip() for r in self.metric_reporters.split(","))
        return CLIENT_TELEMETRY_RECEIVER in reporters

    @property
    def log_retention_effective_ms(self) -> int:
        """Kafka's precedence: log.retention.ms, then .minutes, then .hours."""
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        if self.log_retention_minutes is not None:
            return self.log_retention_minutes * 60_000
        return self.log_retention_hours * 3_600_000

    def default_topic_configs(self) -> dict[str, str]:
        """Topic-level configs a new topic inherits from the broker (Kafka's mapping)."""
        return {
            "cleanup.policy": self.log_cleanup_policy,
            "delete.retention.ms": str(self.log_cleaner_delete_retention_ms),
            "min.cleanable.dirty.ratio": str(self.log_cleaner_min_cleanable_ratio),
            "min.compaction.lag.ms": str(self.log_cleaner_min_compaction_lag_ms),
            "max.message.bytes": str(self.message_max_bytes),
            "message.timestamp.type": self.log_message_timestamp_type,
            "message.timestamp.before.max.ms": str(self.log_message_timestamp_before_max_ms),
            "message.timestamp.after.max.ms": str(self.log_message_timestamp_after_max_ms),
            "min.insync.replicas": str(self.min_insync_replicas),
            "retention.bytes": str(self.log_retention_bytes),
            "retention.ms": str(self.log_retention_effective_ms),
            "segment.bytes": str(self.log_segment_bytes),
        }


@dataclass(frozen=True, slots=True)
class ListenerEndpoint:
    """One entry of ``listeners`` (``name://host:port``); ``host`` "" binds every
    interface, as in Kafka. ``advertised_host``: that listener's host in
    ``advertised.listeners``, if any."""

    name: str
    host: str
    port: int
    advertised_host: str | None = None


_LISTENER = re.compile(r"^([A-Za-z0-9_-]+)://\[?([0-9A-Za-z\-%._:]*?)\]?:(-?[0-9]+)$")
_DEFAULT_PROTOCOLS = {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}


def parse_listeners(text: str, key: str = "listeners") -> list[ListenerEndpoint]:
    """Kafka's ``listeners`` syntax: comma-separated ``NAME://host:port``."""
    entries: list[ListenerEndpoint] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        match = _LISTENER.match(item)
        if match is None:
            raise ValueError(f"{key}: {item!r} is not NAME://host:port")
        port = int(match.group(3))
        if not 0 <= port <= 65535:
            raise ValueError(f"{key}: port {port} of {item!r} is not in 0..65535")
        entries.append(ListenerEndpoint(match.group(1).upper(), match.group(2), port))
    if not entries:
        raise ValueError(f"{key} is empty")
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"{key}: each listener name must be used once, got {text!r}")
    return entries


_SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.name.")


def is_security_key(key: str) -> bool:
    """Kafka's TLS/SASL keys, per listener or not (modelled by broker/security/)."""
    return key.startswith(_SECURITY_PREFIXES) or key == "connections.max.reauth.ms"


def security_protocol_map(text: str | None) -> dict[str, str]:
    """``listener.security.protocol.map``, Kafka's default when not set."""
    if not text:
        return dict(_DEFAULT_PROTOCOLS)
    result: dict[str, str] = {}
    for raw in text.split(","):
        if not raw.strip():
            continue
        name, sep, protocol = raw.partition(":")
        if not sep or not name.strip() or not protocol.strip():
            raise ValueError(
                f"listener.security.protocol.map: {raw.strip()!r} is not NAME:PROTOCOL"
            )
        result[name.strip().upper()] = protocol.strip().upper()
    return result


def model_keys() -> frozenset[str]:
    """Every config key minikafka models (Kafka's names)."""
    return frozenset(f.alias or name for name, f in BrokerConfig.model_fields.items())


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """A validated config and the keys of the properties file that were ignored."""

    config: BrokerConfig
    ignored: tuple[str, ...] = ()


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """Parse ``--override key=value`` arguments."""
    result: dict[str, str] = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--override expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        result[key.strip()] = value.strip()
    return result


def read_config(
    properties_file: Path | None = None, overrides: Mapping[str, str] | None = None
) -> LoadedConfig:
    """Build a validated config from a properties file and overrides (which win).

    Keys of the file that minikafka does not model are left out and returned in
    ``ignored`` (sorted); an unknown override key is a ``ConfigError``. Values are
    trimmed, as Kafka's ``ConfigDef`` trims them. Errors name the key and the value.
    """
    known = model_keys()
    values: dict[str, str] = {}
    ignored: list[str] = []
    if properties_file is not None:
        try:
            raw = properties_file.read_bytes()
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise ConfigError(f"cannot read config file {properties_file}: {reason}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")  # what Java's Properties.load(InputStream) reads
        for key, value in parse_properties(text, str(properties_file)).items():
            if key in known or is_security_key(key):
                values[key] = value.strip()
            else:
                ignored.append(key)
    unknown: list[str] = []
    for key, value in (overrides or {}).items():
        if key in known or is_security_key(key):
            values[key] = value.strip()
        else:
            unknown.append(key)
    if unknown:
        raise ConfigError("; ".join(_unknown_override(key, known) for key in unknown))
    try:
        config = BrokerConfig.model_validate(values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            if not key:
                problems.append(message)
            elif error["type"] == "extra_forbidden":
                problems.append(_unknown_override(key, known))
            else:
                shown = values.get(key, error.get("input"))
                problems.append(f"invalid value {shown!r} for {key!r}: {message}")
        raise ConfigError("; ".join(problems)) from None
    return LoadedConfig(config, tuple(sorted(ignored)))


def _unknown_override(key: str, known: frozenset[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"unknown config key {key!r}{hint}: --override takes the keys minikafka models "
        "(see broker/config/broker_config.py); a --config file's other Kafka keys are ignored"
    )


def load_config(
    properties_file: Path | None = None, overrides: Mapping[str, str] | None = None
) -> BrokerConfig:
    """``read_config(...).config``: the validated config alone."""
    return read_config(properties_file, overrides).config


#: Configs a capture's header leaves out (``replayable_configs``): per broker (ids,
#: listeners, directories) or secret or about who may connect (security, the authorizer).
_NOT_REPLAYABLE: Final = frozenset(
    {
        "broker.id",
        "node.id",
        "process.roles",
        "log.dirs",
        "log.dir",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "controller.listener.names",
        "controller.quorum.voters",
        "inter.broker.listener.name",
        "security.configs",
        "authorizer.class.name",
        "super.users",
        "delegation.token.secret.key",
        "allow.everyone.if.no.acl.found",
    }
)


def _as_property(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def replayable_configs(config: BrokerConfig) -> dict[str, str]:
    """The configs of ``config`` that are not Kafka's defaults, by Kafka's names, as
    property strings, without what is per broker, secret or about access: what a
    capture records so that a replay's target runs as the cluster that served it."""
    values = config.model_dump(by_alias=True, exclude_defaults=True)
    return {
        key: _as_property(value)
        for key, value in sorted(values.items())
        if key not in _NOT_REPLAYABLE
        and value is not None
        and not key.startswith(("ssl.", "sasl."))
    }
