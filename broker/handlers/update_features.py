"""UpdateFeatures (key 57): change the cluster's finalized feature levels (KIP-584,
KIP-1022), as ``kafka-features.sh upgrade|downgrade`` and ``Admin.updateFeatures`` do.

Versions 0-2.

Behavior:
- ALTER on the CLUSTER with an authorizer, else CLUSTER_AUTHORIZATION_FAILED.
- The controller's rules (``broker/cluster/features.py``, Kafka's
  ``FeatureControlManager``): a level outside the supported range, a downgrade without a
  downgrade type, a "downgrade" to a higher level, a dependency that does not hold or a
  lossy ``metadata.version`` downgrade is INVALID_UPDATE_VERSION with Kafka's message;
  the first failing update fails the request and nothing is applied.
- ``ValidateOnly`` checks and applies nothing.
- An applied change moves ``FinalizedFeaturesEpoch``; every broker's next ApiVersions
  answer reports it, and what the levels gate follows at once (``feature_gates.py``, the
  transaction coordinator's ``transaction.version``).

Version notes:
- v0: ``AllowDowngrade`` (true: a safe downgrade) instead of an upgrade type.
- v1: ``UpgradeType`` per update (1 upgrade, 2 safe downgrade, 3 unsafe downgrade) and
  ``ValidateOnly``.
- v0-1: a result per feature, each with the request's error (Kafka's controller applies
  all or nothing); v2 (KIP-1022) has the top-level error only.

Differences from Kafka: any broker applies the change itself (Kafka forwards it to the
active controller); throttle time 0.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.features import UpgradeType
from broker.handlers.base import error_message
from broker.security.authorizer.authorization import AclOperation, cluster_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 57
MIN_VERSION = 0
MAX_VERSION = 2

PER_FEATURE_RESULTS_BEFORE = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_denied(ctx, AclOperation.ALTER):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    updates: dict[str, tuple[int, UpgradeType]] = {}
    for update in request.feature_updates:
        if ctx.api_version == 0:
            kind = UpgradeType.SAFE_DOWNGRADE if update.allow_downgrade else UpgradeType.UPGRADE
        else:
            raw = int(update.upgrade_type)
            kind = (
                UpgradeType(raw) if raw in UpgradeType._value2member_map_ else UpgradeType.UNKNOWN
            )
        updates[str(update.feature)] = (int(update.max_version_level), kind)
    validate_only = bool(getattr(request, "validate_only", False))
    result = ctx.services.features.update_features(updates, validate_only)
    return _response(ctx, request, result.error, result.message)


def _upgrade_type(raw: int) -> UpgradeType:
    try:
        return UpgradeType(raw)
    except ValueError:
        return UpgradeType.UNKNOWN


def _response(ctx: RequestContext, request: Any, error: ErrorCode, message: str | None) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    fields: dict[str, Any] = {}
    if ctx.api_version < PER_FEATURE_RESULTS_BEFORE:
        fields["results"] = tuple(
            b.UpdatableFeatureResult(feature=u.feature, error_code=error, error_message=message)
            for u in request.feature_updates
        )
    return b.UpdateFeaturesResponse(
        throttle_time=0, error_code=error, error_message=message, **fields
    )


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    return _response(ctx, request, error, error_message(error))
