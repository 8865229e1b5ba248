"""The cluster's client quotas: entities, their values, validation, durability.

Kafka 4 keeps client quotas in the metadata log (``ClientQuotaRecord``s, validated by the
controller's ``ClientQuotaControlManager``, served by every broker from its
``ClientQuotasImage``). Here one ``ClientQuotaStore`` is shared by all brokers of the
simulated cluster, like ``ClusterMetadata``, and with a data directory it is the JSON
document ``client-quotas.json`` beside ``cluster-metadata.json``, replaced atomically on
every change.

An entity is a set of (entity type, name) pairs: ``user``, ``client-id`` (alone or
together) or ``ip``; a name of None is the type's default (``<default>`` in Kafka's
tools). Values are keyed by Kafka's quota config names with Kafka's types:
``producer_byte_rate`` and ``consumer_byte_rate`` (LONG), ``request_percentage`` and
``controller_mutation_rate`` (DOUBLE) for users and client ids, and
``connection_creation_rate`` (INT) for ips.

Validation and messages are Kafka's (INVALID_REQUEST for every refusal):
``alter`` — "Invalid empty client quota entity", "Unhandled client quota entity type: X",
"Empty X not supported", duplicate entity types, an IP combined with a user or client id,
"Invalid configuration key K", "Quota K must be greater than 0", too large for its type,
"K cannot be a fractional value.", a key twice in one entry, an entity twice in one
request; ``describe`` — an empty or repeated entity type, an unsupported one
(UNSUPPORTED_VERSION, as Kafka), match types and their match strings.

Differences from Kafka: an ``ip`` quota (``connection_creation_rate``) is kept and
described but not enforced (minikafka does not throttle connection creation); an ip name
is not resolved. Quotas do not need the user or client to exist — nor does Kafka.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster.atomic_file import read_json, write_json_atomic

log = logging.getLogger("broker.quota")

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

_LONG_MAX = float(2**63 - 1)
_INT_MAX = float(2**31 - 1)

#: Kafka's ``QuotaConfig.userAndClientQuotaConfigs`` and ``ipConfigs``: key -> type.
USER_CLIENT_KEYS: dict[str, str] = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}
IP_KEYS: dict[str, str] = {CONNECTION_CREATION_RATE: "INT"}

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

#: An entity: (entity type, name or None for the default) pairs, sorted by type.
Entity = tuple[tuple[str, str | None], ...]


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(pairs, key=lambda pair: pair[0]))


@dataclass(frozen=True, slots=True)
class ApiError:
    error: ErrorCode
    message: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not ErrorCode.none


NONE = ApiError(ErrorCode.none)


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.invalid_request, message)


class QuotaFilterError(Exception):
    """A DescribeClientQuotas filter Kafka refuses as a whole."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def entity_text(entity: Sequence[tuple[str, str | None]]) -> str:
    """Kafka's ``ClientQuotaEntity.toString`` shape, for messages."""
    inner = ", ".join(f"{kind}={name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def validate_entity(pairs: Sequence[tuple[str, str | None]]) -> tuple[ApiError, dict[str, str]]:
    """``validateEntity`` then ``configKeysForEntityType``: the error, or the valid keys."""
    if not pairs:
        return _invalid("Invalid empty client quota entity"), {}
    seen: set[str] = set()
    for kind, name in pairs:
        if kind in seen:
            return _invalid(f"Invalid client quota entity, duplicate entity entry {kind}"), {}
        if kind not in (USER, CLIENT_ID, IP):
            return _invalid(f"Unhandled client quota entity type: {kind}"), {}
        if name is not None and name == "":
            return _invalid(f"Empty {kind} not supported"), {}
        seen.add(kind)
    if IP in seen:
        if USER in seen or CLIENT_ID in seen:
            return _invalid(
                "Invalid quota entity combination, IP entity shouldnot be combined with "
                "User or ClientId"
            ), {}
        return NONE, IP_KEYS
    return NONE, USER_CLIENT_KEYS


def validate_value(keys: dict[str, str], key: str, value: float) -> ApiError:
    """``validateQuotaKeyValue``: a known key, a positive value that fits its type."""
    kind = keys.get(key)
    if kind is None:
        return _invalid(f"Invalid configuration key {key}")
    if math.isnan(value) or value <= 0.0:
        return _invalid(f"Quota {key} must be greater than 0")
    if kind == "DOUBLE":
        if math.isinf(value):
            return _invalid(f"Proposed value for {key} is too large for a DOUBLE.")
        return NONE
    if kind == "INT" and value > _INT_MAX:
        return _invalid(f"Proposed value for {key} is too large for an INT.")
    if kind == "LONG" and value > _LONG_MAX:
        return _invalid(f"Proposed value for {key} is too large for a LONG.")
    if abs(value % 1.0) > 1e-6:
        return _invalid(f"{key} cannot be a fractional value.")
    return NONE


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """One entry of AlterClientQuotas: the entity as sent, and (key, value or None to
    remove) operations."""

    entity: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float | None], ...]


class ClientQuotaStore:
    """Every entity's quota values; ``listeners`` are told after each change."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self._path = data_dir / "client-quotas.json" if data_dir is not None else None
        self._quotas: dict[Entity, dict[str, float]] = {}
        self._listeners: list[Callable[[], None]] = []
        if self._path is not None:
            self._load(self._path)

    # -- reading ------------------------------------------------------------------------

    def entries(self) -> dict[Entity, dict[str, float]]:
        return {entity: dict(values) for entity, values in self._quotas.items()}

    def value(self, entity: Entity, key: str) -> float | None:
        values = self._quotas.get(entity)
        return None if values is None else values.get(key)

    def entities_with(self, key: str) -> list[Entity]:
        return [entity for entity, values in self._quotas.items() if key in values]

    def add_listener(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def describe(
        self, components: Sequence[tuple[str, int, str | None]], strict: bool
    ) -> list[tuple[Entity, dict[str, float]]]:
        """``ClientQuotasImage.describe``; raises ``QuotaFilterError`` for a bad filter."""
        exact: dict[str, str | None] = {}
        by_type: set[str] = set()
        for kind, match_type, match in components:
            if kind == "":
                raise QuotaFilterError(ErrorCode.invalid_request, "Invalid empty entity type.")
            if kind in exact or kind in by_type:
                raise QuotaFilterError(
                    ErrorCode.invalid_request,
                    f"Entity type {kind} cannot appear more than once in the filter.",
                )
            if kind not in (IP, USER, CLIENT_ID):
                raise QuotaFilterError(
                    ErrorCode.unsupported_version, f"Unsupported entity type {kind}"
                )
            _add_component(exact, by_type, kind, match_type, match)
        kinds = set(exact) | by_type
        if IP in kinds and (USER in kinds or CLIENT_ID in kinds):
            raise QuotaFilterError(
                ErrorCode.invalid_request,
                "Invalid entity filter component combination. IP filter component should "
                "not be used with user or clientId filter component.",
            )
        out = []
        for entity, values in self._quotas.items():
            if _matches(dict(entity), exact, by_type, strict):
                out.append((entity, dict(values)))
        return out

    # -- changing -----------------------------------------------------------------------

    def alter(self, alterations: Sequence[QuotaAlteration], validate_only: bool) -> list[ApiError]:
        """``ClientQuotaControlManager.alterClientQuotas``: an error per entry, in order;
        the valid entries are applied (unless ``validate_only``)."""
        results: list[ApiError] = []
        changes: list[tuple[Entity, dict[str, float | None]]] = []
        seen: set[Entity] = set()
        for alteration in alterations:
            entity = entity_of(alteration.entity)
            error, new_values = _validate_alteration(alteration, entity, seen)
            seen.add(entity)
            results.append(error)
            if not error.failed:
                changes.append((entity, new_values))
        if not validate_only and changes:
            for entity, new_values in changes:
                self._apply(entity, new_values)
            self._save()
            for listener in list(self._listeners):
                listener()
        return results

    def _apply(self, entity: Entity, new_values: dict[str, float | None]) -> None:
        values = self._quotas.setdefault(entity, {})
        for key, value in new_values.items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
            # Kafka's controller, replaying the ClientQuotaRecord it wrote.
            if value is None:
                log.info("Replayed ClientQuotaRecord for %s removing %s.", entity_text(entity), key)
            else:
                log.info(
                    "Replayed ClientQuotaRecord for %s setting %s to %s.",
                    entity_text(entity),
                    key,
                    value,
                )
        if not values:
            del self._quotas[entity]

    # -- durability ---------------------------------------------------------------------

    def _save(self) -> None:
        if self._path is None:
            return
        document = {
            "version": 1,
            "quotas": [
                {
                    "entity": [{"entity_type": k, "entity_name": n} for k, n in entity],
                    "values": values,
                }
                for entity, values in sorted(self._quotas.items(), key=lambda item: repr(item[0]))
            ],
        }
        write_json_atomic(self._path, document)

    def _load(self, path: Path) -> None:
        document: Any = read_json(path)
        if document is None:
            return
        for item in document.get("quotas", []):
            entity = entity_of(
                (str(part["entity_type"]), part["entity_name"]) for part in item["entity"]
            )
            self._quotas[entity] = {str(k): float(v) for k, v in item["values"].items()}


def _add_component(
    exact: dict[str, str | None], by_type: set[str], kind: str, match_type: int, match: str | None
) -> None:
    if match_type == MATCH_EXACT:
        if match is None:
            raise QuotaFilterError(
                ErrorCode.invalid_request,
                "Request specified MATCH_TYPE_EXACT, but set match string to null.",
            )
        exact[kind] = match
    elif match_type == MATCH_DEFAULT:
        if match is not None:
            raise QuotaFilterError(
                ErrorCode.invalid_request,
                "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
            )
        exact[kind] = None
    elif match_type == MATCH_SPECIFIED:
        if match is not None:
            raise QuotaFilterError(
                ErrorCode.invalid_request,
                "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
            )
        by_type.add(kind)
    else:
        raise QuotaFilterError(ErrorCode.invalid_request, f"Unknown match type {match_type}")


def _matches(
    entity: dict[str, str | None], exact: dict[str, str | None], by_type: set[str], strict: bool
) -> bool:
    if strict and len(entity) != len(exact) + len(by_type):
        return False
    for kind, name in exact.items():
        if kind not in entity or entity[kind] != name:
            return False
    return all(kind in entity for kind in by_type)


def _validate_alteration(
    alteration: QuotaAlteration, entity: Entity, seen: set[Entity]
) -> tuple[ApiError, dict[str, float | None]]:
    if entity in seen:
        return _invalid(f"Ignoring duplicate entity {entity_text(alteration.entity)}"), {}
    new_values: dict[str, float | None] = {}
    for key, value in alteration.ops:
        if key in new_values:
            return _invalid(
                f"Duplicate quota key {key} not updating quota for this entity "
                f"{entity_text(alteration.entity)}"
            ), {}
        new_values[key] = value
    error, keys = validate_entity(alteration.entity)
    if error.failed:
        return error, {}
    for key, value in new_values.items():
        if value is not None:
            error = validate_value(keys, key, value)
            if error.failed:
                return error, {}
    return NONE, new_values
