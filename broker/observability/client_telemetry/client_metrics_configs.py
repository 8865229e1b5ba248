"""A CLIENT_METRICS config resource (KIP-714): Kafka's ``ClientMetricsConfigs``.

A subscription is a named config resource (resource type 16 in DescribeConfigs and
IncrementalAlterConfigs; ``kafka-client-metrics.sh --alter --name NAME``) with three
configs, Kafka's names and defaults:

* ``metrics`` (LIST, default empty): metric name prefixes the matched clients push; an
  empty list subscribes to nothing, ``*`` to everything (Kafka sends ``*`` alone then);
* ``interval.ms`` (INT, default 300000): how often the matched clients push, between 100
  and 3600000 (one hour), else INVALID_REQUEST with Kafka's message;
* ``match`` (LIST, default empty: every client): ``name=regex`` selectors over
  ``client_id``, ``client_instance_id``, ``client_software_name``,
  ``client_software_version``, ``client_source_address`` and ``client_source_port``; a
  client matches when every selector fully matches its attribute. A selector that is not
  ``name=value`` or names another attribute, or a regex that does not compile, is
  INVALID_CONFIG ("Illegal client matching pattern: ...").

Regexes are RE2 (google-re2, as the consumer group's regex subscriptions), as Kafka 4.x
compiles them with RE2/J; Kafka still falls back to java.util.regex for a pattern RE2/J
refuses (backreferences, lookaround) that was stored before it validated with RE2/J. Here
no such pattern can have been stored, so there is no fallback.

An unknown config name is INVALID_REQUEST ("Unknown client metrics configuration: x"), an
empty subscription name INVALID_REQUEST ("Subscription name can't be empty").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import re2
from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import MetadataError

METRICS: Final = "metrics"
INTERVAL_MS: Final = "interval.ms"
MATCH: Final = "match"
#: The configs of a subscription, in the order DescribeConfigs lists them.
NAMES: Final = (METRICS, INTERVAL_MS, MATCH)
#: The LIST configs (IncrementalAlterConfigs may APPEND to and SUBTRACT from them).
LIST_CONFIGS: Final = frozenset((METRICS, MATCH))

#: '*' in ``metrics``: every metric.
ALL_SUBSCRIBED_METRICS: Final = "*"
INTERVAL_MS_DEFAULT: Final = 5 * 60 * 1000
MIN_INTERVAL_MS: Final = 100
MAX_INTERVAL_MS: Final = 3_600_000

CLIENT_INSTANCE_ID: Final = "client_instance_id"
CLIENT_ID: Final = "client_id"
CLIENT_SOFTWARE_NAME: Final = "client_software_name"
CLIENT_SOFTWARE_VERSION: Final = "client_software_version"
CLIENT_SOURCE_ADDRESS: Final = "client_source_address"
CLIENT_SOURCE_PORT: Final = "client_source_port"
MATCH_ATTRIBUTES: Final = frozenset(
    (
        CLIENT_INSTANCE_ID,
        CLIENT_ID,
        CLIENT_SOFTWARE_NAME,
        CLIENT_SOFTWARE_VERSION,
        CLIENT_SOURCE_ADDRESS,
        CLIENT_SOURCE_PORT,
    )
)


@dataclass(frozen=True, slots=True)
class Subscription:
    """One CLIENT_METRICS resource, parsed: Kafka's ``SubscriptionInfo``."""

    name: str
    metrics: frozenset[str]
    interval_ms: int
    #: attribute -> compiled RE2 (full match), from ``match``.
    match: Mapping[str, re2._Regexp]

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        """Every selector fully matches its attribute (none: every client matches)."""
        for name, pattern in self.match.items():
            value = attributes.get(name)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def split_list(value: str | None) -> list[str]:
    """A LIST config's items as Kafka's ConfigDef parses them (comma-separated, trimmed,
    empty items dropped)."""
    if not value:
        return []
    return [item.strip() for item in value.split(",") if item.strip()]


def validate(name: str, configs: Mapping[str, str]) -> None:
    """Kafka's ``ClientMetricsConfigs.validate`` on a subscription's whole config set."""
    if not name:
        raise MetadataError(ErrorCode.invalid_request, "Subscription name can't be empty")
    for key in configs:
        if key not in NAMES:
            raise MetadataError(
                ErrorCode.invalid_request, f"Unknown client metrics configuration: {key}"
            )
    if INTERVAL_MS in configs:
        _interval(configs[INTERVAL_MS])
    if MATCH in configs:
        parse_match(split_list(configs[MATCH]))


def _interval(value: str) -> int:
    try:
        interval = int(value.strip())
    except ValueError:
        raise MetadataError(
            ErrorCode.invalid_config,
            f"Invalid value {value} for configuration {INTERVAL_MS}: Not a number of type INT",
        ) from None
    if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise MetadataError(
            ErrorCode.invalid_request,
            f"Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 and "
            "3600000 (1 hour)",
        )
    return interval


def parse_match(patterns: list[str]) -> dict[str, re2._Regexp]:
    """``name=regex`` selectors, split at the one '=' (Kafka splits on every '=' and
    wants exactly two parts, so a regex cannot hold one)."""
    parsed: dict[str, re2._Regexp] = {}
    options = re2.Options()
    options.log_errors = False
    for pattern in patterns:
        parts = pattern.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_ATTRIBUTES:
            raise MetadataError(
                ErrorCode.invalid_config, f"Illegal client matching pattern: {pattern}"
            )
        try:
            parsed[parts[0].strip()] = re2.compile(parts[1].strip(), options=options)
        except re2.error:
            raise MetadataError(
                ErrorCode.invalid_config, f"Illegal client matching pattern: {pattern}"
            ) from None
    return parsed


def subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """A validated config set as a subscription, Kafka's defaults where unset."""
    interval = configs.get(INTERVAL_MS)
    return Subscription(
        name,
        frozenset(split_list(configs.get(METRICS))),
        _interval(interval) if interval is not None else INTERVAL_MS_DEFAULT,
        parse_match(split_list(configs.get(MATCH))),
    )
