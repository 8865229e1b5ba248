"""Which protocol clients join the workload mix, when the nemesis of the clients strikes
them, and the broker configs they need.

All of them join the default mix (issue 33: every protocol under the nemesis):

- ``sim-848``: three KIP-848 members consuming ``sim-events`` and committing; ``k848-frozen``
  freezes once past its session (fenced, its partitions move, it rejoins), ``k848-killed``
  dies once (a new member later);
- ``sim-share``: three share consumers of ``sim-events`` (read_uncommitted);
  ``share-frozen`` freezes with records in flight past their lock and its session,
  ``share-killed`` dies with records in flight;
- ``sim-share-rc``: two share consumers of ``sim-out`` with ``share.isolation.level``
  read_committed (the transform writes it, aborting every fifth transaction);
- a drainer per share group once the others have left, for "every record settled".

Member session timeouts and heartbeat intervals are shortened (10 s, 3 s) and the
acquisition lock too (10 s), so that a 60-second run still sees them expire; the share
state topic has the few partitions the offsets topic has in a simulation.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine
from typing import Any

from simulation.clients.consumer_member import ConsumerMember
from simulation.clients.member_life import MemberPlan
from simulation.clients.share_member import ShareMember
from simulation.history import History

__all__ = ["broker_configs", "protocol_clients"]

CONSUMER_GROUP, SHARE_GROUP, SHARE_RC_GROUP = "sim-848", "sim-share", "sim-share-rc"
SESSION_MS, HEARTBEAT_MS, LOCK_MS, DELIVERY_LIMIT = 10_000, 3_000, 10_000, 5


def broker_configs(brokers: int) -> dict[str, str]:
    replication = min(3, brokers)
    configs = {"share.coordinator.state.topic.num.partitions": "3"}
    configs["share.coordinator.state.topic.replication.factor"] = str(replication)
    configs["share.coordinator.state.topic.min.isr"] = str(min(2, replication))
    configs["group.share.record.lock.duration.ms"] = str(LOCK_MS)
    configs["group.share.min.record.lock.duration.ms"] = str(LOCK_MS)
    configs["group.share.delivery.count.limit"] = str(DELIVERY_LIMIT)
    for kind in ("consumer", "share"):
        configs[f"group.{kind}.session.timeout.ms"] = str(SESSION_MS)
        configs[f"group.{kind}.min.session.timeout.ms"] = str(SESSION_MS)
        configs[f"group.{kind}.heartbeat.interval.ms"] = str(HEARTBEAT_MS)
        configs[f"group.{kind}.min.heartbeat.interval.ms"] = str(HEARTBEAT_MS)
    return configs


def _plan(at_s: float, stop_at_s: float, *, freeze_s: float = 0.0) -> MemberPlan:
    """Freeze for ``freeze_s`` (or, without it, die) at ``at_s`` -- if it fits in the run."""
    if at_s + max(freeze_s, 15.0) + 5.0 >= stop_at_s:
        return MemberPlan()
    if freeze_s:
        return MemberPlan(freeze_at_s=at_s, frozen_s=freeze_s)
    return MemberPlan(kill_at_s=at_s)


def protocol_clients(
    *,
    bootstrap: str,
    now_s: float,
    stop_at_s: float,
    events_topic: str,
    output_topic: str,
    history: History,
    rng: random.Random,
) -> list[tuple[str, Coroutine[Any, Any, None]]]:
    """(client node name, coroutine) of every protocol client, in the order they start."""
    span = stop_at_s - now_s
    at = [now_s + f * span for f in (0.35, 0.40, 0.50, 0.55)]
    share = history.protocol.share
    share.lock_duration_s = LOCK_MS / 1000
    share.session_timeout_s = SESSION_MS / 1000
    share.delivery_limit = DELIVERY_LIMIT
    history.protocol.groups.session_timeout_s = SESSION_MS / 1000
    share.reads.update({SHARE_GROUP: events_topic, SHARE_RC_GROUP: output_topic})
    share.read_committed.add(SHARE_RC_GROUP)
    clients = _consumer_members(bootstrap, stop_at_s, events_topic, history, rng, at)
    clients += _share_members(bootstrap, stop_at_s, events_topic, output_topic, history, rng, at)
    return clients


def _consumer_members(
    bootstrap: str,
    stop_at_s: float,
    topic: str,
    history: History,
    rng: random.Random,
    at: list[float],
) -> list[tuple[str, Coroutine[Any, Any, None]]]:
    frozen = 3 * SESSION_MS / 1000
    clients: list[tuple[str, Coroutine[Any, Any, None]]] = []
    for name, plan in (
        ("k848-1", MemberPlan()),
        ("k848-frozen", _plan(at[1], stop_at_s, freeze_s=frozen)),
        ("k848-killed", _plan(at[3], stop_at_s)),
    ):
        member = ConsumerMember(
            bootstrap=bootstrap,
            history=history,
            group=CONSUMER_GROUP,
            topic=topic,
            name=name,
            stop_at_s=stop_at_s,
            events=history.protocol.groups,
            rng=random.Random(rng.random()),
            plan=plan,
        )
        clients.append((name, member.run()))
    return clients


def _share_members(
    bootstrap: str,
    stop_at_s: float,
    events_topic: str,
    output_topic: str,
    history: History,
    rng: random.Random,
    at: list[float],
) -> list[tuple[str, Coroutine[Any, Any, None]]]:
    earliest = {"share.auto.offset.reset": "earliest"}
    read_committed = {**earliest, "share.isolation.level": "read_committed"}
    common: dict[str, Any] = {"bootstrap": bootstrap, "history": history}
    common["events"] = history.protocol.share
    clients: list[tuple[str, Coroutine[Any, Any, None]]] = []
    for name, group, topic, configs, plan in (
        ("share-1", SHARE_GROUP, events_topic, earliest, MemberPlan()),
        ("share-frozen", SHARE_GROUP, events_topic, earliest, _plan(at[0], stop_at_s, freeze_s=25)),
        ("share-killed", SHARE_GROUP, events_topic, earliest, _plan(at[2], stop_at_s)),
        ("share-rc-1", SHARE_RC_GROUP, output_topic, read_committed, MemberPlan()),
        ("share-rc-2", SHARE_RC_GROUP, output_topic, read_committed, MemberPlan()),
    ):
        consumer = ShareMember(
            **common,
            group=group,
            topic=topic,
            name=name,
            stop_at_s=stop_at_s,
            rng=random.Random(rng.random()),
            plan=plan,
            group_configs=configs,
        )
        clients.append((name, consumer.run()))
    for group, topic, configs in (
        (SHARE_GROUP, events_topic, earliest),
        (SHARE_RC_GROUP, output_topic, read_committed),
    ):
        drainer = ShareMember(
            **common,
            group=group,
            topic=topic,
            name=f"drain-{group}",
            stop_at_s=stop_at_s + 120,
            rng=random.Random(rng.random()),
            plan=MemberPlan(),
            group_configs=configs,
            drain=True,
        )
        clients.append((f"drain-{group}", _after(stop_at_s + LOCK_MS / 1000 + 2, drainer)))
    return clients


async def _after(at_s: float, member: ShareMember) -> None:
    await asyncio.sleep(max(0.0, at_s - asyncio.get_running_loop().time()))
    await member.run()
