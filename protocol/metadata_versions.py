"""Kafka's ``MetadataVersion`` table (3.3-IV3 .. 4.2-IV1), shared by the broker's
feature control and the ``features`` tool: a level's name (``4.2-IV1``), whether it
changed the metadata format (a downgrade across such a level may lose metadata), and a
release's level (``4.2`` is its last internal version, as ``fromVersionString``).
"""

from __future__ import annotations

#: Feature level -> (name, did the metadata format change).
METADATA_VERSIONS: dict[int, tuple[str, bool]] = {
    7: ("3.3-IV3", True),
    8: ("3.4-IV0", True),
    9: ("3.5-IV0", False),
    10: ("3.5-IV1", False),
    11: ("3.5-IV2", True),
    12: ("3.6-IV0", False),
    13: ("3.6-IV1", True),
    14: ("3.6-IV2", True),
    15: ("3.7-IV0", True),
    16: ("3.7-IV1", False),
    17: ("3.7-IV2", True),
    18: ("3.7-IV3", False),
    19: ("3.7-IV4", False),
    20: ("3.8-IV0", False),
    21: ("3.9-IV0", False),
    22: ("4.0-IV0", False),
    23: ("4.0-IV1", True),
    24: ("4.0-IV2", False),
    25: ("4.0-IV3", False),
    26: ("4.1-IV0", False),
    27: ("4.1-IV1", False),
    28: ("4.2-IV0", False),
    29: ("4.2-IV1", False),
}
#: ``MetadataVersion.MINIMUM_VERSION`` and ``LATEST_PRODUCTION`` (Kafka 4.2).
MINIMUM_METADATA_VERSION = 7
LATEST_METADATA_VERSION = 29


def metadata_version_name(level: int) -> str:
    """``4.2-IV1`` for 29; Kafka's tool prints ``UNKNOWN <level>`` for a level it lacks."""
    entry = METADATA_VERSIONS.get(level)
    return entry[0] if entry is not None else f"UNKNOWN {level}"


def metadata_version_level(version: str) -> int | None:
    """``fromVersionString``: ``4.2-IV0`` exactly, or a release (``4.2``, ``4.2.1``) as
    its last internal version; None for a version not in the table."""
    parts = version.strip().split(".")
    release = ".".join(parts[:2])
    suffix = ""
    if "-" in release:
        release, suffix = release.split("-", 1)
    best: int | None = None
    for level, (name, _changed) in METADATA_VERSIONS.items():
        name_release, _, name_suffix = name.partition("-")
        if name_release == release and (not suffix or suffix == name_suffix):
            best = level
    return best


#: Each production feature's levels with the metadata version a new cluster (or
#: ``kafka-features.sh upgrade --release-version``) takes them from: Kafka 4.2's
#: ``FeatureVersion.bootstrapMetadataVersion``.
FEATURE_BOOTSTRAP_LEVELS: dict[str, tuple[tuple[int, int], ...]] = {
    "kraft.version": ((1, 21),),
    "transaction.version": ((1, 24), (2, 24)),
    "group.version": ((1, 22),),
    "eligible.leader.replicas.version": ((1, 26),),
    "share.version": ((1, 28),),
    "streams.version": ((1, 29),),
}


def default_feature_level(feature: str, metadata_version: int) -> int:
    """``Feature.defaultLevel``: the highest level whose bootstrap version is reached."""
    level = 0
    for candidate, bootstrap in FEATURE_BOOTSTRAP_LEVELS.get(feature, ()):
        if bootstrap <= metadata_version:
            level = candidate
    return level
