"""Kafka's broker configs as data: every name, type, default and update mode.

DescribeConfigs for a BROKER resource lists every config a Kafka broker knows, and
AlterConfigs / IncrementalAlterConfigs accept only the ones Kafka can change at run time
("dynamic": per-broker or cluster-wide). This table is Kafka 4.0's broker config
reference (``kafka_config.html``: name, type, default, update mode), so a client sees
the names, types and read-only flags a Kafka 4.0 broker reports. Configs minikafka
models (``BrokerConfig``) take their value from the broker's config; the others keep
Kafka's default. Kafka's internal configs (not in its reference) are left out.

It also holds Kafka's two synonym tables: the broker configs that set one value under
several names (``DynamicBrokerConfig.brokerConfigSynonyms``: ``log.retention.ms`` /
``.minutes`` / ``.hours``, ...) and the broker config each topic config inherits
(``ServerTopicConfigSynonyms``, with the unit conversions). Kafka's ConfigType and
ConfigSource codes (DescribeConfigs v1+/v3+) live here too, since both the broker's
dynamic config and the admin handlers speak them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigs ConfigSource (v1+)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    CLIENT_METRICS_CONFIG = 7  # KIP-714: a CLIENT_METRICS resource's config
    GROUP_CONFIG = 8  # KIP-848: a GROUP resource's override


class ConfigType(IntEnum):
    """Kafka's DescribeConfigs ConfigType (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class UpdateMode(Enum):
    """Kafka's "Update Mode" of a broker config (KIP-226)."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


@dataclass(frozen=True, slots=True)
class BrokerConfigDef:
    name: str
    type: ConfigType
    # Kafka's default as Kafka prints it; None where Kafka's default is null (or the
    # config is required, as node.id): such a config has no DEFAULT_CONFIG synonym.
    default: str | None
    mode: UpdateMode

    @property
    def dynamic(self) -> bool:
        return self.mode is not UpdateMode.READ_ONLY

    @property
    def sensitive(self) -> bool:
        """Kafka's ``maybeSensitive``: a PASSWORD's value is never shown."""
        return self.type is ConfigType.PASSWORD


_T = ConfigType
R = UpdateMode.READ_ONLY
B = UpdateMode.PER_BROKER
C = UpdateMode.CLUSTER_WIDE
_d = BrokerConfigDef

# Kafka 4.0's broker configs, by name.
KAFKA_BROKER_CONFIGS: dict[str, BrokerConfigDef] = {
    d.name: d
    for d in (
        _d("add.partitions.to.txn.retry.backoff.max.ms", _T.INT, "100", R),
        _d("add.partitions.to.txn.retry.backoff.ms", _T.INT, "20", R),
        _d("advertised.listeners", _T.STRING, None, R),
        _d("alter.config.policy.class.name", _T.CLASS, None, R),
        _d("alter.log.dirs.replication.quota.window.num", _T.INT, "11", R),
        _d("alter.log.dirs.replication.quota.window.size.seconds", _T.INT, "1", R),
        _d("authorizer.class.name", _T.STRING, "", R),
        _d("auto.create.topics.enable", _T.BOOLEAN, "true", R),
        _d("auto.leader.rebalance.enable", _T.BOOLEAN, "true", R),
        _d("background.threads", _T.INT, "10", C),
        _d("broker.heartbeat.interval.ms", _T.INT, "2000", R),
        _d("broker.id", _T.INT, "-1", R),
        _d("broker.rack", _T.STRING, None, R),
        _d("broker.session.timeout.ms", _T.INT, "9000", R),
        _d("client.quota.callback.class", _T.CLASS, None, R),
        _d("compression.gzip.level", _T.INT, "-1", C),
        _d("compression.lz4.level", _T.INT, "9", C),
        _d("compression.type", _T.STRING, "producer", C),
        _d("compression.zstd.level", _T.INT, "3", C),
        _d("connection.failed.authentication.delay.ms", _T.INT, "100", R),
        _d("connections.max.idle.ms", _T.LONG, "600000", R),
        _d("connections.max.reauth.ms", _T.LONG, "0", R),
        _d("controlled.shutdown.enable", _T.BOOLEAN, "true", R),
        _d("controller.listener.names", _T.STRING, None, R),
        _d("controller.quorum.append.linger.ms", _T.INT, "25", R),
        _d("controller.quorum.bootstrap.servers", _T.LIST, "", R),
        _d("controller.quorum.election.backoff.max.ms", _T.INT, "1000", R),
        _d("controller.quorum.election.timeout.ms", _T.INT, "1000", R),
        _d("controller.quorum.fetch.timeout.ms", _T.INT, "2000", R),
        _d("controller.quorum.request.timeout.ms", _T.INT, "2000", R),
        _d("controller.quorum.retry.backoff.ms", _T.INT, "20", R),
        _d("controller.quorum.voters", _T.LIST, "", R),
        _d("controller.quota.window.num", _T.INT, "11", R),
        _d("controller.quota.window.size.seconds", _T.INT, "1", R),
        _d("controller.socket.timeout.ms", _T.INT, "30000", R),
        _d("create.topic.policy.class.name", _T.CLASS, None, R),
        _d("default.replication.factor", _T.INT, "1", R),
        _d("delegation.token.expiry.check.interval.ms", _T.LONG, "3600000", R),
        _d("delegation.token.expiry.time.ms", _T.LONG, "86400000", R),
        _d("delegation.token.max.lifetime.ms", _T.LONG, "604800000", R),
        _d("delegation.token.secret.key", _T.PASSWORD, None, R),
        _d("delete.records.purgatory.purge.interval.requests", _T.INT, "1", R),
        _d("delete.topic.enable", _T.BOOLEAN, "true", R),
        _d("early.start.listeners", _T.STRING, None, R),
        # Kafka 4.4, KIP-1191: the share groups' dead-letter queue (broker/share/dlq/)
        _d("errors.deadletterqueue.auto.create.topics.enable", _T.BOOLEAN, "false", C),
        _d("errors.deadletterqueue.topic.name.prefix", _T.STRING, "dlq.", C),
        _d("fetch.max.bytes", _T.INT, "57671680", R),
        _d("fetch.purgatory.purge.interval.requests", _T.INT, "1000", R),
        _d("group.consumer.assignors", _T.LIST, "uniform,range", R),
        _d("group.consumer.heartbeat.interval.ms", _T.INT, "5000", R),
        _d("group.consumer.max.heartbeat.interval.ms", _T.INT, "15000", R),
        _d("group.consumer.max.session.timeout.ms", _T.INT, "60000", R),
        _d("group.consumer.max.size", _T.INT, "2147483647", R),
        _d("group.consumer.migration.policy", _T.STRING, "bidirectional", R),
        _d("group.consumer.min.heartbeat.interval.ms", _T.INT, "5000", R),
        _d("group.consumer.min.session.timeout.ms", _T.INT, "45000", R),
        _d("group.consumer.session.timeout.ms", _T.INT, "45000", R),
        _d("group.coordinator.append.linger.ms", _T.INT, "5", R),
        _d("group.coordinator.rebalance.protocols", _T.LIST, "classic,consumer,streams", R),
        _d("group.coordinator.threads", _T.INT, "4", R),
        _d("group.initial.rebalance.delay.ms", _T.INT, "3000", R),
        _d("group.max.session.timeout.ms", _T.INT, "1800000", R),
        _d("group.max.size", _T.INT, "2147483647", R),
        _d("group.min.session.timeout.ms", _T.INT, "6000", R),
        _d("group.share.delivery.count.limit", _T.INT, "5", R),
        _d("group.share.heartbeat.interval.ms", _T.INT, "5000", R),
        _d("group.share.max.delivery.count.limit", _T.INT, "10", R),
        _d("group.share.max.groups", _T.SHORT, "10", R),
        _d("group.share.max.heartbeat.interval.ms", _T.INT, "15000", R),
        _d("group.share.max.partition.max.record.locks", _T.INT, "10000", R),
        _d("group.share.max.record.lock.duration.ms", _T.INT, "60000", R),
        _d("group.share.max.session.timeout.ms", _T.INT, "60000", R),
        _d("group.share.max.size", _T.INT, "200", R),
        _d("group.share.min.delivery.count.limit", _T.INT, "2", R),
        _d("group.share.min.heartbeat.interval.ms", _T.INT, "5000", R),
        _d("group.share.min.partition.max.record.locks", _T.INT, "100", R),
        _d("group.share.min.record.lock.duration.ms", _T.INT, "15000", R),
        _d("group.share.min.session.timeout.ms", _T.INT, "45000", R),
        _d("group.share.partition.max.record.locks", _T.INT, "200", R),
        _d("group.share.record.lock.duration.ms", _T.INT, "30000", R),
        _d("group.share.session.timeout.ms", _T.INT, "45000", R),
        _d("group.streams.heartbeat.interval.ms", _T.INT, "5000", R),
        _d("group.streams.max.heartbeat.interval.ms", _T.INT, "15000", R),
        _d("group.streams.max.session.timeout.ms", _T.INT, "60000", R),
        _d("group.streams.max.size", _T.INT, "2147483647", R),
        _d("group.streams.max.standby.replicas", _T.INT, "2", R),
        _d("group.streams.min.heartbeat.interval.ms", _T.INT, "5000", R),
        _d("group.streams.min.session.timeout.ms", _T.INT, "45000", R),
        _d("group.streams.num.standby.replicas", _T.INT, "0", R),
        _d("group.streams.session.timeout.ms", _T.INT, "45000", R),
        _d("initial.broker.registration.timeout.ms", _T.INT, "60000", R),
        _d("inter.broker.listener.name", _T.STRING, None, R),
        _d("kafka.metrics.polling.interval.secs", _T.INT, "10", R),
        _d("kafka.metrics.reporters", _T.LIST, "", R),
        _d("leader.imbalance.check.interval.seconds", _T.LONG, "300", R),
        # Kafka's DynamicConfig.Broker quota configs (QuotaConfig.brokerQuotaConfigs).
        _d("leader.replication.throttled.rate", _T.LONG, "9223372036854775807", C),
        _d("follower.replication.throttled.rate", _T.LONG, "9223372036854775807", C),
        _d(
            "listener.security.protocol.map",
            _T.STRING,
            "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
            B,
        ),
        _d("listeners", _T.STRING, "PLAINTEXT://:9092", B),
        _d("log.cleaner.backoff.ms", _T.LONG, "15000", C),
        _d("log.cleaner.dedupe.buffer.size", _T.LONG, "134217728", C),
        _d("log.cleaner.delete.retention.ms", _T.LONG, "86400000", C),
        _d("log.cleaner.enable", _T.BOOLEAN, "true", R),
        _d("log.cleaner.io.buffer.load.factor", _T.DOUBLE, "0.9", C),
        _d("log.cleaner.io.buffer.size", _T.INT, "524288", C),
        _d("log.cleaner.io.max.bytes.per.second", _T.DOUBLE, "1.7976931348623157E308", C),
        _d("log.cleaner.max.compaction.lag.ms", _T.LONG, "9223372036854775807", C),
        _d("log.cleaner.min.cleanable.ratio", _T.DOUBLE, "0.5", C),
        _d("log.cleaner.min.compaction.lag.ms", _T.LONG, "0", C),
        _d("log.cleaner.threads", _T.INT, "1", C),
        _d("log.cleanup.policy", _T.LIST, "delete", C),
        _d("log.dir", _T.STRING, "/tmp/kafka-logs", R),
        _d("log.dir.failure.timeout.ms", _T.LONG, "30000", R),
        _d("log.dirs", _T.STRING, None, R),
        _d("log.flush.interval.messages", _T.LONG, "9223372036854775807", C),
        _d("log.flush.interval.ms", _T.LONG, None, C),
        _d("log.flush.offset.checkpoint.interval.ms", _T.INT, "60000", R),
        _d("log.flush.scheduler.interval.ms", _T.LONG, "9223372036854775807", R),
        _d("log.flush.start.offset.checkpoint.interval.ms", _T.INT, "60000", R),
        _d("log.index.interval.bytes", _T.INT, "4096", C),
        _d("log.index.size.max.bytes", _T.INT, "10485760", C),
        _d("log.local.retention.bytes", _T.LONG, "-2", C),
        _d("log.local.retention.ms", _T.LONG, "-2", C),
        _d("log.message.timestamp.after.max.ms", _T.LONG, "3600000", C),
        _d("log.message.timestamp.before.max.ms", _T.LONG, "9223372036854775807", C),
        _d("log.message.timestamp.type", _T.STRING, "CreateTime", C),
        _d("log.preallocate", _T.BOOLEAN, "false", C),
        _d("log.retention.bytes", _T.LONG, "-1", C),
        _d("log.retention.check.interval.ms", _T.LONG, "300000", R),
        _d("log.retention.hours", _T.INT, "168", R),
        _d("log.retention.minutes", _T.INT, None, R),
        _d("log.retention.ms", _T.LONG, None, C),
        _d("log.roll.hours", _T.INT, "168", R),
        _d("log.roll.jitter.hours", _T.INT, "0", R),
        _d("log.roll.jitter.ms", _T.LONG, None, C),
        _d("log.roll.ms", _T.LONG, None, C),
        _d("log.segment.bytes", _T.INT, "1073741824", C),
        _d("log.segment.delete.delay.ms", _T.LONG, "60000", C),
        _d("max.connection.creation.rate", _T.INT, "2147483647", C),
        _d("max.connections", _T.INT, "2147483647", C),
        _d("max.connections.per.ip", _T.INT, "2147483647", C),
        _d("max.connections.per.ip.overrides", _T.STRING, "", C),
        _d("max.incremental.fetch.session.cache.slots", _T.INT, "1000", R),
        _d("max.request.partition.size.limit", _T.INT, "2000", R),
        _d("message.max.bytes", _T.INT, "1048588", C),
        _d("metadata.log.dir", _T.STRING, None, R),
        _d("metadata.log.max.record.bytes.between.snapshots", _T.LONG, "20971520", R),
        _d("metadata.log.max.snapshot.interval.ms", _T.LONG, "3600000", R),
        _d("metadata.log.segment.bytes", _T.INT, "1073741824", R),
        _d("metadata.log.segment.ms", _T.LONG, "604800000", R),
        _d("metadata.max.idle.interval.ms", _T.INT, "500", R),
        _d("metadata.max.retention.bytes", _T.LONG, "104857600", R),
        _d("metadata.max.retention.ms", _T.LONG, "604800000", R),
        _d("metric.reporters", _T.LIST, "org.apache.kafka.common.metrics.JmxReporter", C),
        _d("metrics.num.samples", _T.INT, "2", R),
        _d("metrics.recording.level", _T.STRING, "INFO", R),
        _d("metrics.sample.window.ms", _T.LONG, "30000", R),
        _d("min.insync.replicas", _T.INT, "1", C),
        _d("node.id", _T.INT, None, R),
        _d("num.io.threads", _T.INT, "8", C),
        _d("num.network.threads", _T.INT, "3", C),
        _d("num.partitions", _T.INT, "1", R),
        _d("num.recovery.threads.per.data.dir", _T.INT, "2", C),
        _d("num.replica.alter.log.dirs.threads", _T.INT, None, R),
        _d("num.replica.fetchers", _T.INT, "1", C),
        _d("offset.metadata.max.bytes", _T.INT, "4096", R),
        _d("offsets.commit.timeout.ms", _T.INT, "5000", R),
        _d("offsets.load.buffer.size", _T.INT, "5242880", R),
        _d("offsets.retention.check.interval.ms", _T.LONG, "600000", R),
        _d("offsets.retention.minutes", _T.INT, "10080", R),
        _d("offsets.topic.compression.codec", _T.INT, "0", R),
        _d("offsets.topic.num.partitions", _T.INT, "50", R),
        _d("offsets.topic.replication.factor", _T.SHORT, "3", R),
        _d("offsets.topic.segment.bytes", _T.INT, "104857600", R),
        _d(
            "principal.builder.class",
            _T.CLASS,
            "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
            B,
        ),
        _d("process.roles", _T.LIST, None, R),
        _d("producer.id.expiration.ms", _T.INT, "86400000", C),
        _d("producer.purgatory.purge.interval.requests", _T.INT, "1000", R),
        _d("queued.max.request.bytes", _T.LONG, "-1", R),
        _d("queued.max.requests", _T.INT, "500", R),
        _d("quota.window.num", _T.INT, "11", R),
        _d("quota.window.size.seconds", _T.INT, "1", R),
        _d("remote.fetch.max.wait.ms", _T.INT, "500", C),
        _d("remote.list.offsets.request.timeout.ms", _T.LONG, "30000", C),
        _d("remote.log.index.file.cache.total.size.bytes", _T.LONG, "1073741824", C),
        _d("remote.log.manager.copier.thread.pool.size", _T.INT, "10", C),
        _d("remote.log.manager.copy.max.bytes.per.second", _T.LONG, "9223372036854775807", C),
        _d("remote.log.manager.copy.quota.window.num", _T.INT, "11", R),
        _d("remote.log.manager.copy.quota.window.size.seconds", _T.INT, "1", R),
        _d("remote.log.manager.expiration.thread.pool.size", _T.INT, "10", C),
        _d("remote.log.manager.fetch.max.bytes.per.second", _T.LONG, "9223372036854775807", C),
        _d("remote.log.manager.fetch.quota.window.num", _T.INT, "11", R),
        _d("remote.log.manager.fetch.quota.window.size.seconds", _T.INT, "1", R),
        _d("remote.log.manager.task.interval.ms", _T.LONG, "30000", R),
        _d("remote.log.manager.thread.pool.size", _T.INT, "2", R),
        _d("remote.log.metadata.custom.metadata.max.bytes", _T.INT, "128", R),
        _d(
            "remote.log.metadata.manager.class.name",
            _T.STRING,
            "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
            R,
        ),
        _d("remote.log.metadata.manager.class.path", _T.STRING, None, R),
        _d("remote.log.metadata.manager.impl.prefix", _T.STRING, "rlmm.config.", R),
        _d("remote.log.metadata.manager.listener.name", _T.STRING, None, R),
        _d("remote.log.reader.max.pending.tasks", _T.INT, "100", R),
        _d("remote.log.reader.threads", _T.INT, "10", C),
        _d("remote.log.storage.manager.class.name", _T.STRING, None, R),
        _d("remote.log.storage.manager.class.path", _T.STRING, None, R),
        _d("remote.log.storage.manager.impl.prefix", _T.STRING, "rsm.config.", R),
        _d("remote.log.storage.system.enable", _T.BOOLEAN, "false", R),
        _d("replica.fetch.backoff.ms", _T.INT, "1000", R),
        _d("replica.fetch.max.bytes", _T.INT, "1048576", R),
        _d("replica.fetch.min.bytes", _T.INT, "1", R),
        _d("replica.fetch.response.max.bytes", _T.INT, "10485760", R),
        _d("replica.fetch.wait.max.ms", _T.INT, "500", R),
        _d("replica.high.watermark.checkpoint.interval.ms", _T.LONG, "5000", R),
        _d("replica.lag.time.max.ms", _T.LONG, "30000", R),
        _d("replica.selector.class", _T.STRING, None, R),
        _d("replica.socket.receive.buffer.bytes", _T.INT, "65536", R),
        _d("replica.socket.timeout.ms", _T.INT, "30000", R),
        _d("replication.quota.window.num", _T.INT, "11", R),
        _d("replication.quota.window.size.seconds", _T.INT, "1", R),
        _d("request.timeout.ms", _T.INT, "30000", R),
        _d("sasl.client.callback.handler.class", _T.CLASS, None, R),
        _d("sasl.enabled.mechanisms", _T.LIST, "GSSAPI", B),
        _d("sasl.jaas.config", _T.PASSWORD, None, B),
        _d("sasl.kerberos.kinit.cmd", _T.STRING, "/usr/bin/kinit", B),
        _d("sasl.kerberos.min.time.before.relogin", _T.LONG, "60000", B),
        _d("sasl.kerberos.principal.to.local.rules", _T.LIST, "DEFAULT", B),
        _d("sasl.kerberos.service.name", _T.STRING, None, B),
        _d("sasl.kerberos.ticket.renew.jitter", _T.DOUBLE, "0.05", B),
        _d("sasl.kerberos.ticket.renew.window.factor", _T.DOUBLE, "0.8", B),
        _d("sasl.login.callback.handler.class", _T.CLASS, None, R),
        _d("sasl.login.class", _T.CLASS, None, R),
        _d("sasl.login.connect.timeout.ms", _T.INT, None, R),
        _d("sasl.login.read.timeout.ms", _T.INT, None, R),
        _d("sasl.login.refresh.buffer.seconds", _T.SHORT, "300", B),
        _d("sasl.login.refresh.min.period.seconds", _T.SHORT, "60", B),
        _d("sasl.login.refresh.window.factor", _T.DOUBLE, "0.8", B),
        _d("sasl.login.refresh.window.jitter", _T.DOUBLE, "0.05", B),
        _d("sasl.login.retry.backoff.max.ms", _T.LONG, "10000", R),
        _d("sasl.login.retry.backoff.ms", _T.LONG, "100", R),
        _d("sasl.mechanism.controller.protocol", _T.STRING, "GSSAPI", R),
        _d("sasl.mechanism.inter.broker.protocol", _T.STRING, "GSSAPI", B),
        _d("sasl.oauthbearer.clock.skew.seconds", _T.INT, "30", R),
        _d("sasl.oauthbearer.expected.audience", _T.LIST, None, R),
        _d("sasl.oauthbearer.expected.issuer", _T.STRING, None, R),
        _d("sasl.oauthbearer.jwks.endpoint.refresh.ms", _T.LONG, "3600000", R),
        _d("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", _T.LONG, "10000", R),
        _d("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", _T.LONG, "100", R),
        _d("sasl.oauthbearer.jwks.endpoint.url", _T.STRING, None, R),
        _d("sasl.oauthbearer.scope.claim.name", _T.STRING, "scope", R),
        _d("sasl.oauthbearer.sub.claim.name", _T.STRING, "sub", R),
        _d("sasl.oauthbearer.token.endpoint.url", _T.STRING, None, R),
        _d("sasl.server.callback.handler.class", _T.CLASS, None, R),
        _d("sasl.server.max.receive.size", _T.INT, "524288", R),
        _d("security.inter.broker.protocol", _T.STRING, "PLAINTEXT", R),
        _d("security.providers", _T.STRING, None, R),
        _d("share.coordinator.append.linger.ms", _T.INT, "10", R),
        _d("share.coordinator.load.buffer.size", _T.INT, "5242880", R),
        _d("share.coordinator.snapshot.update.records.per.snapshot", _T.INT, "500", R),
        _d("share.coordinator.state.topic.compression.codec", _T.INT, "0", R),
        _d("share.coordinator.state.topic.min.isr", _T.SHORT, "2", R),
        _d("share.coordinator.state.topic.num.partitions", _T.INT, "50", R),
        _d("share.coordinator.state.topic.replication.factor", _T.SHORT, "3", R),
        _d("share.coordinator.state.topic.segment.bytes", _T.INT, "104857600", R),
        _d("share.coordinator.threads", _T.INT, "1", R),
        _d("share.coordinator.write.timeout.ms", _T.INT, "5000", R),
        _d("share.fetch.purgatory.purge.interval.requests", _T.INT, "1000", R),
        _d("socket.connection.setup.timeout.max.ms", _T.LONG, "30000", R),
        _d("socket.connection.setup.timeout.ms", _T.LONG, "10000", R),
        _d("socket.listen.backlog.size", _T.INT, "50", R),
        _d("socket.receive.buffer.bytes", _T.INT, "102400", R),
        _d("socket.request.max.bytes", _T.INT, "104857600", R),
        _d("socket.send.buffer.bytes", _T.INT, "102400", R),
        _d("ssl.allow.dn.changes", _T.BOOLEAN, "false", R),
        _d("ssl.allow.san.changes", _T.BOOLEAN, "false", R),
        _d("ssl.cipher.suites", _T.LIST, "", B),
        _d("ssl.client.auth", _T.STRING, "none", B),
        _d("ssl.enabled.protocols", _T.LIST, "TLSv1.2,TLSv1.3", B),
        _d("ssl.endpoint.identification.algorithm", _T.STRING, "https", B),
        _d("ssl.engine.factory.class", _T.CLASS, None, B),
        _d("ssl.key.password", _T.PASSWORD, None, B),
        _d("ssl.keymanager.algorithm", _T.STRING, "SunX509", B),
        _d("ssl.keystore.certificate.chain", _T.PASSWORD, None, B),
        _d("ssl.keystore.key", _T.PASSWORD, None, B),
        _d("ssl.keystore.location", _T.STRING, None, B),
        _d("ssl.keystore.password", _T.PASSWORD, None, B),
        _d("ssl.keystore.type", _T.STRING, "JKS", B),
        _d("ssl.principal.mapping.rules", _T.STRING, "DEFAULT", R),
        _d("ssl.protocol", _T.STRING, "TLSv1.3", B),
        _d("ssl.provider", _T.STRING, None, B),
        _d("ssl.secure.random.implementation", _T.STRING, None, B),
        _d("ssl.trustmanager.algorithm", _T.STRING, "PKIX", B),
        _d("ssl.truststore.certificates", _T.PASSWORD, None, B),
        _d("ssl.truststore.location", _T.STRING, None, B),
        _d("ssl.truststore.password", _T.PASSWORD, None, B),
        _d("ssl.truststore.type", _T.STRING, "JKS", B),
        _d("telemetry.max.bytes", _T.INT, "1048576", R),
        _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", _T.INT, "10000", R),
        _d("transaction.max.timeout.ms", _T.INT, "900000", R),
        _d("transaction.partition.verification.enable", _T.BOOLEAN, "true", C),
        _d("transaction.remove.expired.transaction.cleanup.interval.ms", _T.INT, "3600000", R),
        _d("transaction.state.log.load.buffer.size", _T.INT, "5242880", R),
        _d("transaction.state.log.min.isr", _T.INT, "2", R),
        _d("transaction.state.log.num.partitions", _T.INT, "50", R),
        _d("transaction.state.log.replication.factor", _T.SHORT, "3", R),
        _d("transaction.state.log.segment.bytes", _T.INT, "104857600", R),
        _d("transactional.id.expiration.ms", _T.INT, "604800000", R),
        _d("unclean.leader.election.enable", _T.BOOLEAN, "false", C),
    )
}

#: Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only with a listener prefix.
LISTENER_ONLY_SECURITY_CONFIGS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
    }
)

_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    """Kafka's ``brokerConfigSynonyms``: the names that set ``name``'s value, in order
    of precedence (``name`` itself when it has no others)."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


_HOURS = 3_600_000
_MINUTES = 60_000

#: Kafka's ServerTopicConfigSynonyms: the broker configs a topic config inherits, in
#: order of precedence, each with the factor that converts its unit to the topic's.
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOURS)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOURS)),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", _MINUTES),
        ("log.retention.hours", _HOURS),
    ),
    "max.message.bytes": (("message.max.bytes", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "compression.type": (("compression.type", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "preallocate": (("log.preallocate", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
}


def convert_synonym(value: str, factor: int) -> str:
    """A broker synonym's value in the topic config's unit (hours and minutes to ms)."""
    if factor == 1:
        return value
    return str(int(value.strip()) * factor)
