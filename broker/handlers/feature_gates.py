"""What a finalized feature level turns on, as the handlers ask it (Kafka's
``KafkaApis.isConsumerGroupProtocolEnabled`` / ``isShareGroupProtocolEnabled``).

A protocol is served while the broker's config allows it *and* the cluster finalized the
feature level that carries it: ``group.version`` >= 1 for KIP-848's consumer groups
(ConsumerGroupHeartbeat), ``share.version`` >= 1 for KIP-932's share groups (the share
APIs), ``streams.version`` >= 1 for KIP-1071's streams groups (StreamsGroupHeartbeat and
StreamsGroupDescribe, with ``streams`` in ``group.coordinator.rebalance.protocols``).
Otherwise the request is refused with UNSUPPORTED_VERSION, as Kafka refuses it.
``transaction.version`` is read by the transaction coordinator itself.
"""

from __future__ import annotations

from broker.cluster.features import GROUP_VERSION, SHARE_VERSION, STREAMS_VERSION
from broker.server.context import RequestContext


def consumer_group_protocol_enabled(ctx: RequestContext) -> bool:
    services = ctx.services
    return (
        services.coordinators.consumer_group.config.consumer_protocol_enabled
        and services.features.level(GROUP_VERSION) >= 1
    )


def share_groups_enabled(ctx: RequestContext) -> bool:
    services = ctx.services
    return (
        services.coordinators.share_group.config.group_share_enable
        and services.features.level(SHARE_VERSION) >= 1
    )


def streams_groups_enabled(ctx: RequestContext) -> bool:
    """Kafka's ``isStreamsGroupProtocolEnabled``."""
    services = ctx.services
    return (
        services.coordinators.streams_group.config.streams_protocol_enabled
        and services.features.level(STREAMS_VERSION) >= 1
    )
