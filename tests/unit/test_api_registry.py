"""The API version registry and Kafka's header-version rule."""

from __future__ import annotations

import dataclasses

import pytest

from protocol import (
    KIO_VERSIONS,
    ApiSpec,
    UnsupportedApiKey,
    UnsupportedVersion,
    api_name,
    is_flexible,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)

# First flexible version of each API, read off Kafka's message JSON ("flexibleVersions").
# Independent of kio, so the header rule is checked against Kafka, not against itself.
KAFKA_FIRST_FLEXIBLE = {
    0: 9,  # Produce
    1: 12,  # Fetch
    2: 6,  # ListOffsets
    3: 9,  # Metadata
    8: 8,  # OffsetCommit
    9: 6,  # OffsetFetch
    10: 3,  # FindCoordinator
    11: 6,  # JoinGroup
    12: 4,  # Heartbeat
    13: 4,  # LeaveGroup
    14: 4,  # SyncGroup
    15: 5,  # DescribeGroups
    16: 3,  # ListGroups
    18: 3,  # ApiVersions
    19: 5,  # CreateTopics
    20: 4,  # DeleteTopics
    22: 2,  # InitProducerId
}


def test_ranges_match_kio_facts() -> None:
    expected = {
        0: ("Produce", 3, 13),
        1: ("Fetch", 4, 18),
        2: ("ListOffsets", 1, 11),
        3: ("Metadata", 0, 13),
        8: ("OffsetCommit", 2, 10),
        11: ("JoinGroup", 0, 9),
        18: ("ApiVersions", 0, 4),
    }
    for key, (name, low, high) in expected.items():
        assert KIO_VERSIONS[key] == ApiSpec(key, name, low, high)


def test_api_spec_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        KIO_VERSIONS[0].max_version = 99  # type: ignore[misc]
    assert KIO_VERSIONS[0].supports(9)
    assert not KIO_VERSIONS[0].supports(2)


def test_every_api_has_request_and_response_classes_at_both_ends() -> None:
    for key, spec in KIO_VERSIONS.items():
        for version in (spec.min_version, spec.max_version):
            req = request_class(key, version)
            resp = response_class(key, version)
            assert (req.__api_key__, req.__version__) == (key, version)
            assert (resp.__api_key__, resp.__version__) == (key, version)
        # Kafka's CamelCase names are the kio class names without the suffix.
        assert request_class(key, spec.min_version).__name__ == f"{spec.name}Request"
        assert api_name(key) == spec.name


def test_api_name_examples() -> None:
    assert api_name(0) == "Produce"
    assert api_name(18) == "ApiVersions"
    assert api_name(23) == "OffsetForLeaderEpoch"
    with pytest.raises(UnsupportedApiKey):
        api_name(9999)


@pytest.mark.parametrize(("api_key", "first_flexible"), sorted(KAFKA_FIRST_FLEXIBLE.items()))
def test_header_versions_follow_flexible_versions(api_key: int, first_flexible: int) -> None:
    spec = KIO_VERSIONS[api_key]
    for version in range(spec.min_version, spec.max_version + 1):
        flexible = version >= first_flexible
        assert is_flexible(api_key, version, "request") is flexible
        assert is_flexible(api_key, version, "response") is flexible
        assert request_header_version(api_key, version) == (2 if flexible else 1)
        if api_key != 18:
            assert response_header_version(api_key, version) == (1 if flexible else 0)


def test_api_versions_response_always_uses_header_v0() -> None:
    for version in range(0, 10):  # including versions nobody supports yet
        assert response_header_version(18, version) == 0
    assert is_flexible(18, 3, "response")  # even though the body is flexible


def test_header_version_outside_kio_range_uses_nearest_version() -> None:
    assert request_header_version(0, 0) == 1  # Produce v0: removed, never flexible
    assert request_header_version(18, 7) == 2  # a future ApiVersions is flexible
    assert request_header_version(1, 300) == 2
    assert response_header_version(3, 100) == 1
    assert request_header_version(17, 5) == 1  # SaslHandshake is never flexible


def test_is_flexible_is_strict_about_versions() -> None:
    with pytest.raises(UnsupportedVersion) as info:
        is_flexible(0, 2)
    assert (info.value.api_key, info.value.api_version) == (0, 2)
    with pytest.raises(UnsupportedApiKey):
        is_flexible(9999, 0)
    with pytest.raises(UnsupportedApiKey):
        request_header_version(9999, 0)
