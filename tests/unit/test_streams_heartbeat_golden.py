"""Golden bytes: the project's streams member (``kafka_tools/client/streams_member.py``)
encodes its joining StreamsGroupHeartbeat v0 exactly as Kafka's message definition
(``StreamsGroupHeartbeatRequest.json``) lays it out: the bytes below are written field by
field from that definition, not from our encoder."""

from __future__ import annotations

import struct

from kafka_tools.client.cluster import KafkaClient
from kafka_tools.client.streams_member import StreamsMember, SubtopologySpec, TopologySpec
from protocol.builders import request_builder
from protocol.codec import encode_request

TOPOLOGY = TopologySpec(
    1,
    (
        SubtopologySpec(
            "0",
            source_topics=("in",),
            repartition_sink_topics=("rep",),
            changelog_topics=("cl",),
            copartition_groups=((0,),),
        ),
        SubtopologySpec("1", repartition_source_topics=(("rep", 2),)),
    ),
)


def s(text: str) -> bytes:  # compact string
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def arr(*items: bytes) -> bytes:  # compact array
    return bytes([len(items) + 1]) + b"".join(items)


TAGS = b"\x00"


def topic_info(name: str, partitions: int, configs: bytes) -> bytes:
    return s(name) + struct.pack(">ih", partitions, 0) + configs + TAGS


def test_the_joining_heartbeat_is_kafkas_layout() -> None:
    member = StreamsMember(
        KafkaClient("127.0.0.1:1"),
        "app",
        TOPOLOGY,
        member_id="m-1",
        process_id="p-1",
        rebalance_timeout_ms=30000,
        user_endpoint=("localhost", 8080),
        client_tags={"zone": "z1"},
    )
    payload = member._request(request_builder(88, 0), leaving=False)
    frame = encode_request(88, 0, 7, "cid", payload)
    header = struct.pack(">hhih", 88, 0, 7, 3) + b"cid" + TAGS
    subtopology_0 = (
        s("0")
        + arr(s("in"))  # SourceTopics
        + arr()  # SourceTopicRegex
        + arr(topic_info("cl", 0, arr(s("cleanup.policy") + s("compact") + TAGS)))
        + arr(s("rep"))  # RepartitionSinkTopics
        + arr()  # RepartitionSourceTopics
        + arr(arr(struct.pack(">h", 0)) + arr() + arr() + TAGS)  # CopartitionGroups
        + TAGS
    )
    subtopology_1 = (
        s("1") + arr() + arr() + arr() + arr() + arr(topic_info("rep", 2, arr())) + arr() + TAGS
    )
    body = (
        s("app")  # GroupId
        + s("m-1")  # MemberId
        + struct.pack(">ii", 0, 0)  # MemberEpoch, EndpointInformationEpoch
        + b"\x00\x00"  # InstanceId, RackId: null
        + struct.pack(">i", 30000)  # RebalanceTimeoutMs
        + b"\x01"  # Topology: present
        + struct.pack(">i", 1)
        + arr(subtopology_0, subtopology_1)
        + TAGS
        + arr()  # ActiveTasks: [] when joining
        + arr()  # StandbyTasks
        + arr()  # WarmupTasks
        + s("p-1")  # ProcessId
        + b"\x01"  # UserEndpoint: present
        + s("localhost")
        + struct.pack(">H", 8080)
        + TAGS
        + arr(s("zone") + s("z1") + TAGS)  # ClientTags
        + b"\x00\x00"  # TaskOffsets, TaskEndOffsets: null
        + b"\x00"  # ShutdownApplication
        + TAGS
    )
    assert frame[4:] == header + body
    assert struct.unpack(">i", frame[:4])[0] == len(header + body)
