"""The broker's one source of random ids, handed down by the composition root.

Kafka draws its ids from ``Uuid.randomUuid()`` (cluster ids, topic ids, member ids, a log
directory's ``-future``/``-delete`` suffix) and fetch session ids from a ``Random``. Here
every one of them comes from an `IdSource` that `MiniKafka` builds: `IdSource.system()`
(the operating system's entropy, as Kafka) when serving, `IdSource.seeded(seed)` in a
simulation, where the same seed then gives the same ids, run after run. SCRAM's server
nonces, the salts of generated credentials and delegation token ids (Kafka's
``SecureRandom``) come from `IdSource.random_bytes` too, so a simulated SASL login repeats
with its seed. Nothing in ``broker/`` calls ``uuid.uuid4()``, ``os.urandom``, ``secrets`` or
the module-level ``random`` (a ruff rule bans them).
"""

from __future__ import annotations

import random
import uuid


class IdSource:
    """UUIDs, hex tokens and a `random.Random`, all from one generator."""

    def __init__(self, rng: random.Random) -> None:
        #: For what wants a generator (fetch session ids): the same stream as the ids.
        self.rng = rng

    @classmethod
    def system(cls) -> IdSource:
        """The operating system's entropy (``os.urandom``), as Kafka's ``randomUuid``."""
        return cls(random.SystemRandom())

    @classmethod
    def seeded(cls, seed: int | str) -> IdSource:
        """A reproducible stream: the simulation's."""
        return cls(random.Random(f"{seed}/ids"))

    def uuid4(self) -> uuid.UUID:
        """A version-4 UUID (random bits, the version and variant set as ``uuid4`` sets them)."""
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def member_id(self) -> str:
        """The uuid part of a member id (Kafka's ``<client.id>-<uuid>``)."""
        return str(self.uuid4())

    def random_bytes(self, n: int) -> bytes:
        """``n`` random bytes: SCRAM nonces and salts, token ids (Kafka's ``SecureRandom``);
        `IdSource.system`'s are the operating system's entropy (``os.urandom``)."""
        return self.rng.randbytes(n)

    def hex(self, chars: int = 32) -> str:
        """``chars`` random hex digits (a cluster id's suffix, a directory's tag)."""
        return self.uuid4().hex[:chars]
