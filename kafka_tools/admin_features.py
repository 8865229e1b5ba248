"""``minikafka features describe|upgrade|downgrade``: ``kafka-features.sh`` (KIP-584,
KIP-1022) against any bootstrap.

=====================================================  ================================
Kafka                                                  minikafka
=====================================================  ================================
``kafka-features.sh describe``                         ``features describe``
``kafka-features.sh upgrade --feature F=N``            ``features upgrade --feature F=N``
``... upgrade --release-version 4.2``                  ``features upgrade --release-version 4.2``
``... upgrade --metadata 4.2``                         ``features upgrade --metadata 4.2``
``kafka-features.sh downgrade --feature F=N``          ``features downgrade --feature F=N``
``... downgrade --unsafe``                             ``features downgrade --unsafe ...``
``--dry-run``                                          ``--dry-run``
=====================================================  ================================

``describe`` reads ApiVersions v4 (every supported feature, the finalized levels and their
epoch) and prints Kafka's lines (``Feature: F<TAB>SupportedMinVersion: ...``);
``metadata.version`` levels by name (``4.2-IV1``). ``upgrade``/``downgrade`` send one
UpdateFeatures (``--dry-run``: ValidateOnly) and print per feature "F was upgraded to
N." or "Could not upgrade F to N. <the controller's message>", then, on a failure,
"K out of M operation(s) failed." with exit code 1, as Kafka's tool.
``--release-version R`` asks for metadata.version R and every feature's default level at
R (features at 0 left out of an upgrade).
"""

from __future__ import annotations

import argparse
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.client import AdminError, KafkaClient, error_name
from protocol.builders import Builder, request_builder
from protocol.metadata_versions import (
    FEATURE_BOOTSTRAP_LEVELS,
    METADATA_VERSIONS,
    default_feature_level,
    metadata_version_level,
    metadata_version_name,
)

API_VERSIONS = 18
UPDATE_FEATURES = 57
METADATA_VERSION = "metadata.version"
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


class FeatureUsageError(Exception):
    """A bad command line (exit code 2)."""


def add_feature_parsers(sub: Any, bootstrap_option: Any) -> None:
    features = sub.add_parser(
        "features", help="describe, upgrade, downgrade finalized features (kafka-features)"
    )
    actions = features.add_subparsers(dest="action", required=True, metavar="ACTION")
    describe = actions.add_parser("describe", help="supported and finalized feature levels")
    bootstrap_option(describe)
    for name, text in (("upgrade", "raise"), ("downgrade", "lower")):
        parser = actions.add_parser(name, help=f"{text} finalized feature levels")
        parser.add_argument(
            "--feature",
            action="append",
            default=None,
            metavar="NAME=LEVEL",
            help="a feature and its new level (repeatable)",
        )
        parser.add_argument("--metadata", default=None, help="metadata.version, e.g. 4.2-IV1")
        parser.add_argument(
            "--release-version",
            default=None,
            help="a release: its metadata.version and every feature's default level",
        )
        if name == "downgrade":
            parser.add_argument("--unsafe", action="store_true", help="an unsafe (lossy) downgrade")
        parser.add_argument("--dry-run", action="store_true", help="validate only")
        bootstrap_option(parser)


def _level_to_string(feature: str, level: int) -> str:
    if feature == METADATA_VERSION:
        return metadata_version_name(level)
    return str(level)


async def features_describe(args: argparse.Namespace) -> int:
    async with KafkaClient(args.bootstrap) as client:
        connection = await client.connection()
        b = request_builder(API_VERSIONS, 4)
        response = await connection.request(
            API_VERSIONS,
            4,
            b.ApiVersionsRequest(
                client_software_name="minikafka-cli", client_software_version="1.0"
            ),
        )
    if response.error_code is not ErrorCode.none:
        raise AdminError(f"ApiVersions failed: {error_name(response.error_code)}")
    finalized = {f.name: int(f.max_version_level) for f in response.finalized_features}
    epoch = int(response.finalized_features_epoch)
    for feature in sorted(response.supported_features, key=lambda f: f.name):
        name = feature.name
        print(
            f"Feature: {name}\t"
            f"SupportedMinVersion: {_level_to_string(name, int(feature.min_version))}\t"
            f"SupportedMaxVersion: {_level_to_string(name, int(feature.max_version))}\t"
            f"FinalizedVersionLevel: {_level_to_string(name, finalized.get(name, 0))}\t"
            f"Epoch: {epoch if epoch >= 0 else '-'}"
        )
    return 0


def _metadata_level(version: str) -> int:
    level = metadata_version_level(version)
    if level is None:
        names = ", ".join(name for name, _ in METADATA_VERSIONS.values())
        raise FeatureUsageError(
            f"Unknown metadata.version {version}. Supported metadata.version are {names}"
        )
    return level


def _updates(args: argparse.Namespace, upgrade_type: int) -> dict[str, tuple[int, int]]:
    """Kafka's ``handleUpgradeOrDowngrade``: the updates the options ask for."""
    if args.release_version is not None and (args.metadata or args.feature):
        raise FeatureUsageError("Can not specify `release-version` with other feature flags.")
    updates: dict[str, tuple[int, int]] = {}
    if args.release_version is not None:
        level = _metadata_level(args.release_version)
        updates[METADATA_VERSION] = (level, upgrade_type)
        for feature in FEATURE_BOOTSTRAP_LEVELS:
            default = default_feature_level(feature, level)
            if upgrade_type != UPGRADE or default > 0:
                updates[feature] = (default, upgrade_type)
        return updates
    if args.metadata is not None:
        print(" `metadata` flag is deprecated and may be removed in a future release.")
        updates[METADATA_VERSION] = (_metadata_level(args.metadata), upgrade_type)
    for item in args.feature or ():
        name, sep, level = item.partition("=")
        name = name.strip()
        if not sep or not name or not level.strip().lstrip("-").isdigit():
            raise FeatureUsageError(
                f"Can't parse feature={item}. Expected a feature name and a level, e.g. "
                "transaction.version=2"
            )
        if name in updates:
            raise FeatureUsageError(f"Feature {name} was specified more than once.")
        updates[name] = (int(level), upgrade_type)
    return updates


async def features_upgrade(args: argparse.Namespace) -> int:
    return await _update(args, "upgrade", UPGRADE)


async def features_downgrade(args: argparse.Namespace) -> int:
    return await _update(args, "downgrade", UNSAFE_DOWNGRADE if args.unsafe else SAFE_DOWNGRADE)


async def _update(args: argparse.Namespace, op: str, upgrade_type: int) -> int:
    updates = _updates(args, upgrade_type)
    if not updates:
        raise FeatureUsageError(f"You must specify at least one feature to {op}")
    async with KafkaClient(args.bootstrap) as client:

        def build(b: Builder, version: int) -> Any:
            keys = []
            for name, (level, kind) in updates.items():
                if version == 0:
                    keys.append(
                        b.FeatureUpdateKey(
                            feature=name, max_version_level=level, allow_downgrade=kind != UPGRADE
                        )
                    )
                else:
                    keys.append(
                        b.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind)
                    )
            if version == 0:
                return b.UpdateFeaturesRequest(feature_updates=tuple(keys))
            return b.UpdateFeaturesRequest(
                feature_updates=tuple(keys), validate_only=bool(args.dry_run)
            )

        response = await client.call(UPDATE_FEATURES, build)
    # As Kafka's admin client: each feature's answer, the top-level error when none.
    errors = {name: (response.error_code, response.error_message) for name in updates}
    for result in getattr(response, "results", ()):
        errors[result.feature] = (result.error_code, result.error_message)
    failures = 0
    for name in sorted(updates):
        level = updates[name][0]
        error, message = errors[name]
        if error is ErrorCode.none:
            verb = " can be " if args.dry_run else " was "
            print(f"{name}{verb}{op}d to {level}.")
        else:
            helper = "Can not " if args.dry_run else "Could not "
            print(f"{helper}{op} {name} to {level}. {message or error_name(error)}")
            failures += 1
    if failures:
        raise AdminError(f"{failures} out of {len(updates)} operation(s) failed.")
    return 0
