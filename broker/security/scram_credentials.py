"""The cluster's SCRAM credentials, as Kafka's controller keeps them (UserScramCredentialRecord).

One store per cluster, shared by its brokers (Kafka: the metadata log every broker
replays). Per user and mechanism: salt, StoredKey, ServerKey, iterations — never the
password. With a data directory it is one JSON document written atomically
(``broker/cluster/atomic_file.py``) on every change and read at start; without one it lives in
memory.

Seeding at start takes ``kafka-storage format --add-scram``'s syntax:
``SCRAM-SHA-256=[name=alice,password=alice-secret]`` (also ``iterations=``, ``salt=``
as base64... Kafka takes a salt in its own encoding; here the salt is the UTF-8 bytes of the
value). Kafka's default iterations there are 4096.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from broker.cluster.atomic_file import read_json, write_json_atomic
from broker.security.scram import (
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    generate_credential,
)

CREDENTIALS_FILE = "scram-credentials.json"
_ADD_SCRAM = re.compile(r"^\s*(SCRAM-SHA-(?:256|512))\s*=\s*\[(.*)\]\s*$")


class ScramCredentialStore:
    """User -> mechanism -> credential, durable when given a directory."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self._path = data_dir / CREDENTIALS_FILE if data_dir is not None else None
        self._credentials: dict[str, dict[str, ScramCredential]] = {}
        if self._path is not None:
            self._load(self._path)

    def _load(self, path: Path) -> None:
        document = read_json(path)
        if not document:
            return
        for user, mechanisms in document.get("credentials", {}).items():
            for mechanism, c in mechanisms.items():
                self._credentials.setdefault(user, {})[mechanism] = ScramCredential(
                    base64.b64decode(c["salt"]),
                    base64.b64decode(c["stored_key"]),
                    base64.b64decode(c["server_key"]),
                    int(c["iterations"]),
                )

    def _save(self) -> None:
        if self._path is None:
            return
        b64 = base64.b64encode
        document = {
            "version": 1,
            "credentials": {
                user: {
                    mechanism: {
                        "salt": b64(c.salt).decode(),
                        "stored_key": b64(c.stored_key).decode(),
                        "server_key": b64(c.server_key).decode(),
                        "iterations": c.iterations,
                    }
                    for mechanism, c in sorted(mechanisms.items())
                }
                for user, mechanisms in sorted(self._credentials.items())
            },
        }
        self._path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self._path, document, indent=1)

    # -- reads -------------------------------------------------------------------------

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        return sorted(self._credentials)

    def mechanisms_of(self, user: str) -> Iterator[tuple[str, ScramCredential]]:
        yield from sorted(self._credentials.get(user, {}).items())

    # -- changes -----------------------------------------------------------------------

    def upsert(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self.upsert_many([(user, mechanism, credential)])

    def upsert_many(self, changes: list[tuple[str, str, ScramCredential]]) -> None:
        for user, mechanism, credential in changes:
            self._credentials.setdefault(user, {})[mechanism] = credential
        if changes:
            self._save()

    def delete_many(self, deletions: list[tuple[str, str]]) -> None:
        changed = False
        for user, mechanism in deletions:
            mechanisms = self._credentials.get(user)
            if mechanisms is not None and mechanisms.pop(mechanism, None) is not None:
                changed = True
                if not mechanisms:
                    del self._credentials[user]
        if changed:
            self._save()

    def add_scram(self, spec: str, random_bytes: Callable[[int], bytes]) -> str:
        """Seed one credential from ``kafka-storage format --add-scram`` syntax; the user."""
        match = _ADD_SCRAM.match(spec)
        if match is None:
            raise ValueError(
                f"--add-scram {spec!r}: expected SCRAM-SHA-256=[name=<user>,password=<pw>]"
            )
        mechanism = match.group(1)
        fields: dict[str, str] = {}
        for part in match.group(2).split(","):
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"--add-scram {spec!r}: {part!r} is not key=value")
            fields[key.strip()] = value.strip().strip('"')
        if "name" not in fields or "password" not in fields:
            raise ValueError(f"--add-scram {spec!r}: name and password are required")
        iterations = int(fields.get("iterations", MIN_ITERATIONS))
        if iterations < MIN_ITERATIONS:
            raise ValueError(f"--add-scram {spec!r}: iterations must be at least {MIN_ITERATIONS}")
        salt = fields["salt"].encode() if "salt" in fields else random_bytes(32)
        assert mechanism in SCRAM_MECHANISMS
        credential = generate_credential(mechanism, fields["password"], salt, iterations)
        self.upsert(fields["name"], mechanism, credential)
        return fields["name"]
