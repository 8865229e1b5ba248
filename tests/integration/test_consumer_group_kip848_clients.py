"""KIP-848 with confluent-kafka (librdkafka 2.16, ``group.protocol=consumer``): a regex
subscription that picks up a topic created later, a static member restarted within its
session that keeps its partitions, the AdminClient's describe and type-filtered list,
and ``minikafka groups list/describe`` showing the type, epochs and assignments.

Consumers poll in their own threads (``Member`` of test_consumer_group_protocol.py);
every wait is for a state, bounded (30 s), never for a time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import uuid
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState as ClientGroupState
from confluent_kafka import ConsumerGroupType

from broker.app import MiniKafka
from broker.group.consumer import ConsumerGroupState
from kafka_tools.admin_cli import add_admin_parsers
from kafka_tools.admin_commands import groups_describe, groups_list
from testkit.polling import wait_until
from tests.integration.conftest import running_cluster
from tests.integration.test_consumer_group_protocol import (
    FAST_CONSUMER_GROUPS,
    WAIT,
    Member,
    _describe,
    _group_state,
    _list_groups,
    _split,
    _start,
    _stop,
)

pytestmark = pytest.mark.asyncio


class RegexMember(Member):
    """A member subscribed by regex; it records the (topic, partition) pairs it holds."""

    def __init__(self, bootstrap: str, group: str, regex: str) -> None:
        super().__init__(bootstrap, group, regex)
        self.pairs: frozenset[tuple[str, int]] = frozenset()

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                msg = self.consumer.poll(0.05)
                if msg is not None and msg.error() is not None:
                    self.errors.append(msg.error())
                self.pairs = frozenset(
                    (tp.topic, tp.partition) for tp in self.consumer.assignment()
                )
        finally:
            self.consumer.close()
            self.closed = True

    def topics_assigned(self) -> frozenset[tuple[str, int]]:
        return self.pairs


def _group(app: MiniKafka, group: str) -> Any:
    for broker in app.brokers:
        found = broker.services.coordinators.consumer_group.group(group)
        if found is not None:
            return found
    return None


async def test_a_regex_subscription_picks_up_a_topic_created_later() -> None:
    group, prefix = f"regex-{uuid.uuid4().hex[:8]}", f"rx{uuid.uuid4().hex[:6]}"
    async with running_cluster(**FAST_CONSUMER_GROUPS) as app:
        app.cluster.create_topic(f"{prefix}-a", 2, 1, {})
        app.cluster.create_topic(f"other-{prefix}", 2, 1, {})  # a partial match only
        member = RegexMember(app.bootstrap, group, f"^{prefix}.*")
        tasks = await _start([member])
        try:
            await wait_until(
                lambda: len(member.topics_assigned()) == 2, "the first topic's partitions", **WAIT
            )
            assert member.topics_assigned() == {(f"{prefix}-a", 0), (f"{prefix}-a", 1)}
            epoch = _group(app, group).group_epoch
            app.cluster.create_topic(f"{prefix}-b", 3, 1, {})
            await wait_until(
                lambda: len(member.topics_assigned()) == 5, "the new topic's partitions", **WAIT
            )
            assert {t for t, _ in member.topics_assigned()} == {f"{prefix}-a", f"{prefix}-b"}
            assert _group(app, group).group_epoch > epoch
            found = _group(app, group)
            (m,) = found.members.values()
            # librdkafka sends its subscription's regexes joined, each in parentheses.
            assert m.subscribed_topic_regex == f"(^{prefix}.*)"
        finally:
            await _stop([member], tasks)


async def test_a_static_member_restarted_within_its_session_keeps_its_partitions() -> None:
    group, topic = f"static-{uuid.uuid4().hex[:8]}", f"static-{uuid.uuid4().hex[:6]}"
    async with running_cluster(**FAST_CONSUMER_GROUPS) as app:
        app.cluster.create_topic(topic, 4, 1, {})
        a = Member(app.bootstrap, group, topic, **{"group.instance.id": "instance-a"})
        b = Member(app.bootstrap, group, topic)
        tasks = await _start([a, b])
        try:
            await wait_until(
                lambda: (
                    _split([a, b], 4, [2, 2])
                    and _group_state(app, group) is ConsumerGroupState.STABLE
                ),
                "two members with two partitions each",
                **WAIT,
            )
            kept, epoch = a.assignment, _group(app, group).group_epoch
            revoked = list(b.revoked)  # from the first split
            await _stop([a], tasks[:1])
            # Left with epoch -2: still a member, its partitions still its own.
            found = _group(app, group)
            (static,) = [m for m in found.members.values() if m.instance_id == "instance-a"]
            assert static.member_epoch == -2
            again = Member(app.bootstrap, group, topic, **{"group.instance.id": "instance-a"})
            tasks = [tasks[1], *await _start([again])]
            await wait_until(
                lambda: (
                    again.assignment == kept
                    and _split([again, b], 4, [2, 2])
                    and _group_state(app, group) is ConsumerGroupState.STABLE
                ),
                "the restarted member to get its partitions back",
                **WAIT,
            )
            assert _group(app, group).group_epoch == epoch  # no rebalance
            assert b.revoked == revoked  # the other member gave nothing up since
            described = await asyncio.to_thread(_describe, app.bootstrap, group)
            instance_ids = sorted(m.group_instance_id or "" for m in described.members)
            assert instance_ids == ["", "instance-a"]
        finally:
            await _stop([again, b], tasks)


async def _cli(bootstrap: str, *argv: str) -> str:
    """``minikafka groups ...`` in this event loop; its standard output."""
    parser = argparse.ArgumentParser()
    add_admin_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args([*argv, "--bootstrap-server", bootstrap])
    command = {"list": groups_list, "describe": groups_describe}[args.action]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert await command(args) == 0
    return out.getvalue()


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


async def test_admin_client_and_cli_show_types_states_epochs_and_assignments() -> None:
    group, topic = f"admin-{uuid.uuid4().hex[:8]}", f"admin-{uuid.uuid4().hex[:6]}"
    async with running_cluster(**FAST_CONSUMER_GROUPS) as app:
        app.cluster.create_topic(topic, 4, 1, {})
        members = [Member(app.bootstrap, group, topic) for _ in range(2)]
        tasks = await _start(members)
        try:
            await wait_until(
                lambda: (
                    _split(members, 4, [2, 2])
                    and _group_state(app, group) is ConsumerGroupState.STABLE
                ),
                "two consumers with two partitions each",
                **WAIT,
            )
            found = _group(app, group)
            described = await asyncio.to_thread(_describe, app.bootstrap, group)
            assert described.type is ConsumerGroupType.CONSUMER
            assert described.state is ClientGroupState.STABLE
            assert described.partition_assignor == "uniform"
            for m in described.members:
                current = sorted(tp.partition for tp in m.assignment.topic_partitions)
                target = sorted(tp.partition for tp in m.target_assignment.topic_partitions)
                assert (
                    current
                    == target
                    == sorted(
                        found.members[m.member_id].assigned_partitions[
                            next(iter(found.members[m.member_id].assigned_partitions))
                        ]
                    )
                )
            consumer = await asyncio.to_thread(
                _list_groups, app.bootstrap, ConsumerGroupType.CONSUMER
            )
            assert group in {g.group_id for g in consumer}
            classic = await asyncio.to_thread(
                _list_groups, app.bootstrap, ConsumerGroupType.CLASSIC
            )
            assert group not in {g.group_id for g in classic}

            # minikafka groups list --type / describe --state --verbose / --members --verbose
            listed = _rows(await _cli(app.bootstrap, "groups", "list", "--type", "--state"))
            assert listed[0] == ["GROUP", "TYPE", "STATE"]
            assert [group, "Consumer", "Stable"] in listed
            only_classic = await _cli(app.bootstrap, "groups", "list", "--type", "classic")
            assert group not in only_classic
            state = _rows(
                await _cli(app.bootstrap, "groups", "describe", group, "--state", "--verbose")
            )
            assert state[0] == [
                "GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE",
                "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS",
            ]  # fmt: skip
            found = _group(app, group)
            assert state[1][0] == group and state[1][3:] == [
                "uniform", "Stable", str(found.group_epoch), str(found.assignment_epoch), "2",
            ]  # fmt: skip
            rows = _rows(
                await _cli(app.bootstrap, "groups", "describe", group, "--members", "--verbose")
            )
            assert rows[0] == [
                "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT",
            ]  # fmt: skip
            for row in rows[1:]:
                member = found.members[row[1]]
                assert row[4] == "2" and row[5] == str(member.member_epoch)
                assert row[6] == row[8] and row[6].startswith(f"{topic}:")
                assert row[7] == str(found.assignment_epoch)
        finally:
            await _stop(members, tasks)
