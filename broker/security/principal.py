"""Kafka's `KafkaPrincipal`: the identity an authenticated connection carries.

Kafka writes a principal as ``type:name`` (``User:alice``); an unauthenticated connection is
``User:ANONYMOUS``. ACLs, quotas (the ``user`` entity) and the capture read it from the
request's `ConnectionInfo`.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

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
