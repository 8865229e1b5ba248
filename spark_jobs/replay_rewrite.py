"""What a replay must change in a captured request before a new broker can answer it.

A fresh broker assigns its own member ids, generation ids and producer ids, so a
request that repeats a captured one word for word would be answered UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION or UNKNOWN_PRODUCER_ID. The capture holds requests but not response
bodies, so the mapping is learned the only way it can be: a captured value seen for the
first time after an answer of the new broker is mapped to the value that answer gave.

* JoinGroup answers give a member id (also with MEMBER_ID_REQUIRED) and, on success, a
  generation. The next unmapped captured member id of that group is mapped to the
  member id learned; the next unmapped generation to the generation learned. The
  mapped ids then replace the captured ones in JoinGroup, SyncGroup (its own and,
  where known, the leader's assignments), Heartbeat, OffsetCommit and LeaveGroup.
* InitProducerId answers give a producer id and epoch. An idempotent producer's (no
  transactional id): the next unmapped captured producer id found in a Produce batch is
  mapped to what its connection (or, failing that, the task) was last answered, with the
  captured epoch it was seen at; epochs then stay in step (a captured epoch one above is
  one above on the new broker too). Producer id and epoch sit under the batch CRC, so it
  is recomputed. TxnOffsetCommit's member id and generation (v3+) are mapped as
  OffsetCommit's.
* A transactional producer is followed by its transactional id, which each of its
  requests names (Produce, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn,
  InitProducerId), so an answer to it cannot be taken by another producer's request on
  another connection (a client asks its coordinator and produces to the leaders). Its
  InitProducerId answers and, with transactions v2 (KIP-890 part 2), its EndTxn v5+
  answers (the epoch bumped at every end; a new producer id, epoch 0, once the epochs ran
  out) are kept as the id's pending (id, epoch) on the new broker. The next request of
  that transactional id naming a captured (id, epoch) it had not reached before (an id not
  mapped, or an epoch above the one its mapping was anchored at) anchors the captured id
  there: the capture holds no answers, so that request is where the captured answer
  shows. A request from before the answer (an epoch at or below the anchor) keeps the old
  anchor. The captured and the new cluster may so bump, fail, restart (KIP-360) or run
  out of epochs at different points and still agree from one transaction to the next.
* Share groups (KIP-932): ShareGroupHeartbeat's member epochs and ShareFetch's and
  ShareAcknowledge's share session epochs follow what the new broker answered
  (``replay_share_rewrite``).
* Fetch sessions (KIP-227): the answer to a fetch opening a session (id 0, epoch 0)
  gives the new broker's session id; the next unmapped captured session id on that
  connection is mapped to it. Epochs need no mapping: both sides count them the same
  way from the same opening fetch.

Member ids are unique strings, so the member map may be shared by all connections of a
replay task (a leader's SyncGroup then also rewrites the other members it knows);
generations are per group. Inter-broker requests (follower Fetch and
OffsetForLeaderEpoch, with a replica id >= 0; WriteTxnMarkers; a leader's
AddPartitionsToTxn v4+) are not replayed: the new
cluster's own brokers send their own, and a fake follower would move its ISR and high
watermark (``spark_jobs.traffic``). Client telemetry (KIP-714: GetTelemetrySubscriptions,
PushTelemetry) is not replayed either: it is the client's report of itself, with the
captured broker's instance and subscription ids. ``skip_reason`` says so; the replay
reports each as a skip, not an error.

Sans-IO and Spark-free, so the rules are tested without a broker or a JVM.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass, field
from typing import Any, Final

from protocol.record_batch import compute_crc, iter_batches
from spark_jobs.replay_share_rewrite import SHARE_APIS, ShareRewriter
from spark_jobs.traffic import (
    CLIENT_TELEMETRY_API_KEYS,
    SKIP_CLIENT_TELEMETRY,
    SKIP_INTER_BROKER,
    is_inter_broker,
    replica_id_of,
)

__all__ = [
    "FETCH",
    "INIT_PRODUCER_ID",
    "JOIN_GROUP",
    "PRODUCE",
    "ProducerMapping",
    "ReplayRewriter",
    "rewrite_producer_in_batches",
]

PRODUCE: Final = 0
FETCH: Final = 1
OFFSET_COMMIT: Final = 8
JOIN_GROUP: Final = 11
HEARTBEAT: Final = 12
LEAVE_GROUP: Final = 13
SYNC_GROUP: Final = 14
INIT_PRODUCER_ID: Final = 22
OFFSET_FOR_LEADER_EPOCH: Final = 23
ADD_PARTITIONS_TO_TXN: Final = 24
ADD_OFFSETS_TO_TXN: Final = 25
END_TXN: Final = 26
TXN_OFFSET_COMMIT: Final = 28

#: Transaction APIs naming a producer id and epoch at the top level.
_TXN_PRODUCER_APIS: Final = frozenset({ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT})
#: APIs naming a member of a group (and its generation).
_GROUP_APIS: Final = frozenset(
    {JOIN_GROUP, SYNC_GROUP, HEARTBEAT, OFFSET_COMMIT, LEAVE_GROUP, TXN_OFFSET_COMMIT}
)

#: APIs whose requests may need decoding (the others only get a new correlation id).
DECODE_APIS: Final = frozenset(
    {
        PRODUCE,
        FETCH,
        OFFSET_COMMIT,
        JOIN_GROUP,
        HEARTBEAT,
        LEAVE_GROUP,
        SYNC_GROUP,
        INIT_PRODUCER_ID,
        OFFSET_FOR_LEADER_EPOCH,
        ADD_PARTITIONS_TO_TXN,
        ADD_OFFSETS_TO_TXN,
        END_TXN,
        TXN_OFFSET_COMMIT,
        *SHARE_APIS,
    }
)
#: APIs whose responses teach the rewriter something.
LEARN_APIS: Final = frozenset({JOIN_GROUP, INIT_PRODUCER_ID, END_TXN, FETCH, *SHARE_APIS})

_PRODUCER_ID_POS: Final = 43  # int64, then the int16 epoch: both under the CRC
_PRODUCER = struct.Struct(">qh")
_CRC_POS: Final = 17
_UINT32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class ProducerMapping:
    """A captured producer id's counterpart on the new broker, learned when the
    captured id was seen at ``captured_epoch``: the new broker had then answered
    ``producer_id`` at ``epoch``."""

    captured_epoch: int
    producer_id: int
    epoch: int

    def map(self, captured_epoch: int) -> tuple[int, int]:
        """(producer id, epoch) on the new broker for the captured id at an epoch."""
        if captured_epoch < 0:
            return self.producer_id, captured_epoch
        return self.producer_id, self.epoch + (captured_epoch - self.captured_epoch)


def rewrite_producer_in_batches(
    records: bytes, mapping: dict[int, ProducerMapping]
) -> tuple[bytes, list[tuple[int, int]]]:
    """Batches with producer ids in ``mapping`` re-stamped (id, epoch) and their CRC
    recomputed; also the (producer id, epoch) found (id >= 0) that ``mapping`` lacks."""
    out: bytearray | None = None
    unknown: list[tuple[int, int]] = []
    for pos, header in iter_batches(records, allow_partial_tail=True):
        pid = header.producer_id
        if pid < 0:
            continue
        mapped = mapping.get(pid)
        if mapped is None:
            unknown.append((pid, header.producer_epoch))
            continue
        target = mapped.map(header.producer_epoch)
        if target == (pid, header.producer_epoch):
            continue
        if out is None:
            out = bytearray(records)
        _PRODUCER.pack_into(out, pos + _PRODUCER_ID_POS, target[0], target[1])
        crc = compute_crc(memoryview(out)[pos : pos + header.size])
        _UINT32.pack_into(out, pos + _CRC_POS, crc)
    return (records if out is None else bytes(out)), unknown


@dataclass
class _GroupState:
    """What one connection learned about one group."""

    learned_member_id: str | None = None
    learned_generation: int | None = None
    generations: dict[int, int] = field(default_factory=dict)


class ReplayRewriter:
    """Rewrites requests of the connections of one replay task (see module doc)."""

    def __init__(self) -> None:
        #: captured member id -> new member id (shared by the task's connections).
        self.member_ids: dict[str, str] = {}
        #: captured producer id -> its counterpart on the new broker.
        self.producers: dict[int, ProducerMapping] = {}
        self._learned_producer: dict[str, tuple[int, int]] = {}  # per connection
        self._groups: dict[tuple[str, str], _GroupState] = {}
        # A client may ask for its producer id on one connection and produce on another.
        self._last_learned_producer: tuple[int, int] | None = None
        # transactional id -> the (id, epoch) the new broker last answered it
        # (InitProducerId, EndTxn v5+) and no request of it has been anchored at yet.
        self._txn_pending: dict[str, tuple[int, int]] = {}
        # Fetch sessions, per connection: (connection, captured id) -> new id, and the
        # id the new broker gave the last session opened on the connection.
        self._fetch_sessions: dict[tuple[str, int], int] = {}
        self._learned_session: dict[str, int] = {}
        #: share groups' member ids and epochs, share session epochs
        self.share = ShareRewriter()

    # -- requests -------------------------------------------------------------------

    @staticmethod
    def skip_reason(api_key: int, request: Any, api_version: int | None = None) -> str | None:
        """Why a request is not to be replayed, or None."""
        if is_inter_broker(api_key, replica_id_of(request), api_version):
            return SKIP_INTER_BROKER
        if api_key in CLIENT_TELEMETRY_API_KEYS:
            return SKIP_CLIENT_TELEMETRY
        return None

    def rewrite(self, connection: str, api_key: int, request: Any) -> Any:
        """The request to send in place of the captured one (maybe the same object)."""
        if api_key == PRODUCE:
            return self._rewrite_produce(connection, request)
        if api_key == FETCH:
            return self._rewrite_fetch_session(connection, request)
        if api_key in SHARE_APIS:
            return self.share.rewrite(api_key, request)
        changes: dict[str, Any] = {}
        if api_key == INIT_PRODUCER_ID:
            # A re-initialisation (KIP-360) of an id never mapped here goes as captured.
            changes.update(self._producer_fields(connection, request, learn=False))
        elif api_key in _TXN_PRODUCER_APIS:
            changes.update(self._producer_fields(connection, request))
        elif api_key == ADD_PARTITIONS_TO_TXN:
            changes.update(self._add_partitions_fields(connection, request))
        group_id = getattr(request, "group_id", None)
        if group_id is None or api_key not in _GROUP_APIS:
            return dataclasses.replace(request, **changes) if changes else request
        state = self._group(connection, str(group_id))
        member_id = getattr(request, "member_id", None)
        if member_id:
            new_member = self._map_member(state, member_id)
            if new_member != member_id:
                changes["member_id"] = new_member
        for name in ("generation_id", "generation_id_or_member_epoch"):
            generation = getattr(request, name, None)
            if generation is not None and generation >= 0:
                new_generation = self._map_generation(state, int(generation))
                if new_generation != generation:
                    changes[name] = type(generation)(new_generation)
        if api_key == SYNC_GROUP and request.assignments:
            assignments = tuple(
                dataclasses.replace(a, member_id=self.member_ids[a.member_id])
                if a.member_id in self.member_ids
                else a
                for a in request.assignments
            )
            changes["assignments"] = assignments
        if api_key == LEAVE_GROUP and getattr(request, "members", None):
            changes["members"] = tuple(
                dataclasses.replace(m, member_id=self._map_member(state, m.member_id))
                if m.member_id
                else m
                for m in request.members
            )
        return dataclasses.replace(request, **changes) if changes else request

    def _group(self, connection: str, group_id: str) -> _GroupState:
        key = (connection, group_id)
        state = self._groups.get(key)
        if state is None:
            state = self._groups[key] = _GroupState()
        return state

    def _map_member(self, state: _GroupState, captured: str) -> str:
        mapped = self.member_ids.get(captured)
        if mapped is not None:
            return mapped
        if state.learned_member_id is not None and state.learned_member_id not in set(
            self.member_ids.values()
        ):
            self.member_ids[captured] = state.learned_member_id
            return state.learned_member_id
        return captured

    def _map_generation(self, state: _GroupState, captured: int) -> int:
        mapped = state.generations.get(captured)
        if mapped is not None:
            return mapped
        if state.learned_generation is not None:
            state.generations[captured] = state.learned_generation
            return state.learned_generation
        return captured

    def _map_producer(
        self,
        connection: str,
        pid: int,
        epoch: int,
        *,
        learn: bool = True,
        transactional_id: str | None = None,
    ) -> tuple[int, int]:
        """The new broker's (id, epoch) for a captured one; a transactional producer's
        first takes what was last answered to its transactional id (`_anchor`), other
        unmapped ids what this connection's (or, failing that, the task's) last
        non-transactional InitProducerId answered."""
        if pid < 0:
            return pid, epoch
        if transactional_id is not None:
            self._anchor(transactional_id, pid, epoch)
        mapped = self.producers.get(pid)
        if mapped is None:
            if not learn:
                return pid, epoch
            learned = self._learned_producer.get(connection, self._last_learned_producer)
            if learned is None:
                return pid, epoch
            mapped = self.producers[pid] = ProducerMapping(epoch, learned[0], learned[1])
        return mapped.map(epoch)

    def _anchor(self, transactional_id: str, pid: int, epoch: int) -> None:
        """Ties captured ``pid`` at ``epoch`` to what the new broker last answered
        ``transactional_id``, unless that request was from before the answer."""
        pending = self._txn_pending.get(transactional_id)
        if pending is None:
            return
        mapped = self.producers.get(pid)
        if mapped is not None and epoch <= mapped.captured_epoch:
            return
        self.producers[pid] = ProducerMapping(epoch, pending[0], pending[1])
        del self._txn_pending[transactional_id]

    def _producer_fields(
        self, connection: str, request: Any, *, learn: bool = True
    ) -> dict[str, Any]:
        """InitProducerId (KIP-360: naming its id), AddOffsetsToTxn, TxnOffsetCommit,
        EndTxn, a v4+ AddPartitionsToTxn transaction: the producer id and epoch."""
        pid = getattr(request, "producer_id", None)
        epoch = getattr(request, "producer_epoch", None)
        if pid is None or epoch is None or pid < 0:
            return {}
        txn = getattr(request, "transactional_id", None)
        new_pid, new_epoch = self._map_producer(
            connection, int(pid), int(epoch), learn=learn, transactional_id=txn
        )
        if (new_pid, new_epoch) == (pid, epoch):
            return {}
        return {"producer_id": type(pid)(new_pid), "producer_epoch": type(epoch)(new_epoch)}

    def _add_partitions_fields(self, connection: str, request: Any) -> dict[str, Any]:
        """AddPartitionsToTxn: top-level (v0-v3) or per transaction (v4+, a batch)."""
        transactions = getattr(request, "transactions", None)
        if transactions is None:
            pid = request.v3_and_below_producer_id
            epoch = request.v3_and_below_producer_epoch
            txn = request.v3_and_below_transactional_id
            new_pid, new_epoch = self._map_producer(
                connection, int(pid), int(epoch), transactional_id=txn
            )
            if (new_pid, new_epoch) == (pid, epoch):
                return {}
            return {
                "v3_and_below_producer_id": type(pid)(new_pid),
                "v3_and_below_producer_epoch": type(epoch)(new_epoch),
            }
        changed = tuple(
            dataclasses.replace(txn, **self._producer_fields(connection, txn))
            for txn in transactions
        )
        return {"transactions": changed}

    def _rewrite_fetch_session(self, connection: str, request: Any) -> Any:
        captured = int(getattr(request, "session_id", 0))
        if captured == 0:
            return request
        key = (connection, captured)
        new_id = self._fetch_sessions.get(key)
        if new_id is None:
            learned = self._learned_session.pop(connection, None)
            if learned is None:
                return request
            new_id = self._fetch_sessions[key] = learned
        return request if new_id == captured else dataclasses.replace(request, session_id=new_id)

    def _rewrite_produce(self, connection: str, request: Any) -> Any:
        txn = request.transactional_id
        topics = []
        changed = False
        for topic in request.topic_data:
            partitions = []
            for partition in topic.partition_data:
                records = partition.records
                if records:
                    if txn is not None and txn in self._txn_pending:
                        self._anchor_batches(txn, records)
                    new_records, unknown = rewrite_producer_in_batches(records, self.producers)
                    if unknown:
                        for pid, epoch in unknown:
                            self._map_producer(connection, pid, epoch, transactional_id=txn)
                        new_records, _ = rewrite_producer_in_batches(records, self.producers)
                    if new_records is not records:
                        partition = dataclasses.replace(partition, records=new_records)
                        changed = True
                partitions.append(partition)
            topics.append(dataclasses.replace(topic, partition_data=tuple(partitions)))
        if not changed:
            return request
        return dataclasses.replace(request, topic_data=tuple(topics))

    def _anchor_batches(self, transactional_id: str, records: bytes) -> None:
        """`_anchor` at the producer of a transactional Produce's batches."""
        for _, header in iter_batches(records, allow_partial_tail=True):
            if header.producer_id >= 0:
                self._anchor(transactional_id, header.producer_id, header.producer_epoch)

    # -- responses ------------------------------------------------------------------

    def learn(self, connection: str, api_key: int, request: Any, response: Any) -> None:
        """Remember what the new broker assigned in ``response`` to ``request``."""
        if api_key == JOIN_GROUP:
            state = self._group(connection, str(request.group_id))
            member_id = getattr(response, "member_id", "")
            if member_id:
                state.learned_member_id = str(member_id)
            if int(response.error_code) == 0 and response.generation_id >= 0:
                state.learned_generation = int(response.generation_id)
        elif api_key == FETCH:
            opening = getattr(request, "session_id", 0) == 0 and (
                getattr(request, "session_epoch", -1) == 0
            )
            new_id = int(getattr(response, "session_id", 0))
            if opening and new_id != 0:
                self._learned_session[connection] = new_id
        elif api_key in SHARE_APIS:
            self.share.learn(api_key, request, response)
        elif api_key == INIT_PRODUCER_ID and int(response.error_code) == 0:
            learned = (int(response.producer_id), int(response.producer_epoch))
            txn = getattr(request, "transactional_id", None)
            if txn is not None:
                self._txn_pending[str(txn)] = learned
            else:
                self._learned_producer[connection] = learned
                self._last_learned_producer = learned
        elif api_key == END_TXN and int(response.error_code) == 0:
            # v5+ (transactions v2): the producer id and the epoch the next transaction
            # uses; older versions answer none (and their epoch does not move).
            pid = int(getattr(response, "producer_id", -1))
            if pid >= 0:
                epoch = int(response.producer_epoch)
                self._txn_pending[str(request.transactional_id)] = (pid, epoch)
