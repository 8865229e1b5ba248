"""Share sessions (KIP-932): what ShareFetch and ShareAcknowledge remember between requests.

A share session belongs to one member of one share group (Kafka's ShareSessionKey:
group id and member id) and holds the partitions its fetches read and its epoch. The
client sends ``ShareSessionEpoch`` 0 to open a session (a full request naming the
partitions, without acknowledgements; an existing session of the member is replaced),
then each next epoch in turn (1, 2, ... wrapping to 1 after Integer.MAX_VALUE), adding
partitions and forgetting others incrementally; -1 closes it. Kafka's errors:
SHARE_SESSION_NOT_FOUND for an epoch other than 0 without a session,
INVALID_SHARE_SESSION_EPOCH for the wrong epoch (or a ShareAcknowledge with 0, which
cannot open one), SHARE_SESSION_LIMIT_REACHED when ``group.share.max.share.sessions``
are open.

A session also ends when the connection that opened it closes (Kafka 4.1's
``ShareSessionCache`` connection-disconnect listener): ``remove_connection``.

Differences from Kafka: one cache, not sharded.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

ShareSessionKey = tuple[str, str]  # (group id, member id)
#: (topic id, partition) -> topic name, in the order the session learnt them
SessionPartitions = dict[tuple[uuid.UUID, int], str]


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class ShareSession:
    key: ShareSessionKey
    epoch: int
    partitions: SessionPartitions = field(default_factory=dict)
    creation_ms: int = 0
    last_used_ms: int = 0
    connection_id: str | None = None


class ShareSessionCache:
    """The broker's share sessions, at most ``max_entries``."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._sessions: dict[ShareSessionKey, ShareSession] = {}
        self._by_connection: dict[str, set[ShareSessionKey]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: ShareSessionKey) -> ShareSession | None:
        return self._sessions.get(key)

    def remove(self, key: ShareSessionKey) -> ShareSession | None:
        session = self._sessions.pop(key, None)
        if session is not None and session.connection_id is not None:
            keys = self._by_connection.get(session.connection_id)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_connection[session.connection_id]
        return session

    def remove_connection(self, connection_id: str) -> list[ShareSessionKey]:
        """The connection closed: its sessions go; their keys."""
        keys = list(self._by_connection.pop(connection_id, ()))
        for key in keys:
            self._sessions.pop(key, None)
        return keys

    def maybe_create(
        self,
        key: ShareSessionKey,
        partitions: SessionPartitions,
        now_ms: int,
        connection_id: str | None = None,
    ) -> ShareSession | None:
        """A new session at epoch 1 (the next request's); None when the cache is full."""
        if key not in self._sessions and len(self._sessions) >= self.max_entries:
            return None
        self.remove(key)
        session = ShareSession(
            key, next_epoch(INITIAL_EPOCH), dict(partitions), now_ms, now_ms, connection_id
        )
        self._sessions[key] = session
        if connection_id is not None:
            self._by_connection.setdefault(connection_id, set()).add(key)
        return session

    def check_epoch(
        self, key: ShareSessionKey, epoch: int
    ) -> tuple[ErrorCode, ShareSession | None]:
        """The session a request with ``epoch`` (not 0) continues, or Kafka's error."""
        session = self._sessions.get(key)
        if session is None:
            return ErrorCode.share_session_not_found, None
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return ErrorCode.invalid_share_session_epoch, None
        return ErrorCode.none, session
