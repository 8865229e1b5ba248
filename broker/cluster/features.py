"""Finalized features (KIP-584, KIP-1022): Kafka's ``FeatureControlManager`` and the table
of features a Kafka 4.2 controller supports.

A feature is a name and a level; the controller *finalizes* one level per feature for the
whole cluster and every broker reports it in ApiVersions (v3+: ``SupportedFeatures``,
``FinalizedFeatures``, ``FinalizedFeaturesEpoch``). What a level turns on follows it:
``transaction.version`` 2 is transactions v2 (KIP-890: an epoch bump per transaction,
partitions added by the Produce itself), ``group.version`` 1 the consumer group protocol
(KIP-848), ``share.version`` 1 share groups (KIP-932) and 2 their dead-letter queue
(Kafka 4.4, KIP-1191: ``broker/share/dlq/``), ``eligible.leader.replicas.version``
1 KIP-966's ELR, ``kraft.version`` 1 a quorum whose voters may change (KIP-853).

:class:`FeatureControl` holds the levels, cluster-wide (one per ``MiniKafka``, like the
metadata), durable in ``features.json`` under the data directory, and changes them as
``UpdateFeatures`` asks (``update_features``), with Kafka's rules and messages:

- every update is checked against the range this controller supports: outside it,
  INVALID_UPDATE_VERSION "Invalid update version 3 for feature transaction.version. Local
  controller 1 only supports versions 0-2" ("... does not support this feature." for an
  unknown name);
- a lower level needs the upgrade type SAFE_DOWNGRADE or UNSAFE_DOWNGRADE ("Can't
  downgrade the version of this feature without setting the upgrade type to either safe
  or unsafe downgrade."), a higher one UPGRADE ("Can't downgrade to a newer version.");
- a level >= 1 needs ``metadata.version`` >= 7 (3.3-IV3), and a level's dependencies
  must hold in the levels the request leaves ("eligible.leader.replicas.version could not
  be set to 1 because it depends on metadata.version level 23");
- ``metadata.version``: a downgrade across a version that changed the metadata format is
  refused ("Refusing to perform the requested downgrade because it might delete metadata
  information."; unsafe: "Unsafe metadata downgrade is not supported in this version.");
- the first failing update fails the whole request, nothing applied (Kafka's atomic
  records); ``validate_only`` checks and applies nothing.

Every applied change bumps the finalized features' epoch. A level of 0 is not reported as
finalized (Kafka removes the feature from the finalized set).

Where we differ from Kafka: ``group.version``, ``share.version`` and ``streams.version``
start at 0 on a cluster whose broker config turns the consumer protocol, share groups or
streams groups off (Kafka formats them from ``--feature``); ``share.version`` 2 is Kafka
4.4's (supported, not finalized on a new cluster: Kafka's ``ShareVersion``
LATEST_PRODUCTION is still 1), and Kafka ties it to ``metadata.version`` 4.4-IV0, a level
this 4.2 table lacks, so that dependency is not checked; there is no broker
registration to check a level against other brokers (one process, one table).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path

from kio.schema.errors import ErrorCode

from broker.cluster.atomic_file import read_json, write_json_atomic
from protocol.metadata_versions import (
    LATEST_METADATA_VERSION,
    METADATA_VERSIONS,
    MINIMUM_METADATA_VERSION,
    metadata_version_name,
)

log = logging.getLogger("broker.controller")

FILE_NAME = "features.json"

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"


class UpgradeType(IntEnum):
    """``FeatureUpdate.UpgradeType``: UpdateFeatures v1+ names one per update (v0: its
    ``AllowDowngrade`` flag is SAFE_DOWNGRADE or UPGRADE)."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """One feature as Kafka 4.2 declares it (``Feature``, ``*Version``): the levels this
    controller supports, the level a new cluster finalizes, and what each level needs."""

    name: str
    min_level: int
    max_level: int
    default_level: int
    #: level -> {feature: minimum level} (``FeatureVersion.dependencies``).
    dependencies: Mapping[int, Mapping[str, int]] = field(default_factory=dict)


FEATURES: tuple[FeatureSpec, ...] = (
    FeatureSpec(METADATA_VERSION, MINIMUM_METADATA_VERSION, LATEST_METADATA_VERSION, 29),
    FeatureSpec(KRAFT_VERSION, 0, 1, 1),
    FeatureSpec(TRANSACTION_VERSION, 0, 2, 2),
    FeatureSpec(GROUP_VERSION, 0, 1, 1),
    FeatureSpec(ELIGIBLE_LEADER_REPLICAS_VERSION, 0, 1, 1, {1: {METADATA_VERSION: 23}}),
    FeatureSpec(SHARE_VERSION, 0, 2, 1),  # 2: Kafka 4.4's dead-letter queue (KIP-1191)
    FeatureSpec(STREAMS_VERSION, 0, 1, 1),  # KIP-1071's streams groups (broker/group/streams/)
)
SPECS: dict[str, FeatureSpec] = {spec.name: spec for spec in FEATURES}


@dataclass(frozen=True, slots=True)
class FeatureUpdateResult:
    """The answer to one UpdateFeatures: NONE, or the first update's error and message."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None


class FeatureControl:
    """The cluster's finalized feature levels and their epoch; see the module docstring.

    ``bootstrap`` overrides the default levels of a new cluster (no ``features.json``
    yet), as ``kafka-storage format --feature`` does; ``controller_id`` names the local
    controller in Kafka's messages."""

    def __init__(
        self,
        data_dir: Path | None = None,
        bootstrap: Mapping[str, int] | None = None,
        controller_id: int = 1,
    ) -> None:
        self._path = data_dir / FILE_NAME if data_dir is not None else None
        self._controller_id = controller_id
        self._levels: dict[str, int] = {spec.name: spec.default_level for spec in FEATURES}
        self._levels.update(bootstrap or {})
        self._epoch = 0
        document = read_json(self._path) if self._path is not None else None
        if document is not None:
            self._levels = {str(k): int(v) for k, v in document.get("features", {}).items()}
            self._epoch = int(document.get("epoch", 0))

    # ---------------------------------------------------------------- reading
    @property
    def epoch(self) -> int:
        """``FinalizedFeaturesEpoch``: moves with every applied change."""
        return self._epoch

    def level(self, name: str) -> int:
        """The finalized level of ``name`` (0: not finalized)."""
        return self._levels.get(name, 0)

    def finalized(self) -> dict[str, int]:
        """Every feature finalized at a level above 0 (what ApiVersions reports)."""
        return {name: level for name, level in sorted(self._levels.items()) if level > 0}

    def supported(self) -> tuple[FeatureSpec, ...]:
        return FEATURES

    # --------------------------------------------------------------- updating
    def update_features(
        self,
        updates: Mapping[str, tuple[int, UpgradeType]],
        validate_only: bool = False,
    ) -> FeatureUpdateResult:
        """Kafka's ``FeatureControlManager.updateFeatures``: all or nothing."""
        proposed = dict(self._levels)
        proposed.update({name: level for name, (level, _type) in updates.items()})
        for name, (level, upgrade_type) in updates.items():
            message = self._check_update(name, level, upgrade_type, proposed)
            if message is not None:
                log.warning(message)
                return FeatureUpdateResult(ErrorCode.invalid_update_version, message)
        if validate_only or not updates:
            return FeatureUpdateResult()
        for name, (level, _type) in updates.items():
            if name == METADATA_VERSION and level != self.level(name):
                verb = "Upgrading" if level > self.level(name) else "Downgrading"
                log.warning(
                    "%s metadata.version from %s to %s.",
                    verb,
                    _mv_name(self.level(name)),
                    _mv_name(level),
                )
            self._levels[name] = level
        self._epoch += 1
        self._save()
        log.info("Finalized features are now %s (epoch %d)", self.finalized(), self._epoch)
        return FeatureUpdateResult()

    def _check_update(
        self, name: str, level: int, upgrade_type: UpgradeType, proposed: Mapping[str, int]
    ) -> str | None:
        def invalid(reason: str) -> str:
            return f"Invalid update version {level} for feature {name}. {reason}"

        if upgrade_type is UpgradeType.UNKNOWN:
            return invalid("The controller does not support the given upgrade type.")
        current = self.level(name)
        if level < 0:
            return invalid("A feature version cannot be less than 0.")
        spec = SPECS.get(name)
        low, high = (spec.min_level, spec.max_level) if spec is not None else (0, 0)
        if not low <= level <= high:
            who = f"Local controller {self._controller_id}"
            if high == 0:
                return invalid(f"{who} does not support this feature.")
            return invalid(f"{who} only supports versions {_range(low, high)}")
        if level < current and upgrade_type is UpgradeType.UPGRADE:
            return invalid(
                "Can't downgrade the version of this feature without setting the upgrade "
                "type to either safe or unsafe downgrade."
            )
        if level > current and upgrade_type is not UpgradeType.UPGRADE:
            return invalid("Can't downgrade to a newer version.")
        if name == METADATA_VERSION:
            return _check_metadata_version(current, level, upgrade_type)
        return _check_dependencies(name, level, proposed)

    def _save(self) -> None:
        if self._path is not None:
            write_json_atomic(
                self._path, {"version": 1, "epoch": self._epoch, "features": self._levels}, 1
            )


def _check_metadata_version(current: int, level: int, upgrade_type: UpgradeType) -> str | None:
    """``updateMetadataVersion``: a downgrade only across versions that kept the format."""

    def invalid(reason: str) -> str:
        return f"Invalid metadata.version {level}. {reason}"

    if level >= current:
        return None
    if any(METADATA_VERSIONS[v][1] for v in range(level + 1, current + 1)):
        if upgrade_type is UpgradeType.UNSAFE_DOWNGRADE:
            return invalid("Unsafe metadata downgrade is not supported in this version.")
        return invalid(
            "Refusing to perform the requested downgrade because it might delete metadata "
            "information."
        )
    return None


def _check_dependencies(name: str, level: int, proposed: Mapping[str, int]) -> str | None:
    """``Feature.validateVersion``: a level >= 1 needs metadata.version >= 3.3-IV3, and
    the level's own dependencies must hold in the levels the request leaves."""
    prefix = f"Invalid update version {level} for feature {name}. "
    metadata_version = proposed.get(METADATA_VERSION, 0)
    if level >= 1 and metadata_version < MINIMUM_METADATA_VERSION:
        return prefix + (
            f"{name} could not be set to {level} because it depends on metadata.version="
            f"{MINIMUM_METADATA_VERSION} ({_mv_name(MINIMUM_METADATA_VERSION)})"
        )
    spec = SPECS[name]
    for dependency, needed in spec.dependencies.get(level, {}).items():
        if proposed.get(dependency, 0) < needed:
            return prefix + (
                f"{name} could not be set to {level} because it depends on {dependency} "
                f"level {needed}"
            )
    return None


def _range(low: int, high: int) -> str:
    """Kafka's ``VersionRange.toString``."""
    return str(low) if low == high else f"{low}-{high}"


def _mv_name(level: int) -> str:
    return metadata_version_name(level)


def bootstrap_levels(
    consumer_protocol: bool, share_groups: bool, streams_protocol: bool = True
) -> dict[str, int]:
    """A new cluster's levels that differ from Kafka 4.2's defaults: ``group.version``,
    ``share.version`` and ``streams.version`` at 0 where the broker config turns their
    protocol off (``group.coordinator.rebalance.protocols`` without ``consumer`` or
    ``streams``, ``group.share.enable`` false), as a cluster formatted with
    ``--feature group.version=0`` would be."""
    levels: dict[str, int] = {}
    if not streams_protocol:
        levels[STREAMS_VERSION] = 0
    if not consumer_protocol:
        levels[GROUP_VERSION] = 0
    if not share_groups:
        levels[SHARE_VERSION] = 0
    return levels
