"""Representative streams group records (KIP-1071), one or more per record type, for the
golden bytes in ``tests/data/streams_group_records.json`` (Kafka 4.2's schemas: key
types 17, 19-23, value version 0)."""

from __future__ import annotations

from broker.group.streams.streams_group import StreamsGroup
from broker.group.streams.streams_group_member import Endpoint, MemberState, StreamsGroupMember
from broker.group.streams.streams_group_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    MEMBER_METADATA,
    METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    TOPOLOGY,
    StreamsGroupRecord,
    current_assignment_value,
    member_metadata_value,
    metadata_value,
    target_value,
    topology_value,
)
from broker.group.streams.streams_topology import (
    CopartitionGroup,
    StreamsTopology,
    Subtopology,
    TopicInfo,
)
from broker.group.streams.tasks_tuple import TasksTuple


def _group(validated: int, configs: dict[str, str]) -> StreamsGroup:
    group = StreamsGroup("app")
    group.group_epoch = 7
    group.metadata_hash = -1234567890123
    group.validated_topology_epoch = validated
    group.last_assignment_configs = configs
    return group


MEMBER = StreamsGroupMember(
    "member-1",
    member_epoch=5,
    previous_member_epoch=4,
    state=MemberState.UNREVOKED_TASKS,
    rack_id="rack-a",
    rebalance_timeout_ms=30000,
    client_id="app-StreamThread-1",
    client_host="/127.0.0.1",
    topology_epoch=1,
    process_id="a5c5b5a0-0000-4000-8000-000000000001",
    user_endpoint=Endpoint("localhost", 8080),
    client_tags=(("zone", "eu-1"),),
    assigned_tasks=TasksTuple.of({"0": [0, 2]}, {"1": [1]}),
    tasks_pending_revocation=TasksTuple.of({"1": [3]}),
)

TOPOLOGY_VALUE = StreamsTopology.of(
    1,
    [
        Subtopology(
            "0",
            source_topics=("input", "table"),
            repartition_sink_topics=("app-rep",),
            state_changelog_topics=(
                TopicInfo("app-store-changelog", 0, 0, (("cleanup.policy", "compact"),)),
            ),
            copartition_groups=(CopartitionGroup((0, 1)),),
        ),
        Subtopology("1", repartition_source_topics=(TopicInfo("app-rep", 4, 3),)),
    ],
)

CASES: dict[str, StreamsGroupRecord] = {
    "metadata_not_validated": StreamsGroupRecord(
        METADATA, "app", None, metadata_value(_group(-1, {}))
    ),
    "metadata_validated": StreamsGroupRecord(
        METADATA, "app", None, metadata_value(_group(1, {"num.standby.replicas": "1"}))
    ),
    "metadata_tombstone": StreamsGroupRecord(METADATA, "app"),
    "member_metadata": StreamsGroupRecord(
        MEMBER_METADATA, "app", "member-1", member_metadata_value(MEMBER)
    ),
    "member_metadata_no_endpoint": StreamsGroupRecord(
        MEMBER_METADATA,
        "app",
        "m2",
        member_metadata_value(StreamsGroupMember("m2", process_id="p")),
    ),
    "member_metadata_tombstone": StreamsGroupRecord(MEMBER_METADATA, "app", "member-1"),
    "target_assignment_metadata": StreamsGroupRecord(
        TARGET_ASSIGNMENT_METADATA, "app", None, {"AssignmentEpoch": 7}
    ),
    "target_assignment_member": StreamsGroupRecord(
        TARGET_ASSIGNMENT_MEMBER,
        "app",
        "member-1",
        target_value(TasksTuple.of({"0": [0, 2], "1": [0]}, {"1": [1]})),
    ),
    "current_member_assignment": StreamsGroupRecord(
        CURRENT_MEMBER_ASSIGNMENT, "app", "member-1", current_assignment_value(MEMBER)
    ),
    "topology": StreamsGroupRecord(TOPOLOGY, "app", None, topology_value(TOPOLOGY_VALUE)),
    "topology_tombstone": StreamsGroupRecord(TOPOLOGY, "app"),
}
