"""What the SASL clients and their admin saw (`simulation.clients.sasl_app`), for their checks.

Times are the simulated loop's (virtual seconds), appended in the run's seeded order, so the
record is deterministic and part of the digest.

- `SaslSend`: one Produce of the SASL client (one record, a value never sent again), when it
  was sent and answered, and how (an error's name, ``none``, or `NO_ANSWER`);
- `SaslLogin`: one authentication on a new connection: which client, mechanism, whether its
  password was the right one, the outcome, and -- for a refused one -- whether a request on
  that connection was answered afterwards (it must never be: Kafka closes it);
- `ForbiddenAsk`: one Produce or Fetch on the topic the principal has no ACL for, answered;
- the revocation windows: from the moment the admin's DeleteAcls of the client's WRITE ACL
  was *answered* (the ACL is certainly gone) to the moment its CreateAcls was first *sent*
  (it may be back from then on). A request sent and answered inside a window was certainly
  judged without the ACL.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

#: The outcome of a request whose answer never came (the connection broke or timed out).
NO_ANSWER = "no answer"


@dataclass(frozen=True, slots=True)
class SaslSend:
    topic: str
    partition: int
    value: bytes
    sent_s: float
    answered_s: float  # math.inf: no answer
    error: str  # "none", an error code's name, or NO_ANSWER
    offset: int | None = None

    def describe(self) -> str:
        at = "" if self.offset is None else f"@{self.offset}"
        answered = "never" if math.isinf(self.answered_s) else f"{self.answered_s:.3f}s"
        return (
            f"Produce {self.value!r} to {self.topic}-{self.partition} sent {self.sent_s:.3f}s, "
            f"answered {answered}: {self.error}{at}"
        )


@dataclass(frozen=True, slots=True)
class SaslLogin:
    client: str
    mechanism: str
    right_password: bool
    at_s: float
    outcome: str  # "none" (a session), an error code's name, or NO_ANSWER
    served_after: bool = False  # a refused login's connection answered a later request

    def describe(self) -> str:
        password = "right" if self.right_password else "wrong"
        after = ", then a Metadata request was ANSWERED" if self.served_after else ""
        return (
            f"{self.client} {self.mechanism} ({password} password) at {self.at_s:.3f}s: "
            f"{self.outcome}{after}"
        )


@dataclass(frozen=True, slots=True)
class ForbiddenAsk:
    api: str  # "Produce" or "Fetch"
    broker: int
    sent_s: float
    error: str

    def describe(self) -> str:
        return f"{self.api} to broker {self.broker} at {self.sent_s:.3f}s: {self.error}"


@dataclass
class SaslEvents:
    topic: str = ""
    forbidden_topic: str = ""
    principal: str = ""
    sends: list[SaslSend] = field(default_factory=list)
    logins: list[SaslLogin] = field(default_factory=list)
    forbidden: list[ForbiddenAsk] = field(default_factory=list)
    #: (DeleteAcls answered, CreateAcls first sent); the end is math.inf if never re-added
    revoked: list[tuple[float, float]] = field(default_factory=list)
    #: what the SASL client's consumer read: (partition, offset, value)
    reads: list[tuple[int, int, bytes]] = field(default_factory=list)

    def revoked_during(self, start_s: float, end_s: float) -> tuple[float, float] | None:
        """The revocation window that holds [start_s, end_s], if one does."""
        for window in self.revoked:
            if window[0] <= start_s and end_s <= window[1]:
                return window
        return None

    def digest_update(self, h: hashlib._Hash) -> None:
        h.update(
            repr(
                [(s.partition, s.value, s.error, s.offset) for s in self.sends]
                + [(lg.client, lg.mechanism, lg.outcome, lg.served_after) for lg in self.logins]
                + [(f.api, f.broker, f.error) for f in self.forbidden]
                + [self.revoked, len(self.reads)]
            ).encode()
        )
