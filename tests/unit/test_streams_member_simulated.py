"""The project's streams member (``kafka_tools/client/streams_member.py``) on the
simulated network in virtual time, as the simulator will run it: two members of a
group on a simulated broker share the tasks, and when one leaves the other takes them
all. No socket, no wall-clock wait: every heartbeat interval is virtual."""

from __future__ import annotations

import asyncio
from typing import Any

from broker.app import MiniKafka
from broker.config.broker_config import BrokerConfig
from broker.coordinator.coordinator_loader import EventLoopLoadScheduler
from broker.ids import IdSource
from kafka_tools.client import KafkaClient
from kafka_tools.client.streams_member import (
    MemberState,
    StreamsMember,
    SubtopologySpec,
    TopologySpec,
)
from virtual_time.loop import run_simulated

TOPOLOGY = TopologySpec(
    1, (SubtopologySpec("0", source_topics=("input",), changelog_topics=("app-changelog",)),)
)


def _actives(member: StreamsMember) -> list[int]:
    return sorted(p for ps in member.owned.active.values() for p in ps)


async def _scenario() -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    config = BrokerConfig.model_validate({"offsets.topic.num.partitions": "1"})
    app = MiniKafka(
        config,
        brokers=1,
        port=0,
        load_scheduler=lambda: EventLoopLoadScheduler(clock_s=loop.time),
        ids=IdSource.seeded(7),
    )
    await app.start()
    client = KafkaClient(app.bootstrap)
    try:
        app.cluster.create_topic("input", 4, 1, {})
        await client.connect()
        heard: list[tuple[str, int]] = []
        a, b = (
            StreamsMember(
                client,
                "app",
                TOPOLOGY,
                member_id=f"m-{n}",
                process_id=f"p-{n}",
                on_change=lambda event, m: heard.append((event, len(m.owned.active.get("0", ())))),
            )
            for n in "ab"
        )
        runners = [asyncio.create_task(m.run()) for m in (a, b)]
        await asyncio.sleep(20)
        shared = {"a": _actives(a), "b": _actives(b), "states": {a.state, b.state}}
        await b.leave()
        await asyncio.sleep(20)
        a.stop()
        await asyncio.gather(*runners)
        return {
            **shared,
            "after": _actives(a),
            "changelog": len(app.cluster.topics["app-changelog"].partitions),
            "heard": heard,
        }
    finally:
        client.close()
        await app.stop()


def test_members_share_the_tasks_on_the_simulated_network() -> None:
    result = run_simulated(_scenario(), seed=7)
    assert result["states"] == {MemberState.STABLE}
    assert sorted(result["a"] + result["b"]) == [0, 1, 2, 3]
    assert len(result["a"]) == len(result["b"]) == 2
    assert result["after"] == [0, 1, 2, 3]
    assert result["changelog"] == 4
    # on_change hears every answer: the first ones with no task, later ones with some
    assert {event for event, _ in result["heard"]} == {"heartbeat"}
    assert result["heard"][0][1] == 0 and max(n for _, n in result["heard"]) == 4
