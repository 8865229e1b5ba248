"""What one request costs the broker: a pipelined load generator that decodes nothing.

For each kind of request one frame is encoded once, before anything is timed. Then
N connections each keep W copies of it in flight: the client reads only the 4-byte
length prefix of each response and, for every response that is complete, writes the
frame again. So the client costs almost nothing per request and the broker is the
part that works. The broker's CPU is read from ``/proc/<pid>/stat`` (utime + stime,
every thread of the process) at both ends of the measured window and divided by the
responses received in it: **broker CPU µs per request**, the figure to trust on a busy
machine, where req/s depends on what else runs. The clients report their own CPU too
(``time.process_time`` in each client process), so a reader can see that they were not
the limit.

Kinds (``--kinds``):

=================  =========================================================================
api-versions       ApiVersions v3, to the bootstrap broker
metadata           Metadata v9 naming one topic (1 partition)
metadata-100x10    Metadata v9 naming 100 topics of 10 partitions each (replication 1)
produce-acks1      Produce v9, one 100-byte record, acks=1, to the partition leader
produce-acksall    the same with acks=all on a topic replicated 3 ways (``--brokers 3``):
                   the broker's figure includes the followers' fetches (same process)
fetch              Fetch v12 of offset 0 of a partition holding one batch of ten 100-byte
                   records (the same data every time)
fetch-longpoll     Fetch v12 at the log end, max_wait ``--longpoll-wait-ms``, woken by one
                   more connection appending one record at a steady rate: one fetch in flight
                   per connection, as a consumer has. The client reads the high watermark of
                   each response (at a fixed place in the frame, checked once) to fetch the
                   next offset. Latency p50/p99: from the append being sent to the fetch
                   response that carries it being received.
heartbeat          Heartbeat v4 of a real member (JoinGroup + SyncGroup first, session
                   timeout 10 minutes), to the group coordinator
offset-commit      OffsetCommit v8 of that kind of member, one partition: the broker appends
                   it to ``__consumer_offsets`` and answers once its ISR has it
=================  =========================================================================

Before it is measured, each frame is sent once and its answer decoded: a kind whose
answer carries an error code is still measured, with the error in the note column (the
figures are then those of the error path).

Without ``--bootstrap`` a minikafka is started as a subprocess (``python -m broker serve
--port 0 --brokers 3 --override group.initial.rebalance.delay.ms=0``) with its working
directory ``--broker-cwd`` (this checkout by default), so the same script measures
another checkout: ``--broker-cwd /work/baseline``. The client encodes its frames with
the ``protocol`` package of that directory too. With ``--bootstrap HOST:PORT`` any
Kafka-compatible broker can be measured; ``--broker-pid`` then gives the CPU figure
(without it the CPU columns show ``-``).

Many connections: RLIMIT_NOFILE's soft limit is raised to the hard one (the broker
subprocess inherits it); the output says when that is not enough. Connections are
spread over ``--client-procs`` client processes (default: one per 2,500 connections).

On a machine shared with other work, the broker's ``wait%`` column (time its threads
were runnable without a CPU, from schedstat) tells a starved broker from an idle one;
``--repeat N`` keeps the row with the median CPU per request. After each row the script
waits until the broker answers a fresh connection, so requests it had read but not yet
handled when the clients left are not charged to the next row.

Figures, never a verdict: this script asserts nothing about them.

Run: ``.venv/bin/python bench/request_cost.py --connections 8 --window 32 --seconds 3``
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import math
import multiprocessing
import os
import resource
import socket
import struct
import sys
import time
import uuid
from array import array
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from broker_process import BrokerSubprocess  # bench/ is on sys.path when run

ROOT = Path(__file__).resolve().parent.parent

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT = 0, 1, 2, 3, 8
FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS = 18, 19, 20

KINDS: dict[str, tuple[int, int]] = {  # kind -> (api key, version) measured
    "api-versions": (API_VERSIONS, 3),
    "metadata": (METADATA, 9),
    "metadata-100x10": (METADATA, 9),
    "produce-acks1": (PRODUCE, 9),
    "produce-acksall": (PRODUCE, 9),
    "fetch": (FETCH, 12),
    "fetch-longpoll": (FETCH, 12),
    "heartbeat": (HEARTBEAT, 4),
    "offset-commit": (OFFSET_COMMIT, 8),
}

CLIENT_ID = "request-cost"
CORRELATION_ID = 7  # every copy of a frame carries the same one: nobody reads it back
RECORD_BYTES = 100
FETCH_DATA_RECORDS = 10
PRODUCE_TIMEOUT_MS = 30_000
SESSION_TIMEOUT_MS = 600_000
SETUP_TIMEOUT_S = 60.0
CONNECT_CONCURRENCY = 64  # the broker listens with asyncio's default backlog of 100
CONNECTIONS_PER_CLIENT_PROCESS = 2500
MEMBER_ID_REQUIRED = 79
OFFSET_SENTINEL = 0x0102030405060708  # found in the encoded long-poll frame, then patched

_LENGTH = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class SetupError(RuntimeError):
    """A kind could not be prepared; its row says why."""


# ----------------------------------------------------------------------------- codec
#
# Imported late: main() first puts --broker-cwd on sys.path, so the frames are encoded
# by the protocol package of the checkout under test.


def _builder(api_key: int, version: int) -> Any:
    from protocol.builders import request_builder

    return request_builder(api_key, version)


def _encode(api_key: int, version: int, message: str, **fields: Any) -> bytes:
    from protocol.codec import encode_request

    payload = getattr(_builder(api_key, version), message)(**fields)
    return encode_request(api_key, version, CORRELATION_ID, CLIENT_ID, payload)


def _decode(api_key: int, version: int, frame: bytes) -> Any:
    from protocol.codec import decode_response

    return decode_response(api_key, version, frame)[1]


def _record_batch(count: int) -> bytes:
    from protocol.record_batch import build_record_batch

    records = [(None, b"x" * RECORD_BYTES, ())] * count
    return build_record_batch(records, timestamp_ms=int(time.time() * 1000))


def first_error(message: Any) -> str | None:
    """The first non-zero ``error_code`` anywhere in a decoded response, by name."""
    if isinstance(message, tuple):
        for item in message:
            found = first_error(item)
            if found:
                return found
        return None
    if not dataclasses.is_dataclass(message):
        return None
    for f in dataclasses.fields(message):
        value = getattr(message, f.name)
        if f.name == "error_code" and int(value) != 0:
            return str(getattr(value, "name", value))
        if isinstance(value, tuple) or dataclasses.is_dataclass(value):
            found = first_error(value)
            if found:
                return found
    return None


# ----------------------------------------------------------------------------- setup


Address = tuple[str, int]


def _address(hostport: str) -> Address:
    host, port = hostport.split(",")[0].rsplit(":", 1)
    return host, int(port)


class SetupConnection:
    """One request at a time, answers decoded: for setup and checks, never timed."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(cls, address: Address) -> SetupConnection:
        return cls(*await asyncio.open_connection(*address))

    async def roundtrip(self, frame: bytes, timeout_s: float = SETUP_TIMEOUT_S) -> bytes:
        """Send a whole frame; the response frame without its length prefix."""
        self._writer.write(frame)
        await self._writer.drain()
        async with asyncio.timeout(timeout_s):
            (size,) = _LENGTH.unpack(await self._reader.readexactly(4))
            return await self._reader.readexactly(size)

    async def call(self, api_key: int, version: int, message: str, **fields: Any) -> Any:
        frame = _encode(api_key, version, message, **fields)
        return _decode(api_key, version, await self.roundtrip(frame))

    async def close(self) -> None:
        self._writer.close()
        with suppress(ConnectionError):
            await self._writer.wait_closed()


class Cluster:
    """The cluster as setup sees it: brokers, controller, leaders, coordinators."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = _address(bootstrap)
        self.brokers: dict[int, Address] = {}
        self.controller = -1
        self._connections: dict[Address, SetupConnection] = {}

    async def __aenter__(self) -> Cluster:
        await self.metadata(None)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        for connection in self._connections.values():
            with suppress(Exception):
                await connection.close()
        self._connections.clear()

    async def conn(self, address: Address) -> SetupConnection:
        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = await SetupConnection.open(address)
        return connection

    async def metadata(self, topics: Sequence[str] | None) -> Any:
        b = _builder(METADATA, 9)
        response = await (await self.conn(self.bootstrap)).call(
            METADATA,
            9,
            "MetadataRequest",
            topics=None
            if topics is None
            else tuple(b.MetadataRequestTopic(name=t) for t in topics),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        self.brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in response.brokers}
        self.controller = int(response.controller_id)
        return response

    @property
    def controller_address(self) -> Address:
        return self.brokers.get(self.controller, self.bootstrap)

    async def create_topics(
        self, names: Sequence[str], partitions: int, replication_factor: int
    ) -> dict[str, Address]:
        """Create the topics, wait until each partition has a leader; partition 0's leader."""
        b = _builder(CREATE_TOPICS, 5)
        response = await (await self.conn(self.controller_address)).call(
            CREATE_TOPICS,
            5,
            "CreateTopicsRequest",
            topics=tuple(
                b.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    assignments=(),
                    configs=(),
                )
                for name in names
            ),
            timeout=30_000,
            validate_only=False,
        )
        error = first_error(response)
        if error:
            raise SetupError(f"CreateTopics: {error}")
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        while True:
            metadata = await self.metadata(names)
            leaders: dict[str, Address] = {}
            for topic in metadata.topics:
                ids = [int(p.leader_id) for p in topic.partitions]
                if (
                    int(topic.error_code) == 0
                    and len(ids) == partitions
                    and all(i in self.brokers for i in ids)
                ):
                    zero = next(p for p in topic.partitions if int(p.partition_index) == 0)
                    leaders[str(topic.name)] = self.brokers[int(zero.leader_id)]
            if len(leaders) == len(names):
                return leaders
            if time.monotonic() > deadline:
                raise SetupError(f"topics have no leaders after {SETUP_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.1)

    async def delete_topics(self, names: Sequence[str]) -> None:
        await (await self.conn(self.controller_address)).call(
            DELETE_TOPICS, 5, "DeleteTopicsRequest", topic_names=tuple(names), timeout=30_000
        )

    async def produce(self, leader: Address, topic: str, batch: bytes) -> None:
        response = await (await self.conn(leader)).call(
            PRODUCE, 9, "ProduceRequest", **produce_fields(topic, batch, acks=1)
        )
        error = first_error(response)
        if error:
            raise SetupError(f"Produce: {error}")

    async def log_end(self, leader: Address, topic: str) -> int:
        b = _builder(LIST_OFFSETS, 7)
        response = await (await self.conn(leader)).call(
            LIST_OFFSETS,
            7,
            "ListOffsetsRequest",
            replica_id=-1,
            isolation_level=0,
            topics=(
                b.ListOffsetsTopic(
                    name=topic,
                    partitions=(
                        b.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=-1, timestamp=-1
                        ),
                    ),
                ),
            ),
        )
        error = first_error(response)
        if error:
            raise SetupError(f"ListOffsets: {error}")
        return int(response.topics[0].partitions[0].offset)

    async def coordinator(self, group: str) -> Address:
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        while True:
            response = await (await self.conn(self.bootstrap)).call(
                FIND_COORDINATOR, 3, "FindCoordinatorRequest", key=group, key_type=0
            )
            if int(response.error_code) == 0:
                return str(response.host), int(response.port)
            if time.monotonic() > deadline:
                raise SetupError(f"FindCoordinator: {first_error(response)}")
            await asyncio.sleep(0.2)  # the offsets topic is being created

    async def join_group(self, group: str) -> tuple[Address, int, str]:
        """A one-member group, synced: (coordinator, generation, member id)."""
        coordinator = await self.coordinator(group)
        connection = await self.conn(coordinator)
        b = _builder(JOIN_GROUP, 5)
        fields: dict[str, Any] = {
            "group_id": group,
            "session_timeout": SESSION_TIMEOUT_MS,
            "rebalance_timeout": SESSION_TIMEOUT_MS,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": (b.JoinGroupRequestProtocol(name="range", metadata=b""),),
        }
        joined = await connection.call(JOIN_GROUP, 5, "JoinGroupRequest", member_id="", **fields)
        if int(joined.error_code) == MEMBER_ID_REQUIRED:
            joined = await connection.call(
                JOIN_GROUP, 5, "JoinGroupRequest", member_id=joined.member_id, **fields
            )
        if int(joined.error_code) != 0:
            raise SetupError(f"JoinGroup: {first_error(joined)}")
        generation, member = int(joined.generation_id), str(joined.member_id)
        s = _builder(SYNC_GROUP, 3)
        synced = await connection.call(
            SYNC_GROUP,
            3,
            "SyncGroupRequest",
            group_id=group,
            generation_id=generation,
            member_id=member,
            group_instance_id=None,
            assignments=(s.SyncGroupRequestAssignment(member_id=member, assignment=b""),),
        )
        if int(synced.error_code) != 0:
            raise SetupError(f"SyncGroup: {first_error(synced)}")
        return coordinator, generation, member

    async def leave_group(self, coordinator: Address, group: str, member: str) -> None:
        b = _builder(LEAVE_GROUP, 4)
        await (await self.conn(coordinator)).call(
            LEAVE_GROUP,
            4,
            "LeaveGroupRequest",
            group_id=group,
            members=(b.MemberIdentity(member_id=member, group_instance_id=None),),
        )

    async def check(self, address: Address, api_key: int, version: int, frame: bytes) -> str:
        """Send the frame once and decode the answer: '' or the first error code in it."""
        answer = await (await self.conn(address)).roundtrip(frame)
        return first_error(_decode(api_key, version, answer)) or ""


def produce_fields(topic: str, batch: bytes, acks: int) -> dict[str, Any]:
    b = _builder(PRODUCE, 9)
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": PRODUCE_TIMEOUT_MS,
        "topic_data": (
            b.TopicProduceData(
                name=topic, partition_data=(b.PartitionProduceData(index=0, records=batch),)
            ),
        ),
    }


def fetch_frame(topic: str, offset: int, max_wait_ms: int) -> bytes:
    b = _builder(FETCH, 12)
    return _encode(
        FETCH,
        12,
        "FetchRequest",
        replica_id=-1,
        max_wait=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            b.FetchTopic(
                topic=topic,
                partitions=(
                    b.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


@dataclass
class LongPoll:
    """What a long-poll client needs: where to patch the offset, where to read the HW."""

    template: bytes  # Fetch frame with OFFSET_SENTINEL as fetch_offset
    offset_pos: int  # of fetch_offset in the template
    hw_pos: int  # of the high watermark in a response frame, length prefix included
    produce_frame: bytes
    topic: str


@dataclass
class Workload:
    """One kind, prepared: the frame, where it goes, what to undo afterwards."""

    kind: str
    target: Address
    frame: bytes
    error: str = ""  # what the checked answer said, if not ok
    note: str = ""
    topics: list[str] = field(default_factory=list)
    group: tuple[Address, str, str] | None = None  # coordinator, group, member
    longpoll: LongPoll | None = None
    leader: Address | None = None


async def prepare(cluster: Cluster, kind: str, run_id: str, args: argparse.Namespace) -> Workload:
    """Create what the kind needs (topics, data, a group member) and encode its frame."""
    api_key, version = KINDS[kind]
    base = f"rc-{run_id}-{kind}"
    if kind == "api-versions":
        frame = _encode(
            API_VERSIONS,
            3,
            "ApiVersionsRequest",
            client_software_name=CLIENT_ID,
            client_software_version="1",
        )
        work = Workload(kind, cluster.bootstrap, frame)
    elif kind in ("metadata", "metadata-100x10"):
        many = kind == "metadata-100x10"
        names = [f"{base}-{i:03d}" for i in range(100)] if many else [base]
        await cluster.create_topics(names, 10 if many else 1, 1)
        b = _builder(METADATA, 9)
        frame = _encode(
            METADATA,
            9,
            "MetadataRequest",
            topics=tuple(b.MetadataRequestTopic(name=n) for n in names),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        work = Workload(kind, cluster.bootstrap, frame, topics=names)
    elif kind in ("produce-acks1", "produce-acksall"):
        acks_all = kind == "produce-acksall"
        rf = 1
        if acks_all:
            rf = args.replication_factor or min(3, len(cluster.brokers))
        leader = (await cluster.create_topics([base], 1, rf))[base]
        frame = _encode(
            PRODUCE,
            9,
            "ProduceRequest",
            **produce_fields(base, _record_batch(1), -1 if acks_all else 1),
        )
        note = f"RF {rf}" if acks_all else ""
        work = Workload(kind, leader, frame, note=note, topics=[base])
    elif kind == "fetch":
        leader = (await cluster.create_topics([base], 1, 1))[base]
        await cluster.produce(leader, base, _record_batch(FETCH_DATA_RECORDS))
        frame = fetch_frame(base, 0, args.longpoll_wait_ms)
        work = Workload(kind, leader, frame, topics=[base])
    elif kind == "fetch-longpoll":
        leader = (await cluster.create_topics([base], 1, 1))[base]
        work = await _prepare_longpoll(cluster, base, leader, args.longpoll_wait_ms)
    elif kind in ("heartbeat", "offset-commit"):
        coordinator, generation, member = await cluster.join_group(base)
        topics: list[str] = []
        if kind == "heartbeat":
            frame = _encode(
                HEARTBEAT,
                4,
                "HeartbeatRequest",
                group_id=base,
                generation_id=generation,
                member_id=member,
                group_instance_id=None,
            )
        else:
            await cluster.create_topics([base], 1, 1)
            topics = [base]
            b = _builder(OFFSET_COMMIT, 8)
            frame = _encode(
                OFFSET_COMMIT,
                8,
                "OffsetCommitRequest",
                group_id=base,
                generation_id_or_member_epoch=generation,
                member_id=member,
                group_instance_id=None,
                topics=(
                    b.OffsetCommitRequestTopic(
                        name=base,
                        partitions=(
                            b.OffsetCommitRequestPartition(
                                partition_index=0,
                                committed_offset=0,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            ),
                        ),
                    ),
                ),
            )
        work = Workload(kind, coordinator, frame, topics=topics, group=(coordinator, base, member))
    else:  # pragma: no cover - argparse restricts the kinds
        raise SetupError(f"unknown kind {kind}")
    if work.longpoll is None:
        work.error = await cluster.check(work.target, api_key, version, work.frame)
    return work


async def _prepare_longpoll(
    cluster: Cluster, topic: str, leader: Address, max_wait_ms: int
) -> Workload:
    """Find where to patch the fetch offset and where the response's HW lies, and check
    both against a decoded response (one record is appended for that)."""
    template = fetch_frame(topic, OFFSET_SENTINEL, max_wait_ms)
    sentinel = _INT64.pack(OFFSET_SENTINEL)
    offset_pos = template.find(sentinel)
    if offset_pos < 0 or template.find(sentinel, offset_pos + 1) >= 0:
        raise SetupError("fetch_offset not found once in the encoded Fetch")
    # Fetch v12 response: length, correlation id, header tags, throttle, error, session,
    # topics count, topic name (compact), partitions count, index, error, high watermark.
    name = topic.encode()
    if len(name) + 1 >= 0x80:
        raise SetupError("topic name too long for the fixed response layout")
    hw_pos = 4 + 4 + 1 + 4 + 2 + 4 + 1 + 1 + len(name) + 1 + 4 + 2
    await cluster.produce(leader, topic, _record_batch(1))
    probe = bytearray(template)
    _INT64.pack_into(probe, offset_pos, 0)
    answer = await (await cluster.conn(leader)).roundtrip(bytes(probe))
    decoded = _decode(FETCH, 12, answer)
    error = first_error(decoded) or ""
    want = int(decoded.responses[0].partitions[0].high_watermark)
    got = _INT64.unpack_from(answer, hw_pos - 4)[0]
    if got != want:
        raise SetupError(f"high watermark not at byte {hw_pos} of the response ({got} != {want})")
    produce = _encode(PRODUCE, 9, "ProduceRequest", **produce_fields(topic, _record_batch(1), 1))
    longpoll = LongPoll(template, offset_pos, hw_pos, produce, topic)
    return Workload(
        "fetch-longpoll", leader, template, error, topics=[topic], longpoll=longpoll, leader=leader
    )


async def cleanup(cluster: Cluster, work: Workload) -> None:
    """Best effort: leave the group, delete the topics (so no replication runs on)."""
    if work.group is not None:
        with suppress(Exception):
            await cluster.leave_group(*work.group)
    if work.topics:
        with suppress(Exception):
            await cluster.delete_topics(work.topics)


async def _prepare(kind: str, run_id: str, args: argparse.Namespace, cluster: Cluster) -> Any:
    return await prepare(cluster, kind, run_id, args)


async def _log_end(leader: Address, topic: str, cluster: Cluster) -> Any:
    return await cluster.log_end(leader, topic)


async def _cleanup(work: Workload, cluster: Cluster) -> Any:
    await cleanup(cluster, work)


async def _warm_up(cluster: Cluster) -> Any:
    return await cluster.coordinator("rc-warmup")


def run_in_cluster(bootstrap: str, body: Callable[[Cluster], Awaitable[Any]]) -> Any:
    """One setup step on a fresh loop (the client processes are forked between steps)."""

    async def go() -> Any:
        async with Cluster(bootstrap) as cluster:
            return await body(cluster)

    return asyncio.run(go())


# ----------------------------------------------------------------------------- clients


class ClientStats:
    """Counters of one client process."""

    __slots__ = ("lost", "lost_error", "nbytes", "recording", "responses", "with_data")

    def __init__(self) -> None:
        self.responses = 0
        self.nbytes = 0
        self.lost = 0  # connections the broker closed while we ran
        self.lost_error = ""  # why the first of them was lost
        self.with_data = 0  # long-poll responses that brought new records
        self.recording = False  # inside the measured window


class PipelinedProtocol(asyncio.Protocol):
    """Keeps ``window`` copies of one frame in flight; counts length prefixes only."""

    transport: asyncio.Transport

    def __init__(self, multiples: list[bytes], stats: ClientStats) -> None:
        self.multiples = multiples  # multiples[k] = the frame k times
        self.window = len(multiples) - 1
        self.stats = stats
        self.running = False
        self.skip = 0  # bytes still to come of a response whose length has been read
        self.head = b""  # a length prefix cut by the end of the last read

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def start(self) -> None:
        self.running = True
        self.transport.write(self.multiples[self.window])

    def data_received(self, data: bytes) -> None:
        stats = self.stats
        n = len(data)
        stats.nbytes += n
        if self.head:
            data = self.head + data
            n = len(data)
            self.head = b""
        pos = self.skip
        if pos > n:
            self.skip = pos - n
            return
        done = 1 if pos else 0
        unpack = _LENGTH.unpack_from
        while pos + 4 <= n:
            end = pos + 4 + unpack(data, pos)[0]
            if end > n:
                self.skip = end - n
                break
            done += 1
            pos = end
        else:
            self.skip = 0
            if pos < n:
                self.head = data[pos:]
        if done:
            stats.responses += done
            if self.running:
                self.transport.write(
                    self.multiples[done] if done <= self.window else self.multiples[1] * done
                )

    def connection_lost(self, exc: Exception | None) -> None:
        if self.running:
            self.stats.lost += 1
            if not self.stats.lost_error:
                self.stats.lost_error = repr(exc) if exc else "closed by the peer"
        self.running = False


class LongPollProtocol(asyncio.Protocol):
    """One fetch in flight at the log end; the next one asks for the HW just read."""

    transport: asyncio.Transport

    def __init__(
        self,
        longpoll: LongPoll,
        offset: int,
        stats: ClientStats,
        offsets: array[int],
        times: array[float],
    ) -> None:
        self.frame = bytearray(longpoll.template)
        self.offset_pos = longpoll.offset_pos
        self.hw_end = longpoll.hw_pos + 8
        self.hw_pos = longpoll.hw_pos
        self.offset = offset
        self.stats = stats
        self.offsets = offsets  # samples: the offset a response brought first ...
        self.times = times  # ... and when it arrived
        self.buf = bytearray()
        self.running = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def start(self) -> None:
        self.running = True
        self._send()

    def _send(self) -> None:
        _INT64.pack_into(self.frame, self.offset_pos, self.offset)
        self.transport.write(bytes(self.frame))

    def data_received(self, data: bytes) -> None:
        stats = self.stats
        stats.nbytes += len(data)
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            end = 4 + _LENGTH.unpack_from(buf, 0)[0]
            if len(buf) < end:
                return
            hw = _INT64.unpack_from(buf, self.hw_pos)[0] if end >= self.hw_end else -1
            del buf[:end]
            stats.responses += 1
            if hw > self.offset:
                stats.with_data += 1
                if stats.recording:
                    self.offsets.append(self.offset)
                    self.times.append(time.perf_counter())
                self.offset = hw
            if self.running:
                self._send()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.running:
            self.stats.lost += 1
            if not self.stats.lost_error:
                self.stats.lost_error = repr(exc) if exc else "closed by the peer"
        self.running = False


class SteadyProducer(asyncio.Protocol):
    """Appends one record every 1/rate s (acks=1) and notes when each was sent."""

    transport: asyncio.Transport

    def __init__(self, frame: bytes, rate: float, sent: array[float]) -> None:
        self.frame = frame
        self.interval = 1.0 / rate
        self.sent = sent
        self.running = False
        self.next_at = 0.0
        self.handle: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def start(self) -> None:
        self.running = True
        self.next_at = asyncio.get_running_loop().time()
        self._tick()

    def _tick(self) -> None:
        if not self.running:
            return
        self.sent.append(time.perf_counter())
        self.transport.write(self.frame)
        self.next_at += self.interval
        self.handle = asyncio.get_running_loop().call_at(self.next_at, self._tick)

    def stop(self) -> None:
        self.running = False
        if self.handle is not None:
            self.handle.cancel()


@dataclass
class ClientSpec:
    """What one client process does."""

    target: Address
    connections: int
    window: int
    frame: bytes
    longpoll: LongPoll | None = None
    start_offset: int = 0
    producer_rate: float = 0.0  # > 0 in the one process that appends for the long-poll
    producer_target: Address | None = None


def _close_hard(transport: asyncio.Transport) -> None:
    # SO_LINGER 0: the close sends RST, so thousands of closed connections leave no
    # TIME_WAIT behind to run the next measurement out of ephemeral ports.
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def _client_main(conn: Connection, spec: ClientSpec) -> None:
    loop = asyncio.get_running_loop()
    stats = ClientStats()
    offsets: array[int] = array("q")
    times: array[float] = array("d")
    sent: array[float] = array("d")
    protocols: list[PipelinedProtocol | LongPollProtocol] = []
    errors: list[str] = []
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
    longpoll = spec.longpoll
    multiples = [spec.frame * k for k in range(spec.window + 1)]

    def factory() -> PipelinedProtocol | LongPollProtocol:
        if longpoll is not None:
            return LongPollProtocol(longpoll, spec.start_offset, stats, offsets, times)
        return PipelinedProtocol(multiples, stats)

    async def open_one() -> None:
        async with gate:
            try:
                _transport, protocol = await loop.create_connection(factory, *spec.target)
            except OSError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            else:
                protocols.append(protocol)

    await asyncio.gather(*(open_one() for _ in range(spec.connections)))
    producer: SteadyProducer | None = None
    if longpoll is not None and spec.producer_rate > 0 and spec.producer_target is not None:
        rate = spec.producer_rate
        _t, producer = await loop.create_connection(
            lambda: SteadyProducer(longpoll.produce_frame, rate, sent), *spec.producer_target
        )
    conn.send(("ready", len(protocols), len(errors), errors[0] if errors else ""))

    marks: list[tuple[int, int, int, float, float]] = []
    stopped = loop.create_future()

    def on_command() -> None:
        try:
            command = conn.recv()
        except (EOFError, OSError):
            command = "stop"
        if command == "start":
            for protocol in protocols:
                protocol.start()
            if producer is not None:
                producer.start()
        elif command == "mark":
            marks.append(
                (
                    stats.responses,
                    stats.nbytes,
                    stats.with_data,
                    time.process_time(),
                    time.perf_counter(),
                )
            )
            stats.recording = len(marks) == 1
        elif not stopped.done():
            stopped.set_result(None)

    loop.add_reader(conn.fileno(), on_command)
    await stopped
    loop.remove_reader(conn.fileno())
    for protocol in protocols:
        protocol.running = False
        _close_hard(protocol.transport)
    if producer is not None:
        producer.stop()
        _close_hard(producer.transport)
    await asyncio.sleep(0)
    conn.send(
        {
            "marks": marks,
            "lost": stats.lost,
            "lost_error": stats.lost_error,
            "offsets": offsets,
            "times": times,
            "sent": sent,
        }
    )


def _client_process(conn: Connection, spec: ClientSpec) -> None:
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:
        pass
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(_client_main(conn, spec))
    conn.close()


# ----------------------------------------------------------------------------- /proc


def proc_cpu_s(pid: int | None) -> float | None:
    """utime + stime of the whole process (every thread), seconds."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # fields[0] is field 3 (state): utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_wait_s(pid: int | None) -> float | None:
    """Time the process's threads spent runnable but waiting for a CPU (schedstat), s.

    On a machine shared with other work the broker can be the bottleneck while its CPU%
    stays well under 100: CPU% + wait% near 100 says it was, and starved."""
    if pid is None:
        return None
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with suppress(OSError), open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[1])
    except OSError:
        return None
    return total / 1e9


def broker_idle(pid: int | None, seconds: float = 2.0) -> str:
    """CPU the broker spends doing nothing asked (replica fetchers, timers), ms per s.

    From the on-CPU nanoseconds of schedstat: stat's 10 ms ticks are too coarse here."""
    if pid is None:
        return "-"

    def run_ns() -> int:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with suppress(OSError), open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total

    try:
        before = run_ns()
        time.sleep(seconds)
        return f"{(run_ns() - before) / 1e6 / seconds:.1f} ms CPU/s"
    except OSError:
        return "-"


def proc_rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def raise_nofile(needed: int) -> str:
    """Raise RLIMIT_NOFILE's soft limit to the hard one; say what happened."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            text = f"open files: soft limit raised {soft} -> {hard}"
            soft = hard
        except (ValueError, OSError) as exc:
            text = f"open files: could not raise the soft limit {soft} to {hard}: {exc}"
    else:
        text = f"open files: limit {soft}"
    if soft != resource.RLIM_INFINITY and soft < needed:
        text += f" -- NOT ENOUGH for {needed} descriptors: the largest runs may fail to connect"
    return text


# ----------------------------------------------------------------------------- measuring


@dataclass
class Row:
    """One line of the table."""

    kind: str
    connections: int
    in_flight: int
    req_per_s: float | None = None
    broker_us_per_req: float | None = None
    client_us_per_req: float | None = None
    broker_cpu_pct: float | None = None
    broker_wait_pct: float | None = None
    client_cpu_pct: float | None = None
    broker_rss_mb: float | None = None
    response_bytes: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    client_procs: int = 0
    responses: int = 0
    seconds: float = 0.0
    settle_s: float = 0.0  # until the broker answered a new connection after the row
    note: str = ""


def _percentile(ordered: list[float], p: float) -> float | None:
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def measure(
    work: Workload,
    connections: int,
    window: int,
    args: argparse.Namespace,
    broker_pid: int | None,
    start_offset: int = 0,
) -> Row:
    longpoll = work.longpoll
    in_flight = 1 if longpoll is not None else window
    row = Row(work.kind, connections, in_flight)
    notes = [n for n in (work.note, f"answer: {work.error}" if work.error else "") if n]
    procs = args.client_procs or math.ceil(connections / CONNECTIONS_PER_CLIENT_PROCESS)
    procs = max(1, min(procs, connections))
    row.client_procs = procs
    rate = 0.0
    if longpoll is not None:
        rate = args.longpoll_rate or min(100.0, max(1.0, 2000.0 / connections))
        notes.append(f"{rate:g} appends/s")

    context = multiprocessing.get_context("fork")
    children: list[tuple[Any, Connection]] = []
    for i, share in enumerate(_split(connections, procs)):
        ours, theirs = context.Pipe()
        spec = ClientSpec(
            target=work.target,
            connections=share,
            window=in_flight,
            frame=work.frame,
            longpoll=longpoll,
            start_offset=start_offset,
            producer_rate=rate if i == 0 else 0.0,
            producer_target=work.leader,
        )
        process = context.Process(target=_client_process, args=(theirs, spec), daemon=True)
        process.start()
        theirs.close()
        children.append((process, ours))

    def broadcast(command: str) -> None:
        for _process, ours in children:
            with suppress(OSError):
                ours.send(command)

    def finish(note: str) -> Row:
        broadcast("stop")
        for process, ours in children:
            with suppress(Exception):
                if ours.poll(30):
                    ours.recv()
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join()
        row.note = "; ".join([*notes, note])
        return row

    connected = 0
    for _process, ours in children:
        if not ours.poll(300):
            return finish("a client process did not connect within 300 s")
        try:
            _ready, ok, failed, error = ours.recv()
        except EOFError:
            return finish("a client process died while connecting")
        connected += ok
        if failed:
            notes.append(f"{failed} connections failed ({error})")
    if connected == 0:
        return finish("no connection")
    row.connections = connected

    broadcast("start")
    time.sleep(args.warmup)
    broadcast("mark")
    t0 = time.perf_counter()
    cpu0, wait0 = proc_cpu_s(broker_pid), proc_wait_s(broker_pid)
    time.sleep(args.seconds)
    broadcast("mark")
    t1 = time.perf_counter()
    cpu1, wait1 = proc_cpu_s(broker_pid), proc_wait_s(broker_pid)
    row.broker_rss_mb = proc_rss_mb(broker_pid)
    broadcast("stop")

    results: list[dict[str, Any]] = []
    for process, ours in children:
        try:
            if ours.poll(120):
                results.append(ours.recv())
        except EOFError:
            pass
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join()
    if len(results) != len(children):
        notes.append(f"{len(children) - len(results)} client process(es) did not report")

    elapsed = t1 - t0
    responses = nbytes = with_data = lost = 0
    lost_error = next((r["lost_error"] for r in results if r["lost_error"]), "")
    client_cpu = 0.0
    latencies: list[float] = []
    sent: Sequence[float] = next((r["sent"] for r in results if len(r["sent"])), ())
    for result in results:
        marks = result["marks"]
        lost += result["lost"]
        if len(marks) < 2:
            continue
        (r0, b0, d0, c0, _), (r1, b1, d1, c1, _) = marks[0], marks[1]
        responses += r1 - r0
        nbytes += b1 - b0
        with_data += d1 - d0
        client_cpu += c1 - c0
        for offset, arrived in zip(result["offsets"], result["times"], strict=True):
            k = offset - start_offset
            if 0 <= k < len(sent):
                latencies.append((arrived - sent[k]) * 1000)
    row.responses = responses
    row.seconds = elapsed
    row.req_per_s = responses / elapsed
    row.client_cpu_pct = 100 * client_cpu / elapsed
    if responses:
        row.client_us_per_req = client_cpu / responses * 1e6
        row.response_bytes = nbytes / responses
    if cpu0 is not None and cpu1 is not None:
        row.broker_cpu_pct = 100 * (cpu1 - cpu0) / elapsed
        if responses:
            row.broker_us_per_req = (cpu1 - cpu0) / responses * 1e6
    if wait0 is not None and wait1 is not None:
        row.broker_wait_pct = 100 * (wait1 - wait0) / elapsed
    if longpoll is not None:
        latencies.sort()
        row.p50_ms = _percentile(latencies, 50)
        row.p99_ms = _percentile(latencies, 99)
        if responses:
            notes.append(f"{100 * with_data / responses:.0f}% with data")
    if not responses:
        notes.append("no response in the window (a longer --warmup may help)")
    if lost:
        notes.append(f"{lost} connections lost while running ({lost_error})")
    row.note = "; ".join(notes)
    return row


async def _ping(cluster: Cluster) -> None:
    frame = _encode(
        API_VERSIONS,
        3,
        "ApiVersionsRequest",
        client_software_name=CLIENT_ID,
        client_software_version="1",
    )
    await (await cluster.conn(cluster.bootstrap)).roundtrip(frame, timeout_s=600)


def settle(bootstrap: str) -> float:
    """Wait until the broker answers a fresh connection: a row's requests that the
    broker had already read are still being handled after its clients have gone, and
    must not be charged to the next row. Seconds waited."""
    start = time.perf_counter()
    with suppress(Exception):
        run_in_cluster(bootstrap, _ping)
    return time.perf_counter() - start


def measure_repeated(
    work: Workload,
    connections: int,
    window: int,
    args: argparse.Namespace,
    broker_pid: int | None,
    bootstrap: str,
) -> Row:
    """``--repeat`` measurements; the one with the median broker CPU per request."""
    rows: list[Row] = []
    for _ in range(args.repeat):
        start_offset = 0
        if work.longpoll is not None and work.leader is not None:
            start_offset = run_in_cluster(
                bootstrap, functools.partial(_log_end, work.leader, work.longpoll.topic)
            )
        row = measure(work, connections, window, args, broker_pid, start_offset)
        row.settle_s = settle(bootstrap)
        if row.settle_s > 2:
            row.note = "; ".join(
                n
                for n in (row.note, f"broker busy {row.settle_s:.0f} s after the clients left")
                if n
            )
        rows.append(row)
    if len(rows) == 1:
        return rows[0]
    costs = [r.broker_us_per_req if r.broker_us_per_req is not None else math.inf for r in rows]
    figures = ", ".join("-" if c == math.inf else f"{c:.0f}" for c in costs)
    row = rows[sorted(range(len(rows)), key=costs.__getitem__)[len(rows) // 2]]
    row.note = "; ".join(n for n in (row.note, f"median of us/req {figures}") if n)
    return row


# ----------------------------------------------------------------------------- output

COLUMNS: list[tuple[str, str, int, str]] = [  # header, attribute, width, format
    ("kind", "kind", 16, "s"),
    ("conns", "connections", 5, "d"),
    ("infl", "in_flight", 4, "d"),
    ("req/s", "req_per_s", 8, ".0f"),
    ("brk us/req", "broker_us_per_req", 10, ".1f"),
    ("cli us/req", "client_us_per_req", 10, ".1f"),
    ("brk CPU%", "broker_cpu_pct", 8, ".0f"),
    ("brk wait%", "broker_wait_pct", 9, ".0f"),
    ("cli CPU%", "client_cpu_pct", 8, ".0f"),
    ("RSS MB", "broker_rss_mb", 7, ".0f"),
    ("resp B", "response_bytes", 7, ".0f"),
    ("p50 ms", "p50_ms", 7, ".1f"),
    ("p99 ms", "p99_ms", 7, ".1f"),
]


def format_header() -> str:
    cells = [f"{h:<{w}}" if fmt == "s" else f"{h:>{w}}" for h, _a, w, fmt in COLUMNS]
    return "  ".join([*cells, "note"])


def format_row(row: Row) -> str:
    cells = []
    for _h, attribute, width, fmt in COLUMNS:
        value = getattr(row, attribute)
        if value is None:
            cells.append(f"{'-':>{width}}")
        elif fmt == "s":
            cells.append(f"{value:<{width}}")
        else:
            cells.append(f"{value:>{width}{fmt}}")
    return "  ".join([*cells, row.note])


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _kinds(text: str) -> list[str]:
    kinds = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown kind(s) {unknown}; known: {', '.join(KINDS)}")
    return kinds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Broker CPU per request: pipelined, pre-encoded requests, no decoding."
    )
    parser.add_argument("--bootstrap", help="HOST:PORT of a running broker (else start one)")
    parser.add_argument("--broker-pid", type=int, help="with --bootstrap: pid for the CPU figure")
    parser.add_argument(
        "--broker-cwd",
        type=Path,
        default=ROOT,
        help="checkout whose broker (and protocol package) is used (this one)",
    )
    parser.add_argument("--brokers", type=int, default=3, help="brokers of the subprocess (3)")
    parser.add_argument(
        "--replication-factor", type=int, help="of the acks=all topic (min(3, brokers))"
    )
    parser.add_argument(
        "--kinds", type=_kinds, default=list(KINDS), help=f"comma list of: {', '.join(KINDS)}"
    )
    parser.add_argument("--connections", type=_ints, default=[8], help="comma list (8)")
    parser.add_argument(
        "--window", type=_ints, default=[32], help="requests in flight per connection (32)"
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="measured window (3)")
    parser.add_argument("--warmup", type=float, default=1.0, help="before the window (1)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="measure each row N times, keep the median (1)"
    )
    parser.add_argument(
        "--client-procs", type=int, default=0, help="client processes (one per 2500 connections)"
    )
    parser.add_argument(
        "--longpoll-rate",
        type=float,
        default=0.0,
        help="appends/s waking the long-polls (min(100, 2000/connections), at least 1)",
    )
    parser.add_argument(
        "--longpoll-wait-ms", type=int, default=500, help="max_wait of the fetches (500)"
    )
    parser.add_argument("--json", action="store_true", help="also one JSON line per row")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    broker_cwd = args.broker_cwd.resolve()
    sys.path.insert(0, str(broker_cwd))
    import protocol

    most = max(args.connections)
    limits = raise_nofile(most + 1000)
    broker: BrokerSubprocess | None = None
    broker_pid: int | None = args.broker_pid
    if args.bootstrap:
        bootstrap = args.bootstrap
        where = f"broker {bootstrap}" + (f" pid {broker_pid}" if broker_pid else " (CPU: -)")
    else:
        extra = ["--brokers", str(args.brokers)]
        extra += ["--override", "group.initial.rebalance.delay.ms=0"]
        broker = BrokerSubprocess(extra, cwd=broker_cwd)
        bootstrap, broker_pid = broker.bootstrap, broker.proc.pid
        where = f"minikafka x{args.brokers} from {broker_cwd} pid {broker_pid}"
    try:
        uvloop_text = "uvloop"
        try:
            import uvloop  # noqa: F401
        except ImportError:
            uvloop_text = "asyncio (no uvloop)"
        # The offsets topic exists before the idle figure is taken: it is background work.
        run_in_cluster(bootstrap, _warm_up)
        idle = broker_idle(broker_pid)
        print(f"# {where}; clients: {uvloop_text}, codec {Path(protocol.__file__).parent}")
        print(
            f"# {limits}; broker idle: {idle}; {args.seconds:g} s per row after {args.warmup:g} s"
        )
        print(format_header(), flush=True)
        run_id = uuid.uuid4().hex[:6]
        rows: list[Row] = []
        for kind in args.kinds:
            try:
                work = run_in_cluster(bootstrap, functools.partial(_prepare, kind, run_id, args))
            except Exception as exc:  # a row that says why, then the next kind
                row = Row(kind, 0, 0, note=f"setup failed: {type(exc).__name__}: {exc}")
                rows.append(row)
                print(format_row(row), flush=True)
                continue
            for connections in args.connections:
                for window in [1] if work.longpoll is not None else args.window:
                    row = measure_repeated(work, connections, window, args, broker_pid, bootstrap)
                    rows.append(row)
                    print(format_row(row), flush=True)
            run_in_cluster(bootstrap, functools.partial(_cleanup, work))
        if args.json:
            for row in rows:
                print(json.dumps(dataclasses.asdict(row)))
    finally:
        if broker is not None:
            code = broker.stop()
            if code != 0:
                print(f"warning: broker exited with {code}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
