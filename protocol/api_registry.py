"""Which APIs and versions exist, and which header each uses.

``KIO_VERSIONS`` is what *kio can decode* (every API of current Kafka, the versions
Kafka 4.x still speaks). What the broker *advertises* in ApiVersions is a subset chosen
by the broker's handler registry; this module knows nothing of handlers.

Header versions follow Kafka's rule (KIP-482): a request uses header v2 (with tagged
fields) exactly when its API version is "flexible", else v1; a response uses header v1
when flexible, else v0 -- except ApiVersions, whose response always uses header v0 so a
client can read it before it knows what the broker speaks.

Flexibility is monotonic in Kafka (``flexibleVersions`` is always "N+"), so for a
version outside kio's range the nearest known version decides. That is what lets the
broker parse the header of, say, an ApiVersions v5 request and answer it.

Schema classes are imported lazily and cached: importing every version of every API up
front would cost far more than one broker start needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Final, Literal

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.static.protocol import RequestPayload, ResponsePayload

from protocol.errors import UnsupportedApiKey, UnsupportedVersion

__all__ = (
    "API_VERSIONS_KEY",
    "KIO_VERSIONS",
    "ApiSpec",
    "Kind",
    "api_name",
    "is_flexible",
    "request_class",
    "request_header_version",
    "response_class",
    "response_header_version",
)

API_VERSIONS_KEY: Final = 18

Kind = Literal["request", "response"]


@dataclass(frozen=True)
class ApiSpec:
    """One API and an inclusive, contiguous range of versions."""

    api_key: int
    name: str
    min_version: int
    max_version: int

    def supports(self, api_version: int) -> bool:
        return self.min_version <= api_version <= self.max_version


def _camel(snake: str) -> str:
    # kio's names are Kafka's message names (ApiVersionsRequest.json -> api_versions);
    # Kafka has no acronyms in API names, so title-casing each part is exact (a test
    # checks it against kio's class names).
    return "".join(part.capitalize() for part in snake.split("_"))


def _build_kio_versions() -> Mapping[int, ApiSpec]:
    specs: dict[int, ApiSpec] = {}
    for api_key, snake in sorted(api_key_map.items()):
        versions = sorted(schema_name_map[snake])
        low, high = versions[0], versions[-1]
        if versions != list(range(low, high + 1)):  # pragma: no cover - kio invariant
            raise RuntimeError(f"kio's versions of {snake} are not contiguous: {versions}")
        specs[api_key] = ApiSpec(api_key, _camel(snake), low, high)
    return MappingProxyType(specs)


KIO_VERSIONS: Final[Mapping[int, ApiSpec]] = _build_kio_versions()
"""Every API key kio knows, with the version range it has schemas for."""


def _spec(api_key: int) -> ApiSpec:
    try:
        return KIO_VERSIONS[api_key]
    except KeyError:
        raise UnsupportedApiKey(api_key) from None


def api_name(api_key: int) -> str:
    """Kafka's name of an API ("Produce", "ApiVersions", ...)."""
    return _spec(api_key).name


def _check(api_key: int, api_version: int) -> None:
    if not _spec(api_key).supports(api_version):
        raise UnsupportedVersion(api_key, api_version)


@cache
def request_class(api_key: int, api_version: int) -> type[RequestPayload]:
    """kio's request class; ``UnsupportedApiKey`` / ``UnsupportedVersion`` if none."""
    _check(api_key, api_version)
    return load_request_schema(api_key, api_version)


@cache
def response_class(api_key: int, api_version: int) -> type[ResponsePayload]:
    """kio's response class; ``UnsupportedApiKey`` / ``UnsupportedVersion`` if none."""
    _check(api_key, api_version)
    return load_response_schema(api_key, api_version)


def is_flexible(api_key: int, api_version: int, kind: Kind = "request") -> bool:
    """Whether that version of the request (or response) uses compact encodings and
    tagged fields. Raises for versions kio has no schema of."""
    cls = (
        request_class(api_key, api_version)
        if kind == "request"
        else response_class(api_key, api_version)
    )
    return cls.__flexible__


def _clamp(api_key: int, api_version: int) -> int:
    spec = _spec(api_key)
    return min(max(api_version, spec.min_version), spec.max_version)


def request_header_version(api_key: int, api_version: int) -> int:
    """2 when that request version is flexible, else 1.

    Works for versions outside kio's range (the nearest known version decides), so a
    header can be read -- and answered -- even when the body cannot. Raises
    ``UnsupportedApiKey`` for an api key kio does not know.
    """
    return _request_header_version(api_key, _clamp(api_key, api_version))


def response_header_version(api_key: int, api_version: int) -> int:
    """1 when that response version is flexible, else 0; always 0 for ApiVersions."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return _response_header_version(api_key, _clamp(api_key, api_version))


# Cached on the clamped version only, so a peer sending random versions cannot grow
# the caches beyond one entry per (api key, real version).
@cache
def _request_header_version(api_key: int, api_version: int) -> int:
    return 2 if is_flexible(api_key, api_version, "request") else 1


@cache
def _response_header_version(api_key: int, api_version: int) -> int:
    return 1 if is_flexible(api_key, api_version, "response") else 0
