"""AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92) and DescribeGroups (15) of a
share group, over the wire (confluent-kafka 2.16's AdminClient has no share-group offset
calls, so a ``RawClient`` sends them) against a broker whose share consumers are
confluent-kafka's ``ShareConsumer``.

Alter and delete act only on an empty group (NON_EMPTY_GROUP while a consumer is in it);
the new start offset is durable (DescribeShareGroupOffsets reads it from the share
coordinator) and the share partition the leader had in memory is dropped, so the next
consumer starts where the alter put it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from protocol.builders import request_builder
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster
from tests.integration.test_consumer_group_kip848_clients import _cli, _rows
from tests.integration.test_share_groups import (
    WAIT,
    ShareMember,
    _initialised,
    _members,
    _produce,
    _share_partition,
    _start,
    _stop,
)

pytestmark = pytest.mark.asyncio

SETTINGS = {
    "share.coordinator.state.topic.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
}


async def _alter(raw: RawClient, group: str, topics: dict[str, dict[int, int]]) -> Any:
    b = request_builder(91, 0)
    return await raw.request(
        91,
        0,
        "AlterShareGroupOffsetsRequest",
        group_id=group,
        topics=tuple(
            b.AlterShareGroupOffsetsRequestTopic(
                topic_name=name,
                partitions=tuple(
                    b.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                    for p, o in offsets.items()
                ),
            )
            for name, offsets in topics.items()
        ),
    )


async def _delete(raw: RawClient, group: str, topics: list[str]) -> Any:
    b = request_builder(92, 0)
    return await raw.request(
        92,
        0,
        "DeleteShareGroupOffsetsRequest",
        group_id=group,
        topics=tuple(b.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics),
    )


async def _coordinator_ready(raw: RawClient, group: str) -> None:
    """FindCoordinator until it answers (the first one makes ``__consumer_offsets``), as
    a client does before asking a group's coordinator."""
    answered: list[Any] = []

    async def ask() -> bool:
        found = await raw.request(
            10, 4, "FindCoordinatorRequest", key_type=0, coordinator_keys=(group,)
        )
        answered.append(found)
        return bool(found.coordinators[0].error_code == ErrorCode.none)

    await wait_until(ask, f"a coordinator for {group}", **WAIT)


async def _start_offsets(raw: RawClient, group: str, topic: str) -> list[int]:
    b = request_builder(90, 1)
    described = await raw.request(
        90,
        1,
        "DescribeShareGroupOffsetsRequest",
        groups=(
            b.DescribeShareGroupOffsetsRequestGroup(
                group_id=group,
                topics=(
                    b.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=(0,)),
                ),
            ),
        ),
    )
    (g,) = described.groups
    assert g.error_code == ErrorCode.none
    return [p.start_offset for t in g.topics for p in t.partitions]


async def _consume_all(app: MiniKafka, group: str, topic: str, count: int) -> ShareMember:
    """A share consumer that joins, reads until the share start offset passes ``count``
    (everything acknowledged), and leaves."""
    member = ShareMember(app.bootstrap, group, topic)
    tasks = await _start([member])
    try:
        sp = await _initialised(app, group, topic)
        await wait_until(lambda: sp.start_offset >= count, "everything acknowledged", **WAIT)
    finally:
        await _stop([member], tasks)
    await wait_until(lambda: _members(app, group) == 0, "the member left", **WAIT)
    return member


async def test_alter_and_delete_share_group_offsets_on_an_empty_group() -> None:
    group, topic = f"share-{uuid.uuid4().hex[:8]}", "share-altered"
    async with running_cluster(**SETTINGS) as app:
        app.cluster.create_topic(topic, 1, 1, {})
        member = ShareMember(app.bootstrap, group, topic)
        tasks = await _start([member])
        raw = await RawClient.connect(app.bootstrap)
        try:
            sp = await _initialised(app, group, topic)
            await asyncio.to_thread(_produce, app.bootstrap, topic, [b"%d" % i for i in range(8)])
            await wait_until(lambda: sp.start_offset == 8, "the 8 acknowledged", **WAIT)
            # a member is in the group: nothing changes
            busy = await _alter(raw, group, {topic: {0: 2}})
            assert (busy.error_code, busy.responses) == (ErrorCode.non_empty_group, ())
            busy_delete = await _delete(raw, group, [topic])
            assert busy_delete.error_code == ErrorCode.non_empty_group
            await _stop([member], tasks)
            await wait_until(lambda: _members(app, group) == 0, "the member left", **WAIT)

            altered = await _alter(raw, group, {topic: {0: 3, 7: 0}, "no-such-topic": {0: 0}})
            assert altered.error_code == ErrorCode.none
            assert [
                (t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
                for t in altered.responses
            ] == [
                (topic, [(0, ErrorCode.none), (7, ErrorCode.unknown_topic_or_partition)]),
                ("no-such-topic", [(0, ErrorCode.unknown_topic_or_partition)]),
            ]
            assert altered.responses[0].topic_id == app.cluster.topics[topic].topic_id
            # durable at the share coordinator; the leader's in-memory state is gone
            assert await _start_offsets(raw, group, topic) == [3]
            assert _share_partition(app, group, topic) is None
            unknown = await _delete(raw, "no-such-group", [topic])
            assert unknown.error_code == ErrorCode.group_id_not_found

            # the next consumer starts at offset 3
            again = await _consume_all(app, group, topic, 8)
            assert sorted(again.delivered()) == [(o, 1) for o in range(3, 8)]

            deleted = await _delete(raw, group, [topic, "no-such-topic"])
            assert deleted.error_code == ErrorCode.none
            assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
                (topic, ErrorCode.none),
                ("no-such-topic", ErrorCode.unknown_topic_or_partition),
            ]
            assert await _start_offsets(raw, group, topic) == [-1]
            assert _share_partition(app, group, topic) is None
        finally:
            await raw.close()
            member.stop()


async def test_describe_groups_answers_a_share_group_as_not_a_classic_group() -> None:
    """Kafka 4.2's DescribeGroups: a share group is no classic group, so it is described
    as Dead (GROUP_ID_NOT_FOUND only from v6, which Kafka 4.2 answers and we do not
    serve); ListGroups lists it with type ``share``."""
    group, topic = f"share-{uuid.uuid4().hex[:8]}", "share-listed"
    async with running_cluster(**SETTINGS) as app:
        app.cluster.create_topic(topic, 1, 1, {})
        member = ShareMember(app.bootstrap, group, topic)
        tasks = await _start([member])
        raw = await RawClient.connect(app.bootstrap)
        try:
            await wait_until(lambda: _members(app, group) == 1, "the member joined", **WAIT)
            described = await raw.request(
                15, 5, "DescribeGroupsRequest", groups=(group,), include_authorized_operations=False
            )
            listed = await raw.request(
                16, 5, "ListGroupsRequest", states_filter=(), types_filter=("share",)
            )
        finally:
            await raw.close()
            await _stop([member], tasks)
    (g,) = described.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.members) == (
        ErrorCode.none,
        "Dead",
        "",
        (),
    )
    assert [(x.group_id, x.group_type) for x in listed.groups] == [(group, "share")]


async def test_cli_describes_a_share_group_members_start_offsets_and_lag() -> None:
    """``minikafka groups describe`` of a share group: Kafka 4.2's
    ``kafka-share-groups.sh`` views (state, members, start offset and lag)."""
    group, topic = f"share-{uuid.uuid4().hex[:8]}", f"share-cli-{uuid.uuid4().hex[:6]}"
    async with running_cluster(**SETTINGS) as app:
        app.cluster.create_topic(topic, 1, 1, {})
        manager = app.brokers[0].services.share_partition_manager
        member = ShareMember(app.bootstrap, group, topic)
        tasks = await _start([member])
        try:
            sp = await _initialised(app, group, topic)
            await asyncio.to_thread(_produce, app.bootstrap, topic, [b"%d" % i for i in range(5)])
            await wait_until(
                lambda: sp.start_offset == 5 and manager.pending_writes == 0,
                "the 5 acknowledged and written",
                **WAIT,
            )
            state = _rows(await _cli(app.bootstrap, "groups", "describe", group, "--state"))
            members = _rows(await _cli(app.bootstrap, "groups", "describe", group, "--members"))
            listed = _rows(await _cli(app.bootstrap, "groups", "list", "--type", "share"))
        finally:
            await _stop([member], tasks)
        await wait_until(lambda: _members(app, group) == 0, "the member left", **WAIT)
        await asyncio.to_thread(_produce, app.bootstrap, topic, [b"x", b"y", b"z"])
        offsets = _rows(await _cli(app.bootstrap, "groups", "describe", group))
    assert state[0] == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
    assert (state[1][0], state[1][-2:]) == (group, ["Stable", "1"])
    assert members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert (members[1][0], members[1][-2:]) == (group, ["1", f"{topic}:0"])
    assert listed == [["GROUP", "TYPE"], [group, "Share"]]
    assert offsets[0] == ["Share", "group", f"'{group}'", "has", "no", "active", "members."]
    assert offsets[1] == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
    # the durable start offset moves with the share partition's next write (Kafka's): at
    # most 5; the lag counts the 3 records no one has had, whatever it is
    (row,) = offsets[2:]
    assert row[:3] == [group, topic, "0"] and 0 <= int(row[3]) <= 5 and row[4] == "3"


async def test_alter_share_group_offsets_makes_a_group_before_its_first_use() -> None:
    """Kafka 4.2 (KAFKA-19662): offsets set for a group that does not exist yet make it,
    and its first consumer starts there."""
    group, topic = f"share-{uuid.uuid4().hex[:8]}", "share-preset"
    async with running_cluster(**SETTINGS) as app:
        app.cluster.create_topic(topic, 1, 1, {})
        await asyncio.to_thread(_produce, app.bootstrap, topic, [b"%d" % i for i in range(6)])
        raw = await RawClient.connect(app.bootstrap)
        try:
            await _coordinator_ready(raw, group)
            preset = await _alter(raw, group, {topic: {0: 4}})
            assert await _start_offsets(raw, group, topic) == [4]
        finally:
            await raw.close()
        member = await _consume_all(app, group, topic, 6)
    assert [p.error_code for t in preset.responses for p in t.partitions] == [ErrorCode.none]
    assert sorted(member.delivered()) == [(4, 1), (5, 1)]
