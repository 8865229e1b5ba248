"""The consumer protocol embedded in the classic group APIs (Kafka's ``ConsumerProtocol``).

Kafka parses each member's subscription (``ConsumerProtocolSubscription``) for groups of
protocol type ``consumer``, so that OffsetDelete can refuse to delete offsets of a topic
the group is consuming and offset expiry can spare them. Every version of that schema
starts with ``version: int16, topics: [string]`` (non-flexible), which is all
``subscription_topics`` reads; anything that does not parse means "unknown", and callers
then play safe.

The online migration between classic and consumer groups needs the whole schema: a
classic member of a consumer group sends its subscription (v0-v3: owned partitions,
generation, rack) in JoinGroup and receives a ``ConsumerProtocolAssignment`` from the
server-side assignor in SyncGroup (``decode_subscription``, ``encode_assignment``,
``decode_assignment``). Hand-written over ``struct`` with every length checked against the
bytes there are, so a peer's bad metadata is refused without allocating what it claims.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscription_topics(metadata: bytes) -> set[str] | None:
    """Topics named in a consumer subscription, or ``None`` if the bytes do not parse."""
    try:
        (version,) = struct.unpack_from(">h", metadata, 0)
        if version < 0:
            return None
        (count,) = struct.unpack_from(">i", metadata, 2)
        if count < 0:
            return None
        pos = 6
        topics: set[str] = set()
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if length < 0 or pos + length > len(metadata):
                return None
            topics.add(metadata[pos : pos + length].decode("utf-8"))
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def encode_subscription(topics: list[str], user_data: bytes | None = None) -> bytes:
    """A version-0 subscription; for tests and for tools that fake a consumer."""
    out = bytearray(struct.pack(">hi", 0, len(topics)))
    for topic in topics:
        raw = topic.encode("utf-8")
        out += struct.pack(">h", len(raw)) + raw
    if user_data is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(user_data)) + user_data
    return bytes(out)


# --------------------------------------------------------------- the whole schema
# Kafka's ConsumerProtocolSubscription (v0-v3) and ConsumerProtocolAssignment (v0-v3),
# which a classic member of a KIP-848 consumer group sends in JoinGroup and receives in
# SyncGroup (``consumer/classic_members.py``). Non-flexible; every read is bounded by the
# bytes there are, so a peer's bad bytes give ``None``, never an allocation.


@dataclass(frozen=True)
class Subscription:
    """A decoded ConsumerProtocolSubscription (fields of later versions at defaults)."""

    version: int
    topics: tuple[str, ...]
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _unpack(self, fmt: str, size: int) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(value)

    def int16(self) -> int:
        return self._unpack(">h", 2)

    def int32(self) -> int:
        return self._unpack(">i", 4)

    def count(self, item_size: int) -> int:
        n = self.int32()
        if n < 0 or self.pos + n * item_size > len(self.data):
            raise ValueError("bad array length")
        return n

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise ValueError("bad string length")
        self.pos += n
        return self.data[self.pos - n : self.pos].decode("utf-8")

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise ValueError("null string")
        return s

    def skip_bytes(self) -> None:
        n = self.int32()
        if n > 0:
            if self.pos + n > len(self.data):
                raise ValueError("bad bytes length")
            self.pos += n

    def topic_partitions(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        out = []
        for _ in range(self.count(6)):
            topic = self.string()
            out.append((topic, tuple(self.int32() for _ in range(self.count(4)))))
        return tuple(out)


def protocol_version(metadata: bytes) -> int:
    """The version an embedded consumer protocol message starts with (0 if unreadable)."""
    if len(metadata) < 2:
        return 0
    return max(int(struct.unpack_from(">h", metadata, 0)[0]), 0)


def decode_subscription(metadata: bytes) -> Subscription | None:
    """ConsumerProtocolSubscription; a version above 3 is read as 3 (Kafka reads the
    fields it knows); None when the bytes do not parse."""
    try:
        r = _Bytes(bytes(metadata))
        version = r.int16()
        if version < 0:
            return None
        topics = tuple(r.string() for _ in range(r.count(2)))
        r.skip_bytes()  # user data
        owned: tuple[tuple[str, tuple[int, ...]], ...] = ()
        generation_id, rack_id = -1, None
        if version >= 1:
            owned = r.topic_partitions()
        if version >= 2:
            generation_id = r.int32()
        if version >= 3:
            rack_id = r.nullable_string()
        return Subscription(version, topics, owned, generation_id, rack_id)
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    """ConsumerProtocolAssignment (the same layout in v0-v3), no user data; topics and
    partitions sorted."""
    out = bytearray(struct.pack(">hi", min(max(version, 0), 3), len(partitions)))
    for topic in sorted(partitions):
        raw = topic.encode("utf-8")
        ps = sorted(partitions[topic])
        out += struct.pack(">h", len(raw)) + raw + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    out += struct.pack(">i", -1)
    return bytes(out)


def decode_assignment(data: bytes) -> dict[str, list[int]] | None:
    """ConsumerProtocolAssignment's partitions; ``{}`` for empty bytes (a member that
    has none yet), None when they do not parse."""
    if not data:
        return {}
    try:
        r = _Bytes(bytes(data))
        if r.int16() < 0:
            return None
        return {topic: list(ps) for topic, ps in r.topic_partitions()}
    except (struct.error, ValueError, UnicodeDecodeError):
        return None
