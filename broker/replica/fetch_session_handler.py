"""A follower's fetch session with one leader (KIP-227): Kafka's ``FetchSessionHandler``.

The ``ReplicaFetcher`` says, before each Fetch, which partitions it wants and from where
(``PartitionData``); the handler says what the request carries:

- a *full* fetch (every partition wanted) while there is no session: the first one
  (session id 0, epoch 0), or after the session was lost;
- else an *incremental* one: the session id and its next epoch, only the partitions
  added or whose data changed (fetch offset, log start, epoch...), and the ones no longer
  wanted as forgotten.

``handle_response`` reads the answer: a full answer with a session id opens the session
(epoch 1 next); an incremental one moves the epoch on; session id 0 means no session
(full fetches again). FETCH_SESSION_ID_NOT_FOUND starts over with session id 0; any other
session error (INVALID_FETCH_SESSION_EPOCH...) or an answer naming partitions it should
not, starts over with a full fetch that also closes the old session (its id, epoch 0),
and the answer is not used. ``handle_error`` (the connection failed: a leader restart, a
new connection) does the same. Partitions of an incremental answer are the session's
that changed; the others have nothing new.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from broker.replica.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from broker.replica.partition import TopicPartition

__all__ = ["FetchRequestData", "FetchSessionHandler", "PartitionData"]

log = logging.getLogger("broker.replica.fetcher")


class PartitionData(NamedTuple):
    """What a Fetch asks of one partition; a change of any field is sent again.

    A named tuple, not a frozen dataclass: every follower fetch builds one per partition
    and compares it with the session's, and a tuple is built and compared in C."""

    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """What the next Fetch carries: ``to_send`` (all, for a full fetch), ``to_forget``."""

    to_send: dict[TopicPartition, PartitionData]
    to_forget: list[TopicPartition]
    session_id: int
    epoch: int

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """One follower's session with one leader (see the module doc)."""

    def __init__(self, leader_id: int) -> None:
        self.leader_id = leader_id
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.session_partitions: dict[TopicPartition, PartitionData] = {}

    @property
    def is_full(self) -> bool:
        """Whether the next fetch is a full one."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def build(self, wanted: dict[TopicPartition, PartitionData]) -> FetchRequestData:
        """The next Fetch for the partitions ``wanted`` (the session becomes them)."""
        if self.is_full:
            self.session_partitions = dict(wanted)
            return FetchRequestData(dict(wanted), [], self.session_id, self.epoch)
        session = self.session_partitions
        to_send: dict[TopicPartition, PartitionData] = {}
        to_forget: list[TopicPartition] = []
        for tp in list(session):
            data = wanted.get(tp)
            if data is None:
                del session[tp]
                to_forget.append(tp)
            elif data != session[tp]:
                session[tp] = data
                to_send[tp] = data
        for tp, data in wanted.items():
            if tp not in session:
                session[tp] = data
                to_send[tp] = data
        return FetchRequestData(to_send, to_forget, self.session_id, self.epoch)

    def handle_response(
        self, error: ErrorCode, session_id: int, partitions: set[TopicPartition]
    ) -> bool:
        """Learn from an answer to the last ``build``; False: do not use its data."""
        if error is not ErrorCode.none:
            log.info("leader %d refused fetch session %s: %s", self.leader_id, self, error)
            if error is ErrorCode.fetch_session_id_not_found:
                self._start_over(INVALID_SESSION_ID)
            else:
                self._start_over(self.session_id)
            return False
        session = self.session_partitions
        if self.is_full:
            if partitions != session.keys():
                log.info(
                    "leader %d sent an invalid full fetch response: extra %s, omitted %s",
                    self.leader_id,
                    sorted(partitions - session.keys()),
                    sorted(session.keys() - partitions),
                )
                self._start_over(INVALID_SESSION_ID)
                return False
            if session_id == INVALID_SESSION_ID:
                self._start_over(INVALID_SESSION_ID)
            else:
                self.session_id = session_id  # a new session
                self.epoch = next_epoch(INITIAL_EPOCH)
            return True
        if not partitions <= session.keys():
            log.info(
                "leader %d sent an invalid incremental fetch response: extra %s",
                self.leader_id,
                sorted(partitions - session.keys()),
            )
            self._start_over(self.session_id)
            return False
        if session_id == INVALID_SESSION_ID:
            self._start_over(INVALID_SESSION_ID)  # the leader closed the session
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """The Fetch failed (connection lost): close the session, open a new one."""
        self._start_over(self.session_id)

    def _start_over(self, session_id: int) -> None:
        """A full fetch next; one naming ``session_id`` also closes that session."""
        self.session_id = session_id
        self.epoch = INITIAL_EPOCH

    def __repr__(self) -> str:
        return (
            f"FetchSessionHandler(leader={self.leader_id}, session_id={self.session_id}, "
            f"epoch={self.epoch}, partitions={len(self.session_partitions)})"
        )
