"""CLIENT_METRICS resources (type 16, KIP-714) in the config APIs: telemetry subscriptions.

DescribeConfigs on CLIENT_METRICS "<name>" lists what was set on the subscription (none
for a name never set: no configs and no error), each with source CLIENT_METRICS_CONFIG
(7), no synonyms, not read-only, type UNKNOWN (Kafka's ``ConfigHelper`` sets none); an
empty name is INVALID_REQUEST ("Client metrics subscription name must not be empty").
IncrementalAlterConfigs on CLIENT_METRICS applies SET, DELETE, APPEND and SUBTRACT and
validates the result as Kafka's ``ClientMetricsConfigs.validate``
(``broker/observability/client_telemetry/``); a change that deletes every config removes
the subscription. ListConfigResources lists the subscriptions. The subscriptions are
the cluster's (``ClusterStores.client_metrics``), kept whether the receiver is on or
not, as Kafka keeps the resources without a telemetry plugin.

The legacy AlterConfigs (key 33) replaces a subscription's whole set
(``ClientMetricsStore.replace``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError
from broker.config.broker_config_defs import ConfigSource, ConfigType
from broker.handlers.topic_configs import ConfigEntry
from broker.observability.client_telemetry.client_metrics_configs import NAMES
from broker.server.context import RequestContext

CLIENT_METRICS_RESOURCE = 16


def client_metrics_config_entries(ctx: RequestContext, name: str) -> list[ConfigEntry]:
    if not name:
        raise MetadataError(
            ErrorCode.invalid_request, "Client metrics subscription name must not be empty"
        )
    configs = ctx.services.client_metrics.configs(name)
    return [
        ConfigEntry(key, configs[key], ConfigSource.CLIENT_METRICS_CONFIG, ConfigType.UNKNOWN)
        for key in NAMES
        if key in configs
    ]


def alter_client_metrics_configs(
    ctx: RequestContext,
    name: str,
    changes: list[tuple[str, str | None, int]],
    validate_only: bool,
) -> None:
    ctx.services.client_metrics.alter(name, changes, validate_only)
