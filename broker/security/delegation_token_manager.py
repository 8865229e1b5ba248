"""Delegation tokens' decisions (KIP-48): Kafka's ``DelegationTokenControlManager`` (create,
renew, expire, the expiry sweep) and the broker's ``DelegationTokenManager`` /
``DelegationTokenCache`` (HMACs, the SCRAM credentials a token logs in with, describe).

Theory of operation. ``delegation.token.secret.key`` turns tokens on: without it every
token API answers DELEGATION_TOKEN_AUTH_DISABLED, as Kafka's. A token's id is a random
Kafka ``Uuid`` string; its HMAC (the password a token logs in with, base64) is HmacSHA512
of the id's UTF-8 bytes keyed with the secret's UTF-8 bytes, computed on demand and never
stored. The timestamps are epoch milliseconds from the injected wall clock:

* create: ``max = now + min(delegation.token.max.lifetime.ms, the request's max lifetime
  when > 0)``, ``expiry = min(max, now + delegation.token.expiry.time.ms)``; renewers must
  be ``User`` principals (INVALID_PRINCIPAL_TYPE);
* renew and expire find the token by its HMAC (DELEGATION_TOKEN_NOT_FOUND), refuse one
  past its expiry or max (DELEGATION_TOKEN_EXPIRED) and any principal but the owner and
  the renewers (DELEGATION_TOKEN_OWNER_MISMATCH); renew sets ``expiry = min(max, now +
  min(expiry.time.ms, the period when > 0))``; expire with a negative period removes the
  token at once (the response carries the period itself as the timestamp, as Kafka's),
  else sets ``expiry = min(max, now + period)``;
* ``sweep`` (every ``delegation.token.expiry.check.interval.ms``, ``DelegationTokenExpiry``)
  removes the expired tokens with Kafka's log line.

A token logs in over SCRAM-SHA-256/512 with the ``tokenauth=true`` extension
(``scram.py``): user name = token id, password = base64(HMAC). Its credential is Kafka's
(``ScramFormatter``: 4096 iterations, a random salt), made at the first login and kept
until the token goes.

Differences from Kafka: an expired token that the sweep has not yet removed is refused at
login (Kafka lets it in with a session lifetime of 0, closed at its next request).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.security.delegation_token_store import DelegationTokenStore, TokenInformation
from broker.security.principal import USER_TYPE, KafkaPrincipal
from broker.security.scram import (
    MIN_ITERATIONS,
    ScramCredential,
    TokenLogin,
    generate_credential,
)
from broker.server.scheduler import PeriodicTask
from purgatory import Clock, SystemTimer

log = logging.getLogger("broker.security.delegation_tokens")


@dataclass(frozen=True, slots=True)
class TokenResult:
    """A controller decision: the error, and the token when it was made."""

    error: ErrorCode
    token: TokenInformation | None = None
    hmac: bytes = b""


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


class DelegationTokenManager:
    """The cluster's tokens and what may be done with them, on the injected wall clock."""

    def __init__(
        self,
        store: DelegationTokenStore,
        secret_key: str | None,
        max_lifetime_ms: int,
        expiry_time_ms: int,
        wall_clock: Clock,
        random_bytes: Callable[[int], bytes],
    ) -> None:
        self._store = store
        self._secret = secret_key.encode("utf-8") if secret_key else None
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms
        self._clock = wall_clock
        self._random_bytes = random_bytes
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    @property
    def enabled(self) -> bool:
        """Kafka's ``tokenAuthEnabled``: ``delegation.token.secret.key`` is set."""
        return self._secret is not None

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def hmac(self, token_id: str) -> bytes:
        """HmacSHA512(secret, token id), as Kafka's ``createHmac``."""
        assert self._secret is not None, "delegation tokens are disabled"
        return hmac.new(self._secret, token_id.encode("utf-8"), hashlib.sha512).digest()

    def _new_token_id(self) -> str:
        while True:  # Kafka's Uuid.randomUuid: never the zero id, never a leading '-'
            raw = self._random_bytes(16)
            text = kafka_uuid_string(uuid.UUID(bytes=raw, version=4))
            if not text.startswith("-") and any(raw):
                return text

    def _by_hmac(self, token_hmac: bytes) -> TokenInformation | None:
        for token in self._store.tokens():
            if hmac.compare_digest(self.hmac(token.token_id), token_hmac):
                return token
        return None

    # -- the controller's decisions ---------------------------------------------------

    def create(
        self,
        requester: KafkaPrincipal,
        owner: KafkaPrincipal,
        renewers: list[KafkaPrincipal],
        max_lifetime_ms: int,
    ) -> TokenResult:
        if not self.enabled:
            return TokenResult(ErrorCode.delegation_token_auth_disabled)
        if any(r.principal_type != USER_TYPE for r in renewers):
            return TokenResult(ErrorCode.invalid_principal_type)
        now = self.now_ms()
        lifetime = self.max_lifetime_ms
        if max_lifetime_ms > 0:
            lifetime = min(lifetime, max_lifetime_ms)
        max_timestamp = now + lifetime
        expiry = min(max_timestamp, now + self.expiry_time_ms)
        token = TokenInformation(
            self._new_token_id(),
            KafkaPrincipal(owner.principal_type, owner.name),
            KafkaPrincipal(requester.principal_type, requester.name),
            tuple(renewers),
            now,
            expiry,
            max_timestamp,
        )
        self._store.put(token)
        return TokenResult(ErrorCode.none, token, self.hmac(token.token_id))

    def _renewable(self, principal: KafkaPrincipal, token_hmac: bytes) -> TokenResult:
        if not self.enabled:
            return TokenResult(ErrorCode.delegation_token_auth_disabled)
        token = self._by_hmac(token_hmac)
        if token is None:
            return TokenResult(ErrorCode.delegation_token_not_found)
        if token.expired(self.now_ms()):
            return TokenResult(ErrorCode.delegation_token_expired)
        if not token.owner_or_renewer(principal):
            return TokenResult(ErrorCode.delegation_token_owner_mismatch)
        return TokenResult(ErrorCode.none, token)

    def renew(self, principal: KafkaPrincipal, token_hmac: bytes, period_ms: int) -> TokenResult:
        found = self._renewable(principal, token_hmac)
        if found.token is None:
            return found
        lifetime = self.expiry_time_ms
        if period_ms > 0:
            lifetime = min(lifetime, period_ms)
        token = found.token.with_expiry(min(found.token.max_timestamp_ms, self.now_ms() + lifetime))
        self._store.put(token)
        return TokenResult(ErrorCode.none, token)

    def expire(
        self, principal: KafkaPrincipal, token_hmac: bytes, period_ms: int
    ) -> tuple[ErrorCode, int]:
        """(error, the expiry timestamp the response carries)."""
        found = self._renewable(principal, token_hmac)
        if found.token is None:
            return found.error, -1
        if period_ms < 0:  # at once: the token goes, the answer is the period itself
            self._remove([found.token.token_id])
            return ErrorCode.none, period_ms
        token = found.token
        token = token.with_expiry(min(token.max_timestamp_ms, self.now_ms() + period_ms))
        self._store.put(token)
        return ErrorCode.none, token.expiry_timestamp_ms

    def sweep(self) -> list[str]:
        """Kafka's ``sweepExpiredDelegationTokens``: remove what has expired."""
        now = self.now_ms()
        expired = [t for t in self._store.tokens() if t.expired(now)]
        for token in expired:
            log.info(
                "Delegation token expired for token: %s for owner: %s", token.token_id, token.owner
            )
        self._remove([t.token_id for t in expired])
        return [t.token_id for t in expired]

    def _remove(self, token_ids: list[str]) -> None:
        self._store.remove_many(token_ids)
        for key in [k for k in self._credentials if k[0] in token_ids]:
            del self._credentials[key]

    # -- the broker's reads -----------------------------------------------------------

    def tokens(
        self, eligible: Callable[[TokenInformation], bool]
    ) -> list[tuple[TokenInformation, bytes]]:
        """The tokens ``eligible`` accepts, with their HMACs (DescribeDelegationToken)."""
        return [(t, self.hmac(t.token_id)) for t in self._store.tokens() if eligible(t)]

    def login(self, token_id: str, mechanism: str) -> TokenLogin | None:
        """A live token's SCRAM credential and owner; None: no such token (or expired)."""
        if not self.enabled:
            return None
        token = self._store.get(token_id)
        if token is None or token.expired(self.now_ms()):
            return None
        key = (token_id, mechanism)
        credential = self._credentials.get(key)
        if credential is None:
            password = base64.b64encode(self.hmac(token_id)).decode()
            credential = generate_credential(
                mechanism, password, self._random_bytes(32), MIN_ITERATIONS
            )
            self._credentials[key] = credential
        return TokenLogin(credential, token.owner.name, token.expiry_timestamp_ms)


class DelegationTokenExpiry:
    """The periodic sweep of expired tokens on a broker's scheduler timer (Kafka: the
    controller's task every ``delegation.token.expiry.check.interval.ms``)."""

    def __init__(self, timer: SystemTimer, manager: DelegationTokenManager, interval_ms: int):
        self._task = PeriodicTask(timer, "delegation-token-expiry", interval_ms, manager.sweep)

    async def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        self._task.stop()
