"""GROUP resources (type 32) in the config APIs: a group's configs (KIP-848).

DescribeConfigs on GROUP "<group id>" lists Kafka 4's group configs with the group's
override (source GROUP_CONFIG, itself as the one synonym) or the broker's value (source
DEFAULT_CONFIG, no synonyms), with its type (INT, STRING, BOOLEAN), not read-only, as Kafka's
``ConfigHelper.createGroupConfigEntry``; any group id may be described, known or not.
IncrementalAlterConfigs on GROUP applies SET / DELETE (APPEND / SUBTRACT are
INVALID_CONFIG: no group config is a LIST) and validates the result as Kafka's
``GroupConfig.validate`` (``broker/group/group_configs.py``); an empty group id is
INVALID_REQUEST. The consumer group coordinator owns the broker's ``GroupConfigManager``.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError
from broker.config.broker_config_defs import ConfigSource, ConfigType
from broker.group.group_configs import BOOLEAN_GROUP_CONFIGS, STRING_GROUP_CONFIGS
from broker.handlers.topic_configs import ConfigEntry
from broker.server.context import RequestContext

GROUP_RESOURCE = 32


def group_config_entries(ctx: RequestContext, group_id: str) -> list[ConfigEntry]:
    if not group_id:
        raise MetadataError(ErrorCode.invalid_request, "Group name must not be empty")
    manager = ctx.services.coordinators.consumer_group.group_configs
    entries = []
    for name, value, overridden in manager.describe(group_id):
        source = ConfigSource.GROUP_CONFIG if overridden else ConfigSource.DEFAULT_CONFIG
        synonyms = ((name, value, source),) if overridden else ()
        kind = ConfigType.INT
        if name in STRING_GROUP_CONFIGS:
            kind = ConfigType.STRING
        elif name in BOOLEAN_GROUP_CONFIGS:
            kind = ConfigType.BOOLEAN
        entries.append(ConfigEntry(name, value, source, kind, synonyms=synonyms))
    return entries


def alter_group_configs(
    ctx: RequestContext,
    group_id: str,
    changes: list[tuple[str, str | None, int]],
    validate_only: bool,
) -> None:
    manager = ctx.services.coordinators.consumer_group.group_configs
    manager.alter(group_id, changes, validate_only)
