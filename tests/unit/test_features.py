"""Finalized features (KIP-584, KIP-1022): Kafka 4.2's table, UpdateFeatures' rules and
messages, durability, and what ApiVersions and UpdateFeatures say on the wire."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.features import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    METADATA_VERSION,
    SHARE_VERSION,
    STREAMS_VERSION,
    TRANSACTION_VERSION,
    FeatureControl,
    UpgradeType,
    bootstrap_levels,
)
from protocol.builders import request_builder
from protocol.metadata_versions import default_feature_level, metadata_version_level
from tests.helpers.dispatch_node import dispatch_node

E = ErrorCode
U = UpgradeType


def test_a_new_cluster_finalizes_kafka_42s_levels() -> None:
    features = FeatureControl()
    assert features.finalized() == {
        "eligible.leader.replicas.version": 1,
        "group.version": 1,
        "kraft.version": 1,
        "metadata.version": 29,
        "share.version": 1,
        "streams.version": 1,
        "transaction.version": 2,
    }
    assert features.level(STREAMS_VERSION) == 1
    assert features.epoch == 0


def test_the_broker_config_turns_group_and_share_versions_off_on_a_new_cluster() -> None:
    features = FeatureControl(bootstrap=bootstrap_levels(False, False))
    assert features.level("group.version") == 0 and features.level(SHARE_VERSION) == 0


def test_downgrade_and_upgrade_move_the_level_and_the_epoch() -> None:
    features = FeatureControl()
    assert features.update_features({TRANSACTION_VERSION: (0, U.SAFE_DOWNGRADE)}).error is E.none
    assert features.level(TRANSACTION_VERSION) == 0 and features.epoch == 1
    assert TRANSACTION_VERSION not in features.finalized()
    assert features.update_features({TRANSACTION_VERSION: (2, U.UPGRADE)}).error is E.none
    assert features.level(TRANSACTION_VERSION) == 2 and features.epoch == 2


@pytest.mark.parametrize(
    ("updates", "message"),
    [
        (
            {TRANSACTION_VERSION: (3, U.UPGRADE)},
            "Invalid update version 3 for feature transaction.version. Local controller 1 "
            "only supports versions 0-2",
        ),
        (
            {"no.such.version": (1, U.UPGRADE)},
            "Invalid update version 1 for feature no.such.version. Local controller 1 does "
            "not support this feature.",
        ),
        (
            {TRANSACTION_VERSION: (1, U.UPGRADE)},
            "Invalid update version 1 for feature transaction.version. Can't downgrade the "
            "version of this feature without setting the upgrade type to either safe or "
            "unsafe downgrade.",
        ),
        (
            {STREAMS_VERSION: (1, U.SAFE_DOWNGRADE)},
            "Invalid update version 1 for feature streams.version. Can't downgrade to a "
            "newer version.",
        ),
        (
            {TRANSACTION_VERSION: (-1, U.SAFE_DOWNGRADE)},
            "Invalid update version -1 for feature transaction.version. A feature version "
            "cannot be less than 0.",
        ),
        (
            {TRANSACTION_VERSION: (0, U.UNKNOWN)},
            "Invalid update version 0 for feature transaction.version. The controller does "
            "not support the given upgrade type.",
        ),
        (
            {METADATA_VERSION: (22, U.SAFE_DOWNGRADE)},
            "Invalid metadata.version 22. Refusing to perform the requested downgrade "
            "because it might delete metadata information.",
        ),
        (
            {METADATA_VERSION: (22, U.UNSAFE_DOWNGRADE)},
            "Invalid metadata.version 22. Unsafe metadata downgrade is not supported in "
            "this version.",
        ),
    ],
)
def test_kafkas_refusals_are_invalid_update_version_with_its_message(
    updates: dict[str, tuple[int, UpgradeType]], message: str
) -> None:
    features = FeatureControl(bootstrap={STREAMS_VERSION: 0})
    result = features.update_features(updates)
    assert (result.error, result.message) == (E.invalid_update_version, message)
    assert features.epoch == 0


def test_a_dependency_is_checked_against_the_levels_the_request_leaves() -> None:
    features = FeatureControl(bootstrap={ELIGIBLE_LEADER_REPLICAS_VERSION: 0, METADATA_VERSION: 22})
    refused = features.update_features({ELIGIBLE_LEADER_REPLICAS_VERSION: (1, U.UPGRADE)})
    assert refused.message == (
        "Invalid update version 1 for feature eligible.leader.replicas.version. "
        "eligible.leader.replicas.version could not be set to 1 because it depends on "
        "metadata.version level 23"
    )
    both = {ELIGIBLE_LEADER_REPLICAS_VERSION: (1, U.UPGRADE), METADATA_VERSION: (23, U.UPGRADE)}
    assert features.update_features(both).error is E.none
    assert features.level(ELIGIBLE_LEADER_REPLICAS_VERSION) == 1


def test_one_refused_update_fails_the_whole_request_and_validate_only_applies_nothing() -> None:
    features = FeatureControl()
    mixed = {TRANSACTION_VERSION: (0, U.SAFE_DOWNGRADE), SHARE_VERSION: (5, U.UPGRADE)}
    assert features.update_features(mixed).error is E.invalid_update_version
    assert features.level(TRANSACTION_VERSION) == 2
    checked = features.update_features({TRANSACTION_VERSION: (0, U.SAFE_DOWNGRADE)}, True)
    assert checked.error is E.none
    assert features.level(TRANSACTION_VERSION) == 2 and features.epoch == 0


def test_a_downgrade_across_versions_that_kept_the_format_is_safe() -> None:
    features = FeatureControl()
    assert features.update_features({METADATA_VERSION: (24, U.SAFE_DOWNGRADE)}).error is E.none
    assert features.level(METADATA_VERSION) == 24


def test_levels_and_epoch_survive_a_restart(tmp_path: Path) -> None:
    features = FeatureControl(tmp_path)
    features.update_features({TRANSACTION_VERSION: (0, U.SAFE_DOWNGRADE)})
    again = FeatureControl(tmp_path, bootstrap={TRANSACTION_VERSION: 2})
    assert again.level(TRANSACTION_VERSION) == 0 and again.epoch == 1


def test_release_versions_and_feature_defaults_follow_kafkas_bootstrap_versions() -> None:
    assert metadata_version_level("4.2") == 29
    assert metadata_version_level("4.0-IV1") == 23
    assert metadata_version_level("9.9") is None
    assert default_feature_level(TRANSACTION_VERSION, 29) == 2
    assert default_feature_level(TRANSACTION_VERSION, 23) == 0
    assert default_feature_level(SHARE_VERSION, 27) == 0


# ------------------------------------------------------------------ on the wire
def _api_versions(version: int) -> Any:
    node = dispatch_node()
    body = request_builder(18, version).ApiVersionsRequest(
        client_software_name="t", client_software_version="1"
    )
    return node.answer(node.send(18, version, body))


def test_api_versions_v4_reports_every_supported_feature_and_the_finalized_levels() -> None:
    answer = _api_versions(4)
    supported = [(f.name, f.min_version, f.max_version) for f in answer.supported_features]
    assert supported == [
        ("metadata.version", 7, 29),
        ("kraft.version", 0, 1),
        ("transaction.version", 0, 2),
        ("group.version", 0, 1),
        ("eligible.leader.replicas.version", 0, 1),
        ("share.version", 0, 2),
        ("streams.version", 0, 1),
    ]
    finalized = {f.name: f.max_version_level for f in answer.finalized_features}
    assert finalized["transaction.version"] == 2 and finalized["streams.version"] == 1
    assert answer.finalized_features_epoch == 0


def test_api_versions_v3_leaves_out_features_whose_minimum_is_0() -> None:
    answer = _api_versions(3)
    assert [f.name for f in answer.supported_features] == ["metadata.version"]


def test_update_features_answers_per_feature_before_v2_and_moves_api_versions() -> None:
    node = dispatch_node()

    def update(version: int, level: int, kind: int) -> Any:
        b = request_builder(57, version)
        body = b.UpdateFeaturesRequest(
            feature_updates=(
                b.FeatureUpdateKey(
                    feature="transaction.version", max_version_level=level, upgrade_type=kind
                ),
            ),
            validate_only=False,
        )
        return node.answer(node.send(57, version, body))

    refused = update(1, 1, 1)
    assert refused.error_code is E.invalid_update_version
    (result,) = refused.results
    assert (result.feature, result.error_code) == ("transaction.version", E.invalid_update_version)
    done = update(2, 0, 2)
    assert (done.error_code, done.error_message) == (E.none, None)
    body = request_builder(18, 4).ApiVersionsRequest(
        client_software_name="t", client_software_version="1"
    )
    answer = node.answer(node.send(18, 4, body))
    assert "transaction.version" not in [f.name for f in answer.finalized_features]
    assert answer.finalized_features_epoch == 1


def test_what_a_level_turns_on_follows_it() -> None:
    """group.version 0 refuses ConsumerGroupHeartbeat, share.version 0 the share APIs,
    with UNSUPPORTED_VERSION as Kafka's; upgrading turns them back on."""
    node = dispatch_node()

    def heartbeat(api_key: int) -> Any:
        b = request_builder(api_key, 1)
        if api_key == 68:
            body = b.ConsumerGroupHeartbeatRequest(
                group_id="g",
                member_id="m",
                member_epoch=0,
                instance_id=None,
                rack_id=None,
                rebalance_timeout=30000,
                subscribed_topic_names=("t",),
                subscribed_topic_regex=None,
                server_assignor=None,
                topic_partitions=(),
            )
        else:
            body = b.ShareGroupHeartbeatRequest(
                group_id="g",
                member_id="m",
                member_epoch=0,
                rack_id=None,
                subscribed_topic_names=("t",),
            )
        return node.answer(node.send(api_key, 1, body)).error_code

    def update(name: str, level: int) -> None:
        b = request_builder(57, 2)
        kind = 1 if level else 2
        body = b.UpdateFeaturesRequest(
            feature_updates=(
                b.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind),
            ),
            validate_only=False,
        )
        assert node.answer(node.send(57, 2, body)).error_code is E.none

    assert heartbeat(68) is not E.unsupported_version
    assert heartbeat(76) is not E.unsupported_version
    update("group.version", 0)
    update("share.version", 0)
    assert heartbeat(68) is E.unsupported_version
    assert heartbeat(76) is E.unsupported_version
    update("group.version", 1)
    assert heartbeat(68) is not E.unsupported_version
