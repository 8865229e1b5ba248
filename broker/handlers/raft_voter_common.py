"""What AddRaftVoter (80) and RemoveRaftVoter (81) share: the checks Kafka's
KafkaRaftClient makes before its voter handlers (cluster id, ACLs)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.cluster.kraft_quorum import VoterChangeResult
from broker.security.authorizer.authorization import AclOperation, cluster_denied
from broker.server.context import RequestContext


def precheck(ctx: RequestContext, cluster_id: str | None) -> VoterChangeResult | None:
    """ALTER on the cluster, then Kafka's ``hasValidClusterId`` (a null id passes)."""
    if cluster_denied(ctx, AclOperation.ALTER):
        return VoterChangeResult(ErrorCode.cluster_authorization_failed)
    own = ctx.services.metadata.cluster_id
    if cluster_id is not None and cluster_id != own:
        return VoterChangeResult(
            ErrorCode.inconsistent_cluster_id,
            f'The given id "{cluster_id}" doesn\'t match the cluster id "{own}"',
        )
    return None
