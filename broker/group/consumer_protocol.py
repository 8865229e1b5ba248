"""Just enough of the consumer protocol to know which topics a consumer group reads.

Kafka parses each member's subscription (``ConsumerProtocolSubscription``) for groups of
protocol type ``consumer``, so that OffsetDelete can refuse to delete offsets of a topic
the group is consuming and offset expiry can spare them. Every version of that schema
starts with ``version: int16, topics: [string]`` (non-flexible), which is all we read;
anything that does not parse means "unknown", and callers then play safe.
"""

from __future__ import annotations

import struct

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
