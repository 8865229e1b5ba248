"""``minikafka replay --target-quotas FILE``: client quotas set on the target before the replay.

A what-if with a quota: the replayed clients keep their captured client ids (the request
header is replayed as captured), so a quota on a client id throttles its replay as it
would throttle the client in production, and the report's throttle table shows it.

Two forms are read, told apart by the first character that is not blank:

- ``{`` — the JSON document a broker keeps as ``client-quotas.json`` in its data
  directory (``{"version": 1, "quotas": [{"entity": [{"entity_type": "client-id",
  "entity_name": "p1"}], "values": {"producer_byte_rate": 1024}}]}``);
- otherwise one quota per line, as ``kafka-configs.sh --alter`` is given it:
  ``--entity-type clients --entity-name p1 --add-config producer_byte_rate=1024``
  (``--entity-default`` for a default; ``users`` and ``clients`` may both appear, for a
  (user, client-id) quota). Blank lines and ``#`` comments are ignored.

The target the replay starts gets them as that document in its ``--data-dir``, which the
broker loads at start (``broker/quota/client_quota_store.py``) — no admin request races
the replay's first sends. Checked here in one line each, with Kafka's rules where the
broker would refuse the same (unknown keys, values not above 0); spark_jobs does not
import the broker, so the few rules are restated.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

__all__ = [
    "QUOTAS_FILE_NAME",
    "QuotaEntry",
    "parse_quota_file",
    "quota_document",
    "write_target_quotas",
]

#: What the broker reads from its data directory.
QUOTAS_FILE_NAME: Final = "client-quotas.json"

#: Kafka's client quota keys (QuotaConfig) for users and client ids.
_KEYS: Final = frozenset(
    {"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
)
#: kafka-configs.sh's entity types and the quota entity type each names.
_ENTITY_TYPES: Final = {"clients": "client-id", "users": "user"}

#: ((entity type, name or None for the default), ...), {key: value}
QuotaEntry = tuple[tuple[tuple[str, str | None], ...], dict[str, float]]


def parse_quota_file(path: Path) -> list[QuotaEntry]:
    """The quotas of ``path`` in either form; ``ValueError`` naming the bad line."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):
        entries = _from_document(json.loads(text))
    else:
        entries = [
            _from_line(line, number)
            for number, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")
        ]
    for entity, values in entries:
        _check(entity, values)
    return entries


def _from_document(document: Any) -> list[QuotaEntry]:
    if not isinstance(document, dict) or not isinstance(document.get("quotas"), list):
        raise ValueError('a quota document needs a "quotas" list, as client-quotas.json')
    entries: list[QuotaEntry] = []
    for item in document["quotas"]:
        entity = tuple((str(p["entity_type"]), p.get("entity_name")) for p in item["entity"])
        entries.append((entity, {str(k): float(v) for k, v in item["values"].items()}))
    return entries


def _from_line(line: str, number: int) -> QuotaEntry:
    words = shlex.split(line, comments=True)
    entity: list[tuple[str, str | None]] = []
    values: dict[str, float] = {}
    i = 0
    try:
        while i < len(words):
            word = words[i]
            if word == "--entity-type":
                if words[i + 1] not in _ENTITY_TYPES:
                    raise ValueError(f"unknown entity type {words[i + 1]!r} (clients, users)")
                entity.append((_ENTITY_TYPES[words[i + 1]], None))
                i += 2
            elif word in ("--entity-name", "--entity-default") and entity:
                name = words[i + 1] if word == "--entity-name" else None
                entity[-1] = (entity[-1][0], name)
                i += 2 if word == "--entity-name" else 1
            elif word == "--add-config":
                for pair in words[i + 1].split(","):
                    key, sep, value = pair.partition("=")
                    if not sep:
                        raise ValueError(f"{pair!r} is not KEY=VALUE")
                    values[key.strip()] = float(value)
                i += 2
            else:
                i += 1  # --alter, --bootstrap-server HOST... say nothing about quotas
    except (IndexError, ValueError) as exc:
        raise ValueError(f"line {number}: {exc or 'an option without its value'}") from exc
    if not entity or not values:
        raise ValueError(f"line {number}: needs --entity-type ... and --add-config K=V")
    return tuple(entity), values


def _check(entity: Sequence[tuple[str, str | None]], values: dict[str, float]) -> None:
    kinds = [kind for kind, _ in entity]
    if not kinds or len(set(kinds)) != len(kinds) or set(kinds) - {"user", "client-id"}:
        raise ValueError(f"unsupported quota entity {list(entity)} (user and/or client-id)")
    for key, value in values.items():
        if key not in _KEYS:
            raise ValueError(f"Invalid configuration key {key}")
        if not value > 0:
            raise ValueError(f"Quota {key} must be greater than 0")


def quota_document(entries: Sequence[QuotaEntry]) -> dict[str, Any]:
    """The broker's ``client-quotas.json`` document holding ``entries``."""
    return {
        "version": 1,
        "quotas": [
            {
                "entity": [{"entity_type": k, "entity_name": n} for k, n in entity],
                "values": values,
            }
            for entity, values in entries
        ],
    }


def write_target_quotas(entries: Sequence[QuotaEntry], data_dir: Path) -> Path:
    """Write ``entries`` where a broker started with ``--data-dir data_dir`` reads them."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / QUOTAS_FILE_NAME
    path.write_text(json.dumps(quota_document(entries), indent=2) + "\n", encoding="utf-8")
    return path
