"""Schema-driven request frames for every API and version a broker serves, mutated.

A seeded generator: it encodes a well-formed request of each (api key, version) the
broker advertises — every field filled, or every nullable field null, from kio's own
schema (``kio_samples``) — then breaks some of them the ways a hostile or buggy client
would: bit flips, truncation, a length prefix that lies, array counts that are huge or
negative, bytes appended. The same seed gives the same frames, so a failure replays.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator, Sequence

from protocol.api_registry import ApiSpec
from protocol.builders import request_builder
from protocol.client import ClientConnection
from testkit.kio_samples import sample

MUTATIONS = (
    "intact",
    "bit_flips",
    "truncate",
    "length_lie",
    "huge_count",
    "negative_count",
    "append_garbage",
    "random_bytes",
)


def well_formed(specs: Sequence[ApiSpec]) -> list[tuple[int, int, bytes]]:
    """One framed request (length prefix included) per API version, dense and sparse."""
    frames: list[tuple[int, int, bytes]] = []
    client = ClientConnection("fuzz")
    for spec in specs:
        for version in range(spec.min_version, spec.max_version + 1):
            builder = request_builder(spec.api_key, version)
            for sparse in (False, True):
                try:
                    body = sample(builder, builder.payload_class, sparse)
                    data = client.send(spec.api_key, version, body, expect_response=False).data
                except Exception:  # a schema our sampler cannot fill: skip it
                    continue
                frames.append((spec.api_key, version, data))
    return frames


def mutate(frame: bytes, how: str, rng: random.Random) -> bytes:
    """``frame`` (length prefix included) broken in one way."""
    body = bytearray(frame[4:])
    if how == "intact" or not body:
        return frame
    if how == "bit_flips":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(body))
            body[i] ^= 1 << rng.randrange(8)
    elif how == "truncate":
        body = body[: rng.randrange(len(body))]
    elif how == "length_lie":
        lie = rng.choice([len(body) + rng.randint(1, 64), max(len(body) - 3, 0), -1, 2**31 - 1])
        return struct.pack(">i", lie) + bytes(body)
    elif how in ("huge_count", "negative_count"):
        value = rng.choice([2**31 - 1, 10**6]) if how == "huge_count" else rng.choice([-1, -2])
        if len(body) > 12:
            i = rng.randrange(8, len(body) - 3)
            struct.pack_into(">i", body, i, value)
    elif how == "append_garbage":
        body += rng.randbytes(rng.randint(1, 64))
    elif how == "random_bytes":
        body = bytearray(body[:8]) + rng.randbytes(rng.randint(0, 128))
    return struct.pack(">i", len(body)) + bytes(body)


def fuzzed(specs: Sequence[ApiSpec], seed: int, count: int) -> Iterator[tuple[str, bytes]]:
    """``count`` frames: (mutation, bytes), cycling over every API version."""
    rng = random.Random(seed)
    base = well_formed(specs)
    for i in range(count):
        _key, _version, frame = base[i % len(base)]
        how = rng.choice(MUTATIONS)
        yield how, mutate(frame, how, rng)
