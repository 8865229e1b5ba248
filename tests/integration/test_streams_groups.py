"""Streams groups (KIP-1071) over TCP, driven by the project's streams member
(``kafka_tools/client/streams_member.py``: Kafka Streams' heartbeat state machine).

The topology: subtopology 0 reads ``input`` (4 partitions) and writes a repartition
topic; subtopology 1 reads it; both keep a state store (changelog topics), so both
have standby tasks (``group.streams.num.standby.replicas=1``). The broker creates the
three internal topics with 4 partitions each.

The tests step the members' heartbeats themselves (a heartbeat round is one heartbeat
per live member) and wait for states, never for times; only the dead member's test
lets real time pass, until the broker's session timeout (1 s here) fences it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from broker.cluster.features import STREAMS_VERSION, UpgradeType
from broker.group.streams.streams_group import StreamsGroupState
from kafka_tools.admin_commands import groups_describe
from kafka_tools.client import AdminError, KafkaClient
from kafka_tools.client.streams_member import (
    MemberState,
    StreamsMember,
    SubtopologySpec,
    TopologySpec,
)
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster

PARTITIONS = 4
STREAMS: dict[str, Any] = {
    "group.streams.session.timeout.ms": "1000",
    "group.streams.min.session.timeout.ms": "500",
    "group.streams.heartbeat.interval.ms": "200",
    "group.streams.min.heartbeat.interval.ms": "100",
    "group.streams.num.standby.replicas": "1",
}
WAIT: dict[str, Any] = {"attempts": 400, "step_s": 0.05}
TOPOLOGY = TopologySpec(
    1,
    (
        SubtopologySpec(
            "0",
            source_topics=("input",),
            repartition_sink_topics=("app-repartition",),
            changelog_topics=("app-store-changelog",),
        ),
        SubtopologySpec(
            "1",
            repartition_source_topics=(("app-repartition", 0),),
            changelog_topics=("app-agg-changelog",),
        ),
    ),
)
INTERNAL = ("app-agg-changelog", "app-repartition", "app-store-changelog")

module = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kafka() -> AsyncIterator[MiniKafka]:
    async with running_cluster(**STREAMS) as app:
        app.cluster.create_topic("input", PARTITIONS, 1, {})
        yield app


def _members(client: KafkaClient, group: str, names: Sequence[str]) -> list[StreamsMember]:
    return [
        StreamsMember(
            client,
            group,
            TOPOLOGY,
            member_id=f"{group}-{n}",
            process_id=f"process-{n}",
            user_endpoint=(f"host-{n}", 8080),
        )
        for n in names
    ]


def _group(app: MiniKafka, broker: int, group: str) -> Any:
    return app.brokers[broker].services.coordinators.streams_group.group(group)


async def _converge(
    app: MiniKafka, group: str, members: Sequence[StreamsMember], broker: int = 0
) -> None:
    """Heartbeat rounds until every member and the group are stable."""
    for _ in range(60):
        for m in members:
            await m.heartbeat()
        found = _group(app, broker, group)
        if (
            found is not None
            and found.state is StreamsGroupState.STABLE
            and all(m.state is MemberState.STABLE for m in members)
        ):
            return
    raise AssertionError(f"group {group} never converged: {[m.state for m in members]}")


def _actives(members: Sequence[StreamsMember]) -> dict[str, set[tuple[str, int]]]:
    return {m.member_id: {(s, p) for s, ps in m.owned.active.items() for p in ps} for m in members}


def _standbys(members: Sequence[StreamsMember]) -> dict[str, set[tuple[str, int]]]:
    return {m.member_id: {(s, p) for s, ps in m.owned.standby.items() for p in ps} for m in members}


@module
async def test_members_share_active_and_standby_tasks_and_a_fourth_moves_only_its_share(
    kafka: MiniKafka,
) -> None:
    group = f"streams-{uuid.uuid4().hex[:8]}"
    async with KafkaClient(kafka.bootstrap) as client:
        members = _members(client, group, "abc")
        await _converge(kafka, group, members)
        # The internal topics exist with the partition counts the topology asks for.
        for name in INTERNAL:
            assert len(kafka.cluster.topics[name].partitions) == PARTITIONS
        actives, standbys = _actives(members), _standbys(members)
        every = [t for ts in actives.values() for t in ts]
        assert len(every) == len(set(every)) == 8
        assert sorted(len(ts) for ts in actives.values()) == [2, 3, 3]
        for m in members:
            assert not actives[m.member_id] & standbys[m.member_id]
        assert sum(len(ts) for ts in standbys.values()) == 8

        d = _members(client, group, "d")[0]
        revoked_before = {m.member_id: list(m.revoked) for m in members}
        await _converge(kafka, group, [*members, d])
        after = _actives([*members, d])
        assert sorted(len(ts) for ts in after.values()) == [2, 2, 2, 2]
        moved = 0
        for m in members:
            assert after[m.member_id] <= actives[m.member_id]  # nobody took another's task
            moved += len(actives[m.member_id] - after[m.member_id])
            revoked = [r for r in m.revoked[len(revoked_before[m.member_id]) :] if r[0] == "active"]
            assert len(revoked) == len(actives[m.member_id] - after[m.member_id])
        assert moved == len(after[d.member_id]) == 2
        # The endpoints: every member hears which partitions each endpoint serves.
        assert d.partitions_by_endpoint is not None and len(d.partitions_by_endpoint) == 4
        for m in [*members, d]:
            await m.leave()


@module
async def test_a_dead_members_tasks_move_after_its_session_timeout(kafka: MiniKafka) -> None:
    group = f"streams-{uuid.uuid4().hex[:8]}"
    async with KafkaClient(kafka.bootstrap) as client:
        a, b = _members(client, group, "ab")
        await _converge(kafka, group, [a, b])
        assert len(_actives([b])[b.member_id]) == 4
        runner = asyncio.create_task(a.run())  # a heartbeats on its own; b is dead
        try:
            await wait_until(
                lambda: b.member_id not in _group(kafka, 0, group).members,
                "the broker to fence the dead member after its session",
                **WAIT,
            )
            await wait_until(
                lambda: len(_actives([a])[a.member_id]) == 8 and a.state is MemberState.STABLE,
                "its tasks to move to the live member",
                **WAIT,
            )
        finally:
            a.stop()
            await asyncio.wait_for(runner, 10)
        await b.heartbeat()  # the dead member comes back: it was fenced, it rejoins
        assert b.state is MemberState.FENCED and not b.owned.active
        await a.leave()
        await _converge(kafka, group, [b])
        assert len(_actives([b])[b.member_id]) == 8


@module
async def test_describe_groups_list_groups_and_the_cli_show_it(
    kafka: MiniKafka, capsys: pytest.CaptureFixture[str]
) -> None:
    group = f"streams-{uuid.uuid4().hex[:8]}"
    async with KafkaClient(kafka.bootstrap) as client:
        members = _members(client, group, "ab")
        await _converge(kafka, group, members)
        broker = kafka.brokers[0]
        raw = await RawClient.connect(broker.advertised_host, broker.port)
        try:
            described = await raw.request(
                15, 6, "DescribeGroupsRequest", groups=(group,), include_authorized_operations=False
            )
            (classic,) = described.groups
            assert classic.error_code is ErrorCode.group_id_not_found
            assert classic.error_message == f"Group {group} is not a classic group."
            listed = await raw.request(
                16, 5, "ListGroupsRequest", states_filter=("Stable",), types_filter=("streams",)
            )
            ours = [g for g in listed.groups if g.group_id == group]
            assert [(g.group_type, g.protocol_type) for g in ours] == [("streams", "streams")]
            streams = await raw.request(
                89,
                0,
                "StreamsGroupDescribeRequest",
                group_ids=(group,),
                include_authorized_operations=False,
            )
            (found,) = streams.groups
            assert found.group_state == "Stable" and len(found.members) == 2
            assert found.topology is not None and found.topology.epoch == 1
            changelogs = {
                t.name: t.partitions
                for s in found.topology.subtopologies
                for t in s.state_changelog_topics
            }
            assert changelogs == {"app-store-changelog": 4, "app-agg-changelog": 4}
        finally:
            await raw.close()
        out = io.StringIO()
        args = argparse.Namespace(
            bootstrap=kafka.bootstrap,
            groups=[group],
            group_option=[],
            all_groups=False,
            state=False,
            members=False,
            verbose=False,
        )
        with contextlib.redirect_stdout(out):
            assert await groups_describe(args) == 0
        text = out.getvalue()
        assert "GROUP" in text and "PROCESS" in text and "ASSIGNMENTS" in text
        assert (
            f"{group}-a" in text
            and "process-b" in text
            and "ACTIVE: " in text
            and "STANDBY: " in text
        )
        assert "SUBTOPOLOGY" in text and "app-store-changelog(4)" in text
        # A member commits its offsets with its member id and epoch, checked as a
        # consumer group member's; a stale epoch is refused.
        a = members[0]
        await client.commit_offsets(group, 0, {("input", 0): 5}, a.member_epoch, a.member_id)
        assert await client.committed_offsets(group, 0, [("input", 0)]) == {("input", 0): 5}
        with pytest.raises(AdminError, match="STALE_MEMBER_EPOCH"):
            await client.commit_offsets(
                group, 0, {("input", 0): 6}, a.member_epoch - 1, a.member_id
            )
        for m in members:
            await m.leave()
        deleted = await client.call(
            42, lambda b, _v: b.DeleteGroupsRequest(groups_names=(group,)), 0
        )
        assert [r.error_code for r in deleted.results] == [ErrorCode.none]
        assert _group(kafka, 0, group) is None


def _coordinator(app: MiniKafka, group: str) -> int:
    manager = app.brokers[0].services.coordinators.group_metadata_manager
    state = app.cluster.partition_state(OFFSETS_TOPIC, manager.partition_for(group))
    assert state is not None
    return state.leader


def _snapshot(app: MiniKafka, broker: int, group: str) -> dict[str, Any] | None:
    found = _group(app, broker, group)
    if found is None or found.state is not StreamsGroupState.STABLE:
        return None
    return {m.member_id: (m.member_epoch, m.assigned_tasks) for m in found.members.values()}


async def test_the_group_survives_its_coordinators_failover() -> None:
    group = f"streams-failover-{uuid.uuid4().hex[:8]}"
    cluster = {
        **STREAMS,
        "offsets.topic.replication.factor": "3",
        "default.replication.factor": "3",
    }
    async with running_cluster(brokers=3, **cluster) as app:
        app.cluster.create_topic("input", PARTITIONS, 3, {})
        async with KafkaClient(app.bootstrap) as client:
            members = _members(client, group, "ab")
            await client.find_coordinator(group)  # creates __consumer_offsets
            old = _coordinator(app, group)
            await _converge(app, group, members, broker=old)
            before = _snapshot(app, old, group)
            owned = [m.owned for m in members]
            await app.stop_broker(old)
            new = _coordinator(app, group)
            assert new not in (old, -1)
            await wait_until(
                lambda: _snapshot(app, new, group) is not None,
                "the new coordinator to load the group",
                **WAIT,
            )
            assert _snapshot(app, new, group) == before
            for m in members:  # their next heartbeats find the new coordinator, accepted
                await m.heartbeat()
                await m.heartbeat()
            assert [m.state for m in members] == [MemberState.STABLE] * 2
            assert [m.owned for m in members] == owned
            assert _snapshot(app, new, group) == before


async def test_the_group_survives_a_restart_from_the_data_directory(tmp_path: Path) -> None:
    group = f"streams-restart-{uuid.uuid4().hex[:8]}"
    async with running_cluster(data_dir=tmp_path / "data", **STREAMS) as app:
        app.cluster.create_topic("input", PARTITIONS, 1, {})
        async with KafkaClient(app.bootstrap) as client:
            members = _members(client, group, "ab")
            await _converge(app, group, members)
            before = _snapshot(app, 0, group)
            await app.stop_broker(0)
            await app.start_broker(0)
            await wait_until(
                lambda: _snapshot(app, 0, group) is not None,
                "the restarted broker to load the group",
                **WAIT,
            )
            assert _snapshot(app, 0, group) == before
            owned = [m.owned for m in members]
            for m in members:
                await m.heartbeat()
                await m.heartbeat()
            assert [m.owned for m in members] == owned
            assert [m.state for m in members] == [MemberState.STABLE] * 2


@module
async def test_streams_version_0_turns_the_protocol_off(kafka: MiniKafka) -> None:
    """With ``streams.version`` downgraded to 0 both APIs answer UNSUPPORTED_VERSION, as
    Kafka's ``isStreamsGroupProtocolEnabled`` refuses them; at 1 again they are served."""
    features = kafka.brokers[0].services.features
    assert features.update_features({STREAMS_VERSION: (0, UpgradeType.SAFE_DOWNGRADE)}).error is (
        ErrorCode.none
    )
    broker = kafka.brokers[0]
    raw = await RawClient.connect(broker.advertised_host, broker.port)
    try:
        async with KafkaClient(kafka.bootstrap) as client:
            (member,) = _members(client, f"streams-{uuid.uuid4().hex[:8]}", "a")
            await member.heartbeat()
            assert (member.state, member.error) == (
                MemberState.FATAL,
                ErrorCode.unsupported_version,
            )
        described = await raw.request(
            89,
            0,
            "StreamsGroupDescribeRequest",
            group_ids=("g",),
            include_authorized_operations=False,
        )
        assert [g.error_code for g in described.groups] == [ErrorCode.unsupported_version]
    finally:
        await raw.close()
        assert features.update_features({STREAMS_VERSION: (1, UpgradeType.UPGRADE)}).error is (
            ErrorCode.none
        )
