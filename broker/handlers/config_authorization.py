"""The authorizer's check for the config APIs and CreatePartitions (``KafkaApis``/``ConfigHelper``).

DescribeConfigs needs DESCRIBE_CONFIGS, AlterConfigs and IncrementalAlterConfigs need
ALTER_CONFIGS: on the CLUSTER for a BROKER, BROKER_LOGGER or CLIENT_METRICS resource
(else CLUSTER_AUTHORIZATION_FAILED), on the TOPIC (TOPIC_AUTHORIZATION_FAILED) or the
GROUP (GROUP_AUTHORIZATION_FAILED). CreatePartitions needs ALTER on the topic. A refusal
is raised as the ``MetadataError`` these handlers already answer per resource.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError
from broker.security.authorizer.acl import CLUSTER_NAME
from broker.security.authorizer.authorization import AclOperation, ResourceType, authorize
from broker.server.context import RequestContext

# Kafka's ConfigResource.Type codes.
TOPIC_RESOURCE = 2
GROUP_RESOURCE = 32

#: Kafka's ``Errors`` messages.
MESSAGES = {
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
}


def check_config_access(ctx: RequestContext, kind: int, name: str, operation: AclOperation) -> None:
    """Raise the resource's authorization failure unless ``operation`` is allowed."""
    if ctx.services.security.authorizer is None:
        return
    if kind == TOPIC_RESOURCE:
        target, error = (ResourceType.TOPIC, name), ErrorCode.topic_authorization_failed
    elif kind == GROUP_RESOURCE:
        target, error = (ResourceType.GROUP, name), ErrorCode.group_authorization_failed
    else:
        target = (ResourceType.CLUSTER, CLUSTER_NAME)
        error = ErrorCode.cluster_authorization_failed
    if not authorize(ctx, operation, *target):
        raise MetadataError(error, MESSAGES[error])


def check_topic_alter(ctx: RequestContext, topic: str) -> None:
    """CreatePartitions: ALTER on the topic, else TOPIC_AUTHORIZATION_FAILED."""
    if ctx.services.security.authorizer is None:
        return
    if not authorize(ctx, AclOperation.ALTER, ResourceType.TOPIC, topic):
        error = ErrorCode.topic_authorization_failed
        raise MetadataError(error, MESSAGES[error])
