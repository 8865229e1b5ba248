"""What CreateTopics, CreatePartitions and DeleteTopics call of the ControllerMutation quota.

Kafka's ``KafkaApis`` asks ``quotas.controllerMutation.newQuotaFor(request,
strictSinceVersion)``, takes each topic's partitions from it, and answers with
``sendResponseMaybeThrottleWithControllerQuota``. The quota itself (KIP-599's token
bucket) is ``broker/quota/controller_mutation_quota.py``, which knows no request context.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError
from broker.quota.controller_mutation_quota import (
    THROTTLING_QUOTA_EXCEEDED_MESSAGE,
    ControllerMutationQuota,
    ThrottlingQuotaExceeded,
)
from broker.server.context import RequestContext


def mutation_quota(ctx: RequestContext, strict_since_version: int) -> ControllerMutationQuota:
    """The request's quota (unbounded while no ``controller_mutation_rate`` exists)."""
    return ctx.services.quota_managers.controller_mutation_quota(ctx, strict_since_version)


def take_permits(quota: ControllerMutationQuota, permits: int) -> None:
    """Take a topic's partitions; a strict quota below zero refuses the topic with
    Kafka's THROTTLING_QUOTA_EXCEEDED."""
    try:
        quota.record(float(permits))
    except ThrottlingQuotaExceeded:
        raise MetadataError(
            ErrorCode.throttling_quota_exceeded, THROTTLING_QUOTA_EXCEEDED_MESSAGE
        ) from None


def leave_throttle_time(ctx: RequestContext, quota: ControllerMutationQuota) -> None:
    """The quota's throttle time, for ``QuotaManagers.record_and_throttle`` to answer."""
    throttle = quota.throttle_time()
    if throttle > 0:
        ctx.timing.throttle_time_ms = throttle
