"""``minikafka metadata-quorum describe|add-controller|remove-controller``: what
``kafka-metadata-quorum.sh`` does, with its options and its output, through DescribeQuorum
(55), AddRaftVoter (80) and RemoveRaftVoter (81).

- ``describe --status``: Kafka's summary lines (``ClusterId:``, ``LeaderId:``,
  ``LeaderEpoch:``, ``HighWatermark:``, ``MaxFollowerLag:``, ``MaxFollowerLagTimeMs:``,
  ``CurrentVoters:``, ``CurrentObservers:``, the values at column 25), the voters and
  observers as Kafka prints them (``{"id": 0, "directoryId": "...", "endpoints":
  ["CONTROLLER://host:port"]}``). The cluster id comes from Metadata (Kafka's admin asks
  DescribeCluster; both carry it).
- ``describe --replication [--human-readable]``: Kafka's table (``NodeId DirectoryId
  LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp Status``; each cell padded to
  its column and followed by a tab): the leader, then the other voters (Follower), then
  the observers; Lag is the leader's log end minus the replica's.
- ``remove-controller --controller-id ID --controller-directory-id UUID [--dry-run]``:
  as Kafka's; prints Kafka's ``Removed  KRaft controller ...`` line (Kafka's two spaces).
- ``add-controller --controller-id ID [--controller-directory-id UUID]
  [--controller-endpoint LISTENER://HOST:PORT ...] [--dry-run]``; prints Kafka's
  ``Added controller ID with directory id ... and endpoints: ...`` line.

On failure the line is Kafka's, the exception the Java admin client raises and its
message (``org.apache.kafka.common.errors.DuplicateVoterException: The voter id for
ReplicaKey(...) is already part of the set of voters [...].``), after the tool's name as
every ``minikafka`` tool prints it, and the exit status is 1.

Where this differs from Kafka's tool: Kafka's ``add-controller`` reads the new
controller's own properties file (``--command-config``: ``node.id``, the directory id
from the meta.properties of ``metadata.log.dir``, the ``controller.listener.names``
endpoints). A minikafka controller has no files of its own, so the id is an option and
the rest defaults from what the cluster says: the directory id DescribeQuorum reports
for that node (as an observer once removed), and ``CONTROLLER://HOST:PORT`` with the
node's address from Metadata (DescribeCluster's brokers). ``--bootstrap-controller`` is
taken as another name of ``--bootstrap-server`` (the brokers are the controllers here);
``--command-config`` is not taken (no SASL/SSL in the tools' client). Errors print one
line, no stack trace.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.client import AdminError, KafkaClient, kafka_uuid
from kafka_tools.client.cluster import ADD_RAFT_VOTER, DESCRIBE_QUORUM, REMOVE_RAFT_VOTER
from protocol.builders import Builder

__all__ = [
    "QuorumUsageError",
    "add_metadata_quorum_parsers",
    "joined_directory_ids",
    "kafka_exception_line",
    "metadata_quorum_add_controller",
    "metadata_quorum_describe",
    "metadata_quorum_remove_controller",
]

METADATA_TOPIC = "__cluster_metadata"
CONTROLLER_LISTENER = "CONTROLLER"
REQUEST_TIMEOUT_MS = 30000
ZERO_UUID = uuid.UUID(int=0)
REPLICATION_HEADERS = (
    "NodeId",
    "DirectoryId",
    "LogEndOffset",
    "Lag",
    "LastFetchTimestamp",
    "LastCaughtUpTimestamp",
    "Status",
)
#: Kafka's exception classes whose names do not follow from the error's name.
_EXCEPTION_NAMES = {ErrorCode.request_timed_out: "TimeoutException"}
#: Kafka's default messages, used when a response carries none.
_DEFAULT_MESSAGES = {
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.request_timed_out: "The request timed out.",
}


class QuorumUsageError(Exception):
    """A bad option value (exit 2)."""


# -- parsers ------------------------------------------------------------------------------


#: The options whose value is a Kafka Uuid: URL-safe base64, so one in 64 begins with '-'.
DIRECTORY_ID_OPTIONS = frozenset({"--controller-directory-id", "-d"})


def joined_directory_ids(argv: Sequence[str]) -> list[str]:
    """``argv`` with each directory id that begins with '-' joined to its option
    (``--controller-directory-id=-Ab...``): argparse would take ``-d -Ab...`` for two
    options and refuse the command (a directory id from ``describe --replication``)."""
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in DIRECTORY_ID_OPTIONS:
            value = next(args, None)
            if value is not None and value.startswith("-") and len(value) == 22:
                out.append(f"--controller-directory-id={value}")
                continue
            out.append(arg)
            if value is not None:
                out.append(value)
            continue
        out.append(arg)
    return out


def add_metadata_quorum_parsers(sub: Any, bootstrap_option: Any) -> None:
    """``metadata-quorum describe|add-controller|remove-controller``; the bootstrap may be
    given before the action, as Kafka's tool takes it, or after it."""
    quorum = sub.add_parser(
        "metadata-quorum",
        help="describe the KRaft controller quorum, add and remove controllers "
        "(kafka-metadata-quorum)",
    )
    bootstrap_option(quorum)
    quorum.add_argument("--bootstrap-controller", dest="bootstrap", help=argparse.SUPPRESS)
    actions = quorum.add_subparsers(dest="action", required=True, metavar="ACTION")
    describe = actions.add_parser("describe", help="the quorum (--status or --replication)")
    describe.add_argument("--status", action="store_true", help="a summary of the quorum")
    describe.add_argument(
        "--replication", action="store_true", help="each voter's and observer's replication"
    )
    describe.add_argument(
        "--human-readable", action="store_true", help="with --replication: times as 'N ms ago'"
    )
    add = actions.add_parser("add-controller", help="add a controller to the quorum")
    remove = actions.add_parser("remove-controller", help="remove a controller from the quorum")
    for parser in (add, remove):
        parser.add_argument(
            "--controller-id", "-i", type=int, required=True, help="the controller's node id"
        )
        parser.add_argument(
            "--controller-directory-id",
            "-d",
            required=parser is remove,
            default=None,
            help="its metadata log directory id"
            + (" (default: the one DescribeQuorum reports)" if parser is add else ""),
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="print what would be done, do nothing"
        )
    add.add_argument(
        "--controller-endpoint",
        action="append",
        default=[],
        metavar="LISTENER://HOST:PORT",
        help="its endpoint (repeatable; default CONTROLLER:// and its address in Metadata)",
    )
    for parser in (describe, add, remove):
        parser.add_argument(
            "--bootstrap-server",
            "--bootstrap",
            "--bootstrap-controller",
            dest="bootstrap",
            default=argparse.SUPPRESS,
            metavar="HOST:PORT[,...]",
            help="brokers to connect to (also before the action)",
        )


# -- the quorum as DescribeQuorum tells it ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Replica:
    """Kafka's QuorumInfo.ReplicaState (-1: the timestamp is absent)."""

    replica_id: int
    directory_id: uuid.UUID
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class Quorum:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[Replica]
    observers: list[Replica]
    #: node id -> its endpoints, ``LISTENER://host:port`` (DescribeQuorum v2's nodes)
    endpoints: dict[int, list[str]] = field(default_factory=dict)

    def leader(self) -> Replica:
        found = next((v for v in self.voters if v.replica_id == self.leader_id), None)
        if found is None:  # Kafka's tool fails on Optional.get() here
            raise AdminError(f"No value present (the leader {self.leader_id} is not a voter)")
        return found

    def replica(self, node_id: int) -> Replica | None:
        return next((r for r in self.voters + self.observers if r.replica_id == node_id), None)


def kafka_exception_line(error: ErrorCode, message: str | None) -> str:
    """The line Kafka's tool prints for an admin call that failed with ``error``."""
    name = _EXCEPTION_NAMES.get(error)
    if name is None:
        words = error.name.split("_")
        if words[-2:] == ["authorization", "failed"]:
            words = [*words[:-2], "authorization"]
        name = "".join(w.capitalize() for w in words) + "Exception"
    text = message or _DEFAULT_MESSAGES.get(error) or error.name.upper()
    return f"org.apache.kafka.common.errors.{name}: {text}"


def _endpoint(host: str, port: int, listener: str = CONTROLLER_LISTENER) -> str:
    """Kafka's RaftVoterEndpoint.toString (IPv6 hosts in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"{listener}://{shown}:{port}"


def _replica(state: Any) -> Replica:
    return Replica(
        int(state.replica_id),
        getattr(state, "replica_directory_id", None) or ZERO_UUID,
        int(state.log_end_offset),
        int(getattr(state, "last_fetch_timestamp", -1)),
        int(getattr(state, "last_caught_up_timestamp", -1)),
    )


async def describe_quorum(client: KafkaClient) -> Quorum:
    """DescribeQuorum of ``__cluster_metadata`` partition 0 (Kafka's describeMetadataQuorum)."""

    def build(b: Builder, version: int) -> Any:
        return b.DescribeQuorumRequest(
            topics=(
                b.TopicData(
                    topic_name=METADATA_TOPIC, partitions=(b.PartitionData(partition_index=0),)
                ),
            )
        )

    response = await client.call(DESCRIBE_QUORUM, build)
    if response.error_code is not ErrorCode.none:
        raise AdminError(kafka_exception_line(response.error_code, response.error_message))
    partitions = [p for t in response.topics for p in t.partitions]
    if len(partitions) != 1:
        raise AdminError("DescribeQuorum answered without the __cluster_metadata partition")
    p = partitions[0]
    if p.error_code is not ErrorCode.none:
        raise AdminError(kafka_exception_line(p.error_code, getattr(p, "error_message", None)))
    endpoints = {
        int(n.node_id): [
            _endpoint(str(lst.host), int(lst.port), str(lst.name)) for lst in n.listeners
        ]
        for n in getattr(response, "nodes", ())
    }
    return Quorum(
        int(p.leader_id),
        int(p.leader_epoch),
        int(p.high_watermark),
        [_replica(v) for v in p.current_voters],
        [_replica(o) for o in p.observers],
        endpoints,
    )


# -- describe -----------------------------------------------------------------------------


async def metadata_quorum_describe(args: argparse.Namespace) -> int:
    if args.status and args.replication:
        raise QuorumUsageError(
            "Only one of --status or --replication should be specified with describe sub-command"
        )
    if not args.status and not args.replication:
        raise QuorumUsageError(
            "One of --status or --replication must be specified with describe sub-command"
        )
    if args.status and args.human_readable:
        raise QuorumUsageError(
            "The option --human-readable is only supported along with --replication"
        )
    async with KafkaClient(args.bootstrap) as client:
        quorum = await describe_quorum(client)
        if args.status:
            print(status_text(client.cluster.cluster_id, quorum))
        else:
            print(replication_table(quorum, args.human_readable), end="")
    return 0


def _nodes_text(quorum: Quorum, replicas: list[Replica]) -> str:
    """Kafka's CurrentVoters / CurrentObservers value: a JSON-like list of nodes."""
    items = []
    for r in replicas:
        text = f'{{"id": {r.replica_id}'
        if r.directory_id != ZERO_UUID:
            text += f', "directoryId": "{kafka_uuid(r.directory_id)}"'
        endpoints = quorum.endpoints.get(r.replica_id, [])
        if endpoints:
            text += ', "endpoints": [' + ", ".join(f'"{e}"' for e in endpoints) + "]"
        items.append(text + "}")
    return "[" + ", ".join(items) + "]"


def status_text(cluster_id: str | None, quorum: Quorum) -> str:
    """``describe --status``: Kafka's eight lines."""
    leader = quorum.leader()
    laggiest = min(quorum.voters, key=lambda v: v.log_end_offset)  # the first of the lowest
    if laggiest is leader:
        lag_time = 0
    elif leader.last_caught_up_timestamp >= 0 and laggiest.last_caught_up_timestamp >= 0:
        lag_time = leader.last_caught_up_timestamp - laggiest.last_caught_up_timestamp
    else:
        lag_time = -1
    lines = (
        ("ClusterId:", cluster_id),
        ("LeaderId:", quorum.leader_id),
        ("LeaderEpoch:", quorum.leader_epoch),
        ("HighWatermark:", quorum.high_watermark),
        ("MaxFollowerLag:", leader.log_end_offset - laggiest.log_end_offset),
        ("MaxFollowerLagTimeMs:", lag_time),
        ("CurrentVoters:", _nodes_text(quorum, quorum.voters)),
        ("CurrentObservers:", _nodes_text(quorum, quorum.observers)),
    )
    return "\n".join(f"{label:<24}{value}" for label, value in lines)


def _timestamp(value: int, human_readable: bool, now_ms: int) -> str:
    if value < 0:
        return "-1"
    return f"{max(now_ms - value, 0)} ms ago" if human_readable else str(value)


def replication_table(quorum: Quorum, human_readable: bool) -> str:
    """``describe --replication``: Kafka's table (ToolsUtils.prettyPrintTable)."""
    leader = quorum.leader()
    now_ms = int(time.time() * 1000)
    rows = [
        [
            str(r.replica_id),
            kafka_uuid(r.directory_id),
            str(r.log_end_offset),
            str(leader.log_end_offset - r.log_end_offset),
            _timestamp(r.last_fetch_timestamp, human_readable, now_ms),
            _timestamp(r.last_caught_up_timestamp, human_readable, now_ms),
            status,
        ]
        for r, status in [
            (leader, "Leader"),
            *((v, "Follower") for v in quorum.voters if v.replica_id != leader.replica_id),
            *((o, "Observer") for o in quorum.observers),
        ]
    ]
    table = [list(REPLICATION_HEADERS), *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(REPLICATION_HEADERS))]
    return "".join(
        "".join(cell.ljust(width) + "\t" for cell, width in zip(row, widths, strict=True)) + "\n"
        for row in table
    )


# -- add-controller, remove-controller -----------------------------------------------------


def parse_directory_id(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString`` (URL-safe base64, 16 bytes), as the tool reports it."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise AdminError(
            f"Failed to parse --controller-directory-id: Input string `{text}` decoded as "
            f"{len(raw)} bytes, which is not equal to the expected 16 bytes of a "
            "base64-encoded UUID"
        )
    return uuid.UUID(bytes=raw)


def _parse_endpoint(text: str) -> tuple[str, str, int]:
    listener, sep, address = text.partition("://")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not host or not port.isdigit() or not listener:
        raise QuorumUsageError(f"--controller-endpoint {text!r} is not LISTENER://HOST:PORT")
    return listener.upper(), host.strip("[]"), int(port)


def _check_controller_id(controller_id: int) -> None:
    if controller_id < 0:
        raise AdminError(f"Invalid negative --controller-id: {controller_id}")


async def metadata_quorum_remove_controller(args: argparse.Namespace) -> int:
    _check_controller_id(args.controller_id)
    directory_id = parse_directory_id(args.controller_directory_id)
    if not args.dry_run:
        async with KafkaClient(args.bootstrap) as client:

            def build(b: Builder, version: int) -> Any:
                return b.RemoveRaftVoterRequest(
                    cluster_id=None,
                    voter_id=args.controller_id,
                    voter_directory_id=directory_id,
                )

            response = await client.call(REMOVE_RAFT_VOTER, build)
            if response.error_code is not ErrorCode.none:
                raise AdminError(kafka_exception_line(response.error_code, response.error_message))
    verb = "DRY RUN of removing " if args.dry_run else "Removed "
    print(
        f"{verb} KRaft controller {args.controller_id} with directory id {kafka_uuid(directory_id)}"
    )
    return 0


async def _new_voter(
    client: KafkaClient, args: argparse.Namespace
) -> tuple[uuid.UUID, list[tuple[str, str, int]]]:
    """The directory id and endpoints to add: the options', else what the cluster says."""
    endpoints = [_parse_endpoint(e) for e in args.controller_endpoint]
    if args.controller_directory_id is not None:
        directory_id = parse_directory_id(args.controller_directory_id)
    else:
        replica = (await describe_quorum(client)).replica(args.controller_id)
        if replica is None or replica.directory_id == ZERO_UUID:
            raise AdminError(
                f"DescribeQuorum reports no directory id for node {args.controller_id}: "
                "give --controller-directory-id"
            )
        directory_id = replica.directory_id
    if not endpoints:
        address = client.cluster.brokers.get(args.controller_id)
        if address is None:
            raise AdminError(
                f"node {args.controller_id} is not in the cluster's metadata: "
                "give --controller-endpoint"
            )
        endpoints = [(CONTROLLER_LISTENER, address[0], address[1])]
    return directory_id, endpoints


async def metadata_quorum_add_controller(args: argparse.Namespace) -> int:
    _check_controller_id(args.controller_id)
    async with KafkaClient(args.bootstrap) as client:
        directory_id, endpoints = await _new_voter(client, args)
        if not args.dry_run:

            def build(b: Builder, version: int) -> Any:
                return b.AddRaftVoterRequest(
                    cluster_id=None,
                    timeout=REQUEST_TIMEOUT_MS,
                    voter_id=args.controller_id,
                    voter_directory_id=directory_id,
                    listeners=tuple(
                        b.Listener(name=name, host=host, port=port)
                        for name, host, port in endpoints
                    ),
                    ack_when_committed=True,
                )

            response = await client.call(ADD_RAFT_VOTER, build)
            if response.error_code is not ErrorCode.none:
                raise AdminError(kafka_exception_line(response.error_code, response.error_message))
    verb = "DRY RUN of adding" if args.dry_run else "Added"
    shown = ", ".join(_endpoint(host, port, name) for name, host, port in endpoints)
    print(
        f"{verb} controller {args.controller_id} with directory id "
        f"{kafka_uuid(directory_id)} and endpoints: {shown}"
    )
    return 0
