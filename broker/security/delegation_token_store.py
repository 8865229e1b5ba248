"""The cluster's delegation tokens (KIP-48), as Kafka's controller keeps them
(``DelegationTokenRecord`` / ``RemoveDelegationTokenRecord``).

One store per cluster, shared by its brokers (Kafka: the metadata log every broker
replays into its ``DelegationTokenCache``). Per token: Kafka's ``TokenInformation`` — the
id, the owner, who asked for it (KIP-373's token requester), the renewers, and the issue,
expiry and max timestamps (epoch milliseconds). Never the HMAC: like Kafka's records, the
store holds what the HMAC is computed from (the token id), and each broker computes it
with ``delegation.token.secret.key`` (``delegation_token_manager.py``). With a data
directory it is one JSON document written atomically (``broker/cluster/atomic_file.py``)
on every change and read at start, so tokens outlive a kill -9; without one it lives in
memory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from broker.cluster.atomic_file import read_json, write_json_atomic
from broker.security.principal import KafkaPrincipal

TOKENS_FILE = "delegation-tokens.json"


@dataclass(frozen=True, slots=True)
class TokenInformation:
    """Kafka's ``TokenInformation``: what a token is, without its HMAC."""

    token_id: str
    owner: KafkaPrincipal
    token_requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """Kafka's ``ownerOrRenewer``: who may renew, expire and always describe it."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        """Kafka's test (controller and sweep): past its expiry or its max timestamp."""
        return self.max_timestamp_ms < now_ms or self.expiry_timestamp_ms < now_ms

    def with_expiry(self, expiry_timestamp_ms: int) -> TokenInformation:
        return replace(self, expiry_timestamp_ms=expiry_timestamp_ms)


def _principal(text: str) -> KafkaPrincipal:
    return KafkaPrincipal.parse(text)


def _token_to_json(token: TokenInformation) -> dict[str, Any]:
    return {
        "owner": str(token.owner),
        "requester": str(token.token_requester),
        "renewers": [str(r) for r in token.renewers],
        "issue_timestamp_ms": token.issue_timestamp_ms,
        "expiry_timestamp_ms": token.expiry_timestamp_ms,
        "max_timestamp_ms": token.max_timestamp_ms,
    }


def _token_from_json(token_id: str, doc: dict[str, Any]) -> TokenInformation:
    return TokenInformation(
        token_id,
        _principal(doc["owner"]),
        _principal(doc["requester"]),
        tuple(_principal(r) for r in doc["renewers"]),
        int(doc["issue_timestamp_ms"]),
        int(doc["expiry_timestamp_ms"]),
        int(doc["max_timestamp_ms"]),
    )


class DelegationTokenStore:
    """Token id -> ``TokenInformation``, durable when given a directory."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self._path = data_dir / TOKENS_FILE if data_dir is not None else None
        self._tokens: dict[str, TokenInformation] = {}
        if self._path is not None:
            document = read_json(self._path)
            for token_id, doc in (document or {}).get("tokens", {}).items():
                self._tokens[token_id] = _token_from_json(token_id, doc)

    def _save(self) -> None:
        if self._path is None:
            return
        document = {
            "version": 1,
            "tokens": {tid: _token_to_json(t) for tid, t in sorted(self._tokens.items())},
        }
        self._path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self._path, document, indent=1)

    def get(self, token_id: str) -> TokenInformation | None:
        return self._tokens.get(token_id)

    def tokens(self) -> list[TokenInformation]:
        """Every token, in the order they were issued (then by id)."""
        return sorted(self._tokens.values(), key=lambda t: (t.issue_timestamp_ms, t.token_id))

    def put(self, token: TokenInformation) -> None:
        """A new token or a new expiry (Kafka's DelegationTokenRecord)."""
        self._tokens[token.token_id] = token
        self._save()

    def remove_many(self, token_ids: list[str]) -> None:
        """Kafka's RemoveDelegationTokenRecord, several written once."""
        removed = [tid for tid in token_ids if self._tokens.pop(tid, None) is not None]
        if removed:
            self._save()
