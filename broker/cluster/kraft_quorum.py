"""The simulated KRaft controller quorum that DescribeQuorum (key 55) describes.

Kafka 4 runs its metadata as a Raft log, ``__cluster_metadata`` partition 0, replicated
by the controller quorum: one leader (the active controller) and voters that fetch from
it, brokers fetching as observers. ``kafka-metadata-quorum.sh describe --status`` and
``--replication`` read it with DescribeQuorum: the leader id and epoch, the high
watermark, and each voter's and observer's log end offset and last fetch / caught-up
timestamps (the leader's wall clock, epoch milliseconds).

Here every broker shares one ``ClusterMetadata`` in memory, so the quorum is a view of
it (Kafka's LeaderState, ReplicaState), held by the ``Controller`` (``controller.quorum``),
with the wall clock injected:

- **Voters.** ``controller.quorum.voters`` (``id@host:port,...``, Kafka's static quorum)
  names them. Unset — Kafka 4's default, a dynamic quorum (KIP-853) found through
  ``controller.quorum.bootstrap.servers`` — every simulated broker is a combined-mode
  voter (``process.roles=broker,controller``, node id = broker id), as
  ``kafka-storage.sh format --standalone`` then ``add-controller`` would make them.
  ``controller.quorum.bootstrap.servers`` (in Kafka's stock server.properties) stays
  one of the ignored keys of a properties file: the voters are the brokers. A
  configured voter that is not a simulated broker never fetches (log end -1); brokers
  that are not voters are observers.
- **Leader and epoch.** The leader is the active controller (the metadata's
  ``controller_id``, the lowest live broker), or the lowest live voter when that is not
  a voter; the epoch starts at 1 and goes up by one each time the leader changes.
- **Log.** The metadata log's end offset is the metadata's ``version`` (one record per
  change a client could see). A live voter or observer fetches it continuously (same
  process), so it has the log end and fetched "now"; a stopped one keeps what it had
  when it stopped (``on_broker_stopped``, told by ``MiniKafka.stop_broker``) and shows
  as lagging.
  The high watermark follows the log end while a majority of voters is alive, and
  stays where it was otherwise (no majority, no commit).

- **Voter changes** (KIP-853, AddRaftVoter / RemoveRaftVoter, ``kafka-metadata-quorum.sh
  add-controller / remove-controller``): only on a dynamic quorum (``kraft.version`` 1,
  no ``controller.quorum.voters``), one at a time. A change is a VotersRecord appended
  to the log; it is pending until the high watermark passes it (a majority of the new
  voter set alive), and another change meanwhile is REQUEST_TIMED_OUT. The first change
  freezes the voter set (every broker, until then) into an explicit one. Each node's
  directory id is fixed by the cluster id and the node id (``directory_id``): voters
  are named by id *and* directory id, as Kafka's ReplicaKey. The errors and messages
  are Kafka's (``AddVoterHandler``, ``RemoveVoterHandler``).

Differences from Kafka: no Raft elections, fetches or snapshots; the timestamps are the
injected wall clock at the moment of the DescribeQuorum (or of the stop), not of real
fetches; a node's directory id is derived, not read from its meta.properties; a voter to
add must be a live broker of this cluster (there are no separate controller processes).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from broker import real_clock
from broker.cluster.cluster_metadata import ClusterMetadata

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
NO_LEADER = -1
UNKNOWN = -1


def parse_quorum_voters(value: str) -> dict[int, tuple[str, int]]:
    """``controller.quorum.voters`` as Kafka's QuorumConfig parses it: ``id@host:port``
    entries, comma-separated; raises ValueError naming the bad entry."""
    voters: dict[int, tuple[str, int]] = {}
    for raw in value.split(","):
        entry = raw.strip()
        if not entry:
            continue
        node, at, address = entry.partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not colon or not host:
            raise ValueError(f"Invalid voter {entry!r}: the format is {{id}}@{{host}}:{{port}}")
        try:
            node_id, port_number = int(node), int(port)
        except ValueError:
            raise ValueError(f"Invalid voter {entry!r}: id and port must be numbers") from None
        if node_id < 0 or not 0 <= port_number <= 65535:
            raise ValueError(f"Invalid voter {entry!r}: id or port out of range")
        voters[node_id] = (host.strip("[]"), port_number)
    return voters


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """Kafka's LeaderState.ReplicaState, as DescribeQuorum shows it."""

    replica_id: int
    log_end_offset: int = UNKNOWN
    last_fetch_timestamp: int = UNKNOWN
    last_caught_up_timestamp: int = UNKNOWN


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[ReplicaState]
    observers: list[ReplicaState]
    #: voter id -> (host, port): DescribeQuorum v2's nodes (listener "CONTROLLER")
    nodes: dict[int, tuple[str, int]] = field(default_factory=dict)
    #: node id -> its metadata log directory id (DescribeQuorum v2's replica_directory_id)
    directory_ids: dict[int, uuid.UUID] = field(default_factory=dict)


#: The listener voters are reached on (Kafka's default controller listener name here).
CONTROLLER_LISTENER = "CONTROLLER"
_DIRECTORY_NAMESPACE = uuid.UUID("6b61666b-612d-6d65-7461-646174612d31")


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def replica_key(node_id: int, directory_id: uuid.UUID | None) -> str:
    """Kafka's ``ReplicaKey.toString``, as its voter-change messages print it."""
    directory = f"Optional[{kafka_uuid(directory_id)}]" if directory_id else "Optional.empty"
    return f"ReplicaKey(id={node_id}, directoryId={directory})"


@dataclass(frozen=True, slots=True)
class VoterChangeResult:
    error: ErrorCode
    message: str | None = None


class KRaftQuorum:
    """The cluster's one simulated controller quorum (shared, like the metadata)."""

    def __init__(
        self,
        metadata: ClusterMetadata,
        voters: Mapping[int, tuple[str, int]] | None = None,
        wall_clock_ms: Callable[[], int] = real_clock.wall_clock_ms,
    ) -> None:
        self.metadata = metadata
        self._configured_voters = dict(voters or {})
        self.wall_clock_ms = wall_clock_ms
        self._states: dict[int, ReplicaState] = {}
        self._leader_id = NO_LEADER
        self._epoch = 0
        self._high_watermark = 0
        # KIP-853: the voter set once a change made it explicit (id -> CONTROLLER address),
        # the VotersRecords appended (on top of the metadata's records), and where the last
        # one is in the log.
        self._dynamic_voters: dict[int, tuple[str, int]] | None = None
        self._voter_records = 0
        self._last_voter_change = -1

    @property
    def kraft_version(self) -> int:
        """``kraft.version``: 0 for a static quorum (``controller.quorum.voters``), else 1."""
        return 0 if self._configured_voters else 1

    def voter_ids(self) -> list[int]:
        if self._configured_voters:
            return sorted(self._configured_voters)
        if self._dynamic_voters is not None:
            return sorted(self._dynamic_voters)
        return sorted(self.metadata.brokers)

    def directory_id(self, node_id: int) -> uuid.UUID:
        """Node ``node_id``'s metadata log directory id (stable for the cluster)."""
        return uuid.uuid5(_DIRECTORY_NAMESPACE, f"{self.metadata.cluster_id}/{node_id}")

    def _log_end(self) -> int:
        return self.metadata.version + self._voter_records

    def _voter_addresses(self) -> dict[int, tuple[str, int]]:
        if self._configured_voters:
            return dict(self._configured_voters)
        if self._dynamic_voters is not None:
            return dict(self._dynamic_voters)
        return {b: (e.host, e.port) for b, e in self.metadata.brokers.items()}

    def _is_alive(self, node_id: int) -> bool:
        endpoint = self.metadata.brokers.get(node_id)
        return endpoint is not None and endpoint.alive

    def on_broker_stopped(self, broker_id: int) -> None:
        """A broker is stopping: what it has now is what it will show while stopped."""
        self._refresh(self.wall_clock_ms())

    def _refresh(self, now_ms: int) -> None:
        """Live nodes have fetched the log end now; the leader and HW follow."""
        log_end = self._log_end()
        voters = self.voter_ids()
        for node_id in {*voters, *self.metadata.brokers}:
            if self._is_alive(node_id):
                self._states[node_id] = ReplicaState(node_id, log_end, now_ms, now_ms)
        live_voters = [v for v in voters if self._is_alive(v)]
        controller = self.metadata.controller_id
        if controller in live_voters:
            leader = controller
        else:
            leader = live_voters[0] if live_voters else NO_LEADER
        if leader != self._leader_id:
            self._leader_id = leader
            self._epoch += 1
        if len(live_voters) * 2 > len(voters):
            self._high_watermark = log_end

    def describe(self) -> QuorumDescription:
        now = self.wall_clock_ms()
        self._refresh(now)
        voters = self.voter_ids()
        states = [self._states.get(v, ReplicaState(v)) for v in voters]
        if self._leader_id != NO_LEADER:
            # Kafka reports "now" for both of the leader's timestamps.
            states = [
                replace(s, last_fetch_timestamp=now, last_caught_up_timestamp=now)
                if s.replica_id == self._leader_id
                else s
                for s in states
            ]
        observers = [
            self._states.get(b, ReplicaState(b))
            for b in sorted(self.metadata.brokers)
            if b not in voters
        ]
        nodes = self._voter_addresses()
        directories = {s.replica_id: self.directory_id(s.replica_id) for s in states + observers}
        return QuorumDescription(
            self._leader_id,
            self._epoch,
            self._high_watermark,
            states,
            observers,
            nodes,
            directories,
        )

    # -- KIP-853 voter changes -----------------------------------------------------------

    def _voter_keys(self) -> str:
        keys = ", ".join(replica_key(v, self.directory_id(v)) for v in self.voter_ids())
        return f"[{keys}]"

    def _change_refused(self, verb: str) -> VoterChangeResult | None:
        """What Kafka checks before any voter change (a static quorum, a change pending)."""
        if self.kraft_version < 1:
            return VoterChangeResult(
                ErrorCode.unsupported_version,
                f"Cluster doesn't support {verb} voter because the kraft.version feature is 0",
            )
        self._refresh(self.wall_clock_ms())
        if self._last_voter_change >= self._high_watermark:
            return VoterChangeResult(
                ErrorCode.request_timed_out,
                "Request timed out waiting for voters to commit the latest voter change at "
                f"Optional[{self._last_voter_change}] with HWM {self._high_watermark}",
            )
        return None

    def _append_voters(self, voters: dict[int, tuple[str, int]]) -> VoterChangeResult:
        """Append the VotersRecord; answer once it is committed (ack_when_committed)."""
        self._dynamic_voters = voters
        self._voter_records += 1
        self._last_voter_change = self._log_end() - 1
        self._refresh(self.wall_clock_ms())
        if self._high_watermark <= self._last_voter_change:
            return VoterChangeResult(
                ErrorCode.request_timed_out,
                "The voter change is in the log but a majority of the new voters is not "
                "alive to commit it",
            )
        return VoterChangeResult(ErrorCode.none)

    def add_voter(
        self, voter_id: int, directory_id: uuid.UUID | None, address: tuple[str, int] | None
    ) -> VoterChangeResult:
        """AddRaftVoter: ``address`` is the voter's CONTROLLER endpoint (None: absent)."""
        if not directory_id or directory_id.int == 0:
            return VoterChangeResult(
                ErrorCode.invalid_request, "Add voter request didn't include a valid voter"
            )
        if address is None:
            return VoterChangeResult(
                ErrorCode.invalid_request,
                "Add voter request didn't include the endpoint for the default listener "
                f"{CONTROLLER_LISTENER}",
            )
        refused = self._change_refused("adding")
        if refused is not None:
            return refused
        key = replica_key(voter_id, directory_id)
        if voter_id in self.voter_ids():
            return VoterChangeResult(
                ErrorCode.duplicate_voter,
                f"The voter id for {key} is already part of the set of voters "
                f"{self._voter_keys()}.",
            )
        if not self._is_alive(voter_id) or directory_id != self.directory_id(voter_id):
            # Not an observer that is fetching (and caught up) with that directory.
            return VoterChangeResult(
                ErrorCode.request_timed_out,
                f"Aborted add voter operation for {key} since it is lagging behind",
            )
        return self._append_voters({**self._voter_addresses(), voter_id: address})

    def remove_voter(self, voter_id: int, directory_id: uuid.UUID | None) -> VoterChangeResult:
        """RemoveRaftVoter: the voter with this id and directory id leaves the quorum."""
        if not directory_id or directory_id.int == 0:
            return VoterChangeResult(
                ErrorCode.invalid_request, "Remove voter request didn't include a valid voter"
            )
        refused = self._change_refused("removing")
        if refused is not None:
            return refused
        voters = self._voter_addresses()
        if (
            voter_id not in voters
            or directory_id != self.directory_id(voter_id)
            or len(voters) == 1
        ):
            return VoterChangeResult(
                ErrorCode.voter_not_found,
                f"Cannot remove voter {replica_key(voter_id, directory_id)} from the set of "
                f"voters {self._voter_keys()}",
            )
        del voters[voter_id]
        return self._append_voters(voters)
