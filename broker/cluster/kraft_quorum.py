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

Differences from Kafka: no Raft elections, fetches or snapshots; the timestamps are the
injected wall clock at the moment of the DescribeQuorum (or of the stop), not of real
fetches; the replica directory ids are zero UUIDs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

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

    def voter_ids(self) -> list[int]:
        if self._configured_voters:
            return sorted(self._configured_voters)
        return sorted(self.metadata.brokers)

    def _is_alive(self, node_id: int) -> bool:
        endpoint = self.metadata.brokers.get(node_id)
        return endpoint is not None and endpoint.alive

    def on_broker_stopped(self, broker_id: int) -> None:
        """A broker is stopping: what it has now is what it will show while stopped."""
        self._refresh(self.wall_clock_ms())

    def _refresh(self, now_ms: int) -> None:
        """Live nodes have fetched the log end now; the leader and HW follow."""
        log_end = self.metadata.version
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
        nodes = dict(self._configured_voters) or {
            b: (e.host, e.port) for b, e in self.metadata.brokers.items()
        }
        return QuorumDescription(
            self._leader_id, self._epoch, self._high_watermark, states, observers, nodes
        )
