"""Encoded answers a broker gives over and over, kept until the cluster changes.

A Kafka broker answers Metadata from its MetadataCache and encodes each answer; its
compiled serializer makes that cheap. In Python, building the kio messages and encoding
them is most of what a Metadata request costs (about 20 µs of 28 for one topic), and
clients ask the same question again and again: every producer and consumer refreshes its
metadata, every connection starts with ApiVersions. So the answers that depend only on
the request and on the cluster metadata are built and encoded once, and served as bytes
(``protocol.codec.EncodedResponse``) until ``ClusterMetadata.version`` moves.

An answer is cached only when the cluster did not change while it was built (a Metadata
request may create a topic): ``put`` is given the version read before building.
"""

from __future__ import annotations

from collections.abc import Hashable

from broker.cluster.cluster_metadata import ClusterMetadata
from protocol.codec import EncodedResponse

#: Enough for every distinct question a few hundred clients ask; beyond it the cache
#: starts over rather than grow with whatever keys a client invents.
MAX_ENTRIES = 1024


class ResponseCache:
    """One broker's cached answers, keyed by whatever determines each answer."""

    __slots__ = ("_cluster", "_entries", "_max_entries", "_version")

    def __init__(self, cluster: ClusterMetadata, max_entries: int = MAX_ENTRIES) -> None:
        self._cluster = cluster
        self._entries: dict[Hashable, EncodedResponse] = {}
        self._max_entries = max_entries
        self._version = cluster.version

    def get(self, key: Hashable) -> EncodedResponse | None:
        """The answer cached for ``key`` if the cluster has not changed since."""
        if self._version != self._cluster.version:
            self._entries.clear()
            self._version = self._cluster.version
            return None
        return self._entries.get(key)

    def put(self, key: Hashable, answer: EncodedResponse, built_at_version: int) -> None:
        """Keep ``answer`` if the cluster is still as it was when it was built."""
        version = self._cluster.version
        if built_at_version != version:
            return
        if self._version != version:
            self._entries.clear()
            self._version = version
        elif len(self._entries) >= self._max_entries:
            self._entries.clear()
        self._entries[key] = answer

    def __len__(self) -> int:
        return len(self._entries)
