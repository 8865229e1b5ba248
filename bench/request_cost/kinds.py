"""request_cost's setup: the kinds, their frames, and what each needs on the broker.

Nothing here is timed. ``prepare`` creates what a kind needs (topics, data, a group
member) over plain one-at-a-time connections whose answers are decoded, encodes the
kind's frame once, and checks it against one decoded answer; ``cleanup`` undoes it.
The codec is imported late: ``request_cost.main`` first loads the ``protocol`` package of
``--broker-cwd`` (``bench.lib.checkout``), so the frames are encoded by the checkout under
test.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT = 0, 1, 2, 3, 8
FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS = 18, 19, 20
CONSUMER_GROUP_HEARTBEAT = 68

KINDS: dict[str, tuple[int, int]] = {  # kind -> (api key, version) measured
    "api-versions": (API_VERSIONS, 3),
    "metadata": (METADATA, 9),
    "metadata-100x10": (METADATA, 9),
    "produce-acks1": (PRODUCE, 9),
    "produce-acksall": (PRODUCE, 9),
    "fetch": (FETCH, 12),
    "fetch-longpoll": (FETCH, 12),
    "fetch-parked": (FETCH, 12),
    "heartbeat": (HEARTBEAT, 4),
    "consumer-heartbeat": (CONSUMER_GROUP_HEARTBEAT, 1),
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
#: ConsumerGroupHeartbeat answers worth waiting out during setup: the offsets topic is
#: being created or its partition loaded.
COORDINATOR_NOT_READY = ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE")
OFFSET_SENTINEL = 0x0102030405060708  # found in the encoded long-poll frame, then patched

LENGTH = struct.Struct(">i")
INT64 = struct.Struct(">q")


class SetupError(RuntimeError):
    """A kind could not be prepared; its row says why."""


# ----------------------------------------------------------------------------- codec
#
# Imported late: main() first loads the protocol package of --broker-cwd, so the frames
# are encoded by the checkout under test.


def _builder(api_key: int, version: int) -> Any:
    from protocol.builders import request_builder

    return request_builder(api_key, version)


def _encode(api_key: int, version: int, message: str, **fields: Any) -> bytes:
    from protocol.codec import encode_request

    payload = getattr(_builder(api_key, version), message)(**fields)
    return encode_request(api_key, version, CORRELATION_ID, CLIENT_ID, payload)


def api_versions_frame() -> bytes:
    """ApiVersions v3, as every client sends first (the kind, the idle connections, pings)."""
    return _encode(
        API_VERSIONS,
        3,
        "ApiVersionsRequest",
        client_software_name=CLIENT_ID,
        client_software_version="1",
    )


def _decode(api_key: int, version: int, frame: bytes) -> Any:
    from protocol.codec import decode_response

    return decode_response(api_key, version, frame)[1]


def _record_batch(count: int) -> bytes:
    from protocol.record_builder import build_record_batch

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
    """One request at a time, answers decoded: for setup and checks, never timed. The
    project's asyncio client shell (``client_io.ClientShell``), imported late like the
    codec."""

    def __init__(self, shell: Any) -> None:
        self._shell = shell

    @classmethod
    async def open(cls, address: Address) -> SetupConnection:
        from client_io import ClientShell

        return cls(await ClientShell.open(*address, client_id=CLIENT_ID))

    async def roundtrip(self, frame: bytes, timeout_s: float = SETUP_TIMEOUT_S) -> bytes:
        """Send a whole frame (under the connection's next correlation id); the response
        frame without its length prefix."""
        self._shell.send_frame(frame[4:], expect_response=True)
        await self._shell.drain()
        async with asyncio.timeout(timeout_s):
            response = await self._shell.next_response()
        return bytes(response.frame)

    async def call(self, api_key: int, version: int, message: str, **fields: Any) -> Any:
        frame = _encode(api_key, version, message, **fields)
        return _decode(api_key, version, await self.roundtrip(frame))

    async def close(self) -> None:
        await self._shell.close()


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

    async def consumer_heartbeat(self, coordinator: Address, **fields: Any) -> Any:
        """A ConsumerGroupHeartbeat v1 (fields left out are null: a lightweight one),
        retried while the coordinator is not ready."""
        fields = {
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": -1,
            "subscribed_topic_names": None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": None,
            **fields,
        }
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        while True:
            answer = await (await self.conn(coordinator)).call(
                CONSUMER_GROUP_HEARTBEAT, 1, "ConsumerGroupHeartbeatRequest", **fields
            )
            error = first_error(answer)
            if error not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                return answer
            await asyncio.sleep(0.2)

    async def consumer_join(self, group: str, topic: str) -> tuple[Address, str, int]:
        """A one-member KIP-848 group subscribed to ``topic``, its assignment
        acknowledged (the member owns what it was given, nothing is pending): the state
        of a member between rebalances. (coordinator, member id, member epoch)."""
        import uuid

        coordinator = await self.coordinator(group)
        member = str(uuid.uuid4())  # v1: the client generates it (KIP-1082)
        b = _builder(CONSUMER_GROUP_HEARTBEAT, 1)
        answer = await self.consumer_heartbeat(
            coordinator,
            group_id=group,
            member_id=member,
            member_epoch=0,
            rebalance_timeout=SESSION_TIMEOUT_MS,
            subscribed_topic_names=(topic,),
            topic_partitions=(),
        )
        for _ in range(50):
            error = first_error(answer)
            if error:
                raise SetupError(f"ConsumerGroupHeartbeat: {error}")
            if answer.assignment is None:  # nothing new: the member is stable
                return coordinator, member, int(answer.member_epoch)
            owned = tuple(
                b.TopicPartitions(topic_id=tp.topic_id, partitions=tuple(tp.partitions))
                for tp in answer.assignment.topic_partitions
            )
            answer = await self.consumer_heartbeat(
                coordinator,
                group_id=group,
                member_id=member,
                member_epoch=int(answer.member_epoch),
                topic_partitions=owned,
            )
        raise SetupError("ConsumerGroupHeartbeat: the assignment never settled")

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
    parked_wait_ms: int = 0  # fetch-parked: every request waits this long in the broker


async def prepare(cluster: Cluster, kind: str, run_id: str, args: argparse.Namespace) -> Workload:
    """Create what the kind needs (topics, data, a group member) and encode its frame."""
    api_key, version = KINDS[kind]
    base = f"rc-{run_id}-{kind}"
    if kind == "api-versions":
        work = Workload(kind, cluster.bootstrap, api_versions_frame())
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
    elif kind == "fetch-parked":
        # An empty topic that nobody writes to: every fetch at offset 0 (its log end)
        # waits out max_wait and is answered empty. Not checked by sending it: the
        # check would wait max_wait too, and the rows' answers show the error codes.
        leader = (await cluster.create_topics([base], 1, 1))[base]
        frame = fetch_frame(base, 0, args.parked_wait_ms)
        note = f"max_wait {args.parked_wait_ms} ms"
        work = Workload(kind, leader, frame, note=note, topics=[base])
        work.parked_wait_ms = args.parked_wait_ms
        return work
    elif kind == "consumer-heartbeat":
        # KIP-848: a member subscribed to a one-partition topic, joined (epoch 0) and its
        # assignment acknowledged; then the heartbeat it sends every interval while
        # nothing changes: the lightweight one, only group, member id and epoch (every
        # other field null: "unchanged"), as librdkafka sends it.
        await cluster.create_topics([base], 1, 1)
        coordinator, member, epoch = await cluster.consumer_join(base, base)
        frame = _encode(
            CONSUMER_GROUP_HEARTBEAT,
            1,
            "ConsumerGroupHeartbeatRequest",
            group_id=base,
            member_id=member,
            member_epoch=epoch,
            instance_id=None,
            rack_id=None,
            rebalance_timeout=-1,
            subscribed_topic_names=None,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=None,
        )
        work = Workload(
            kind,
            coordinator,
            frame,
            note=f"member epoch {epoch}",
            topics=[base],
            group=(coordinator, base, member),
        )
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
    sentinel = INT64.pack(OFFSET_SENTINEL)
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
    INT64.pack_into(probe, offset_pos, 0)
    answer = await (await cluster.conn(leader)).roundtrip(bytes(probe))
    decoded = _decode(FETCH, 12, answer)
    error = first_error(decoded) or ""
    want = int(decoded.responses[0].partitions[0].high_watermark)
    got = INT64.unpack_from(answer, hw_pos - 4)[0]
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
        coordinator, group, member = work.group
        with suppress(Exception):
            if work.kind == "consumer-heartbeat":  # KIP-848's leave: member epoch -1
                await cluster.consumer_heartbeat(
                    coordinator, group_id=group, member_id=member, member_epoch=-1
                )
            else:
                await cluster.leave_group(coordinator, group, member)
    if work.topics:
        with suppress(Exception):
            await cluster.delete_topics(work.topics)


# Setup steps, each run by ``run_in_cluster`` on a fresh loop (with functools.partial).


async def prepare_step(kind: str, run_id: str, args: argparse.Namespace, cluster: Cluster) -> Any:
    return await prepare(cluster, kind, run_id, args)


async def log_end_step(leader: Address, topic: str, cluster: Cluster) -> Any:
    return await cluster.log_end(leader, topic)


async def cleanup_step(work: Workload, cluster: Cluster) -> Any:
    await cleanup(cluster, work)


async def warm_up_step(cluster: Cluster) -> Any:
    """The offsets topic exists before the idle figure is taken: it is background work."""
    return await cluster.coordinator("rc-warmup")


async def ping_step(cluster: Cluster) -> None:
    """One ApiVersions on a fresh connection, waiting as long as the broker needs."""
    await (await cluster.conn(cluster.bootstrap)).roundtrip(api_versions_frame(), timeout_s=600)


def run_in_cluster(bootstrap: str, body: Callable[[Cluster], Awaitable[Any]]) -> Any:
    """One setup step on a fresh loop (the client processes are forked between steps)."""

    async def go() -> Any:
        async with Cluster(bootstrap) as cluster:
            return await body(cluster)

    return asyncio.run(go())
