"""Kafka's `KafkaPrincipal`: the identity an authenticated connection carries.

Kafka writes a principal as ``type:name`` (``User:alice``); an unauthenticated connection is
``User:ANONYMOUS``. ACLs, quotas (the ``user`` entity) and the capture read it from the
request's `ConnectionInfo`. A connection that logged in with a delegation token carries
its owner's principal, marked ``token_authenticated`` (no token APIs over it, KIP-48).
"""

from __future__ import annotations

from dataclasses import dataclass, field

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    #: Kafka's ``tokenAuthenticated``: logged in with a delegation token (SCRAM with
    #: ``tokenauth=true``). Not part of equality, as in Kafka's ``equals``.
    token_authenticated: bool = field(default=False, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> ``KafkaPrincipal("User", "alice")`` (Kafka's SecurityUtils)."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(
                f"Expected a string in format principalType:principalName but got {text}"
            )
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
