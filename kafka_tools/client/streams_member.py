"""A Kafka Streams member of a streams group (KIP-1071), client side: Kafka Streams'
``StreamsGroupHeartbeatRequestManager`` and ``StreamsMembershipManager`` in small.

No Python client speaks StreamsGroupHeartbeat; this driver does, over the project's
``KafkaClient`` (``kafka_tools/client/cluster.py``, on ``client_io.shell.ClientShell``),
so it runs over TCP against a broker and, in a simulation, over the simulated network
on virtual time (it only awaits the client and ``asyncio.sleep``).

States, as Kafka's ``MemberState``:

* UNSUBSCRIBED -> ``JOINING``: the first heartbeat, epoch 0, with the topology, the
  process id, the user endpoint, the client tags and the rebalance timeout;
* ``RECONCILING``: a response carried tasks; the member drops the tasks not listed
  (recorded in ``revoked``: a test sees which tasks moved), takes the new ones and goes
  to ``ACKNOWLEDGING``;
* ``ACKNOWLEDGING``: the next heartbeat, sent at once, reports the tasks it owns; then
  ``STABLE``, heartbeating every ``heartbeat_interval_ms`` the broker dictates (owned
  tasks are sent only when they changed since last sent, None otherwise);
* ``FENCED`` (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): every task dropped, rejoin at
  epoch 0 (JOINING);
* ``LEAVING`` -> ``UNSUBSCRIBED``: ``leave`` sends epoch -1;
* ``FATAL``: an error the member cannot recover from (``error``).

COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR / a dropped connection: find the coordinator
again and retry; COORDINATOR_LOAD_IN_PROGRESS: retry. Statuses (MISSING_INTERNAL_TOPICS,
...) are kept in ``statuses`` as the last response had them.

Use: ``member = StreamsMember(client, "app", topology, member_id=..., process_id=...)``;
``await member.heartbeat()`` for one step (tests drive it step by step), or
``task = asyncio.create_task(member.run())`` and ``member.stop()`` /
``await member.leave()``; ``member.pause()`` stops heartbeating without leaving (a member
that dies: the broker fences it after its session timeout). ``on_change(event, member)``,
when given, hears every successful heartbeat (``"heartbeat"``: epoch and tasks as
reconciled) and every fencing (``"fenced"``: all tasks dropped) -- the simulation's
history is written from it.

In a simulation (``simulation/``): create the ``KafkaClient`` with the simulated cluster's
bootstrap inside the virtual-time loop and run members as tasks of that loop; every
connection then goes over the simulated network and every wait is virtual. Member ids
and process ids are the caller's (pass seeded ones: the driver draws no randomness).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_tools.client.cluster import STREAMS_GROUP_HEARTBEAT, KafkaClient, error_name
from protocol.builders import Builder

log = logging.getLogger("kafka_tools.streams_member")

Tasks = dict[str, frozenset[int]]
RETRY_S = 0.05
RETRIABLE = frozenset(
    {
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
    }
)


class MemberState(StrEnum):
    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    LEAVING = "LEAVING"
    FATAL = "FATAL"


@dataclass(frozen=True)
class SubtopologySpec:
    """One subtopology as Kafka Streams describes it: its source topics, the
    repartition topics it writes and reads (name, partitions or 0), its changelog
    topics (stateful when there are some) and copartition groups (indexes into its
    source topics)."""

    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[tuple[str, int], ...] = ()
    changelog_topics: tuple[str, ...] = ()
    copartition_groups: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class TopologySpec:
    epoch: int
    subtopologies: tuple[SubtopologySpec, ...]


@dataclass
class Owned:
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def key(self) -> tuple[Any, ...]:
        return tuple(
            tuple(sorted((s, tuple(sorted(ps))) for s, ps in kind.items()))
            for kind in (self.active, self.standby, self.warmup)
        )


def _tasks_of(items: Any) -> Tasks:
    return {
        str(t.subtopology_id): frozenset(int(p) for p in t.partitions)
        for t in items
        if t.partitions
    }


class StreamsMember:
    """One member; see the module docstring."""

    def __init__(
        self,
        client: KafkaClient,
        group_id: str,
        topology: TopologySpec,
        *,
        member_id: str,
        process_id: str,
        rebalance_timeout_ms: int = 30000,
        user_endpoint: tuple[str, int] | None = None,
        client_tags: Mapping[str, str] | None = None,
        on_change: Callable[[str, StreamsMember], None] | None = None,
    ) -> None:
        self.client = client
        self.group_id = group_id
        self.topology = topology
        self.member_id = member_id
        self.process_id = process_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.user_endpoint = user_endpoint
        self.client_tags = dict(client_tags or {})
        self.state = MemberState.UNSUBSCRIBED
        self.member_epoch = 0
        self.owned = Owned()
        self.heartbeat_interval_ms = 1000
        self.statuses: list[tuple[int, str]] = []
        self.revoked: list[tuple[str, str, int]] = []  # (kind, subtopology, partition)
        self.endpoint_epoch = 0
        self.partitions_by_endpoint: Any = None
        self.error: ErrorCode | None = None
        self.heartbeats = 0
        self._coordinator: int | None = None
        self._sent_owned: tuple[Any, ...] | None = None
        self._stopped = asyncio.Event()
        self._paused = False
        self._on_change = on_change

    # ------------------------------------------------------------------ run
    async def run(self) -> None:
        """Heartbeat until stopped, paused or fatal."""
        while (
            not self._stopped.is_set() and not self._paused and self.state is not MemberState.FATAL
        ):
            await self.heartbeat()
            if self.state in (MemberState.ACKNOWLEDGING, MemberState.JOINING):
                continue
            try:
                async with asyncio.timeout(self.heartbeat_interval_ms / 1000):
                    await self._stopped.wait()
            except TimeoutError:
                pass

    def stop(self) -> None:
        self._stopped.set()

    def pause(self) -> None:
        """Stop heartbeating without leaving: the broker fences the member after its
        session timeout."""
        self._paused = True
        self._stopped.set()

    async def leave(self) -> None:
        """Kafka's leave: epoch -1 (the broker moves the tasks to the others)."""
        self.stop()
        self.state = MemberState.LEAVING
        await self._send(leaving=True)
        self._drop_all("leave")
        self.state = MemberState.UNSUBSCRIBED

    # ------------------------------------------------------------ heartbeat
    async def heartbeat(self) -> None:
        """One heartbeat, as the state asks."""
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.FENCED):
            self.member_epoch = 0
            self._sent_owned = None
            self.state = MemberState.JOINING
        response = await self._send()
        if response is not None:
            self._on_response(response)

    async def _send(self, leaving: bool = False) -> Any | None:
        try:
            if self._coordinator is None:
                self._coordinator = await self.client.find_coordinator(self.group_id)
            self.heartbeats += 1
            return await self.client.call(
                STREAMS_GROUP_HEARTBEAT,
                lambda b, _version: self._request(b, leaving),
                self._coordinator,
            )
        except (OSError, ConnectionError) as exc:
            log.info("[%s] heartbeat failed: %s", self.member_id, exc)
            self.client.forget(self._coordinator)
            self._coordinator = None
            await asyncio.sleep(RETRY_S)
            return None

    def _request(self, b: Builder, leaving: bool) -> Any:
        joining = self.member_epoch == 0 and not leaving
        tasks: tuple[tuple[Any, ...], ...] | None = None
        key = self.owned.key()
        if joining:
            tasks = ((), (), ())
        elif not leaving and (self.state is MemberState.ACKNOWLEDGING or key != self._sent_owned):
            tasks = tuple(
                self._task_ids(b, kind)
                for kind in (self.owned.active, self.owned.standby, self.owned.warmup)
            )
            self._sent_owned = key
        endpoint = self.user_endpoint if joining else None
        tags = tuple(b.KeyValue(key=k, value=v) for k, v in sorted(self.client_tags.items()))
        return b.StreamsGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=-1 if leaving else self.member_epoch,
            endpoint_information_epoch=self.endpoint_epoch,
            rebalance_timeout=self.rebalance_timeout_ms if joining else -1,
            topology=self._topology(b) if joining else None,
            active_tasks=tasks[0] if tasks is not None else None,
            standby_tasks=tasks[1] if tasks is not None else None,
            warmup_tasks=tasks[2] if tasks is not None else None,
            process_id=self.process_id if joining else None,
            user_endpoint=None
            if endpoint is None
            else b.Endpoint(host=endpoint[0], port=endpoint[1]),
            client_tags=tags if joining else None,
            task_offsets=None,
            task_end_offsets=None,
            shutdown_application=False,
        )

    @staticmethod
    def _task_ids(b: Builder, tasks: Tasks) -> tuple[Any, ...]:
        return tuple(
            b.TaskIds(subtopology_id=s, partitions=tuple(sorted(ps)))
            for s, ps in sorted(tasks.items())
        )

    def _topology(self, b: Builder) -> Any:
        def info(name: str, partitions: int = 0, configs: Sequence[tuple[str, str]] = ()) -> Any:
            return b.TopicInfo(
                name=name,
                partitions=partitions,
                replication_factor=0,
                topic_configs=tuple(b.KeyValue(key=k, value=v) for k, v in configs),
            )

        return b.Topology(
            epoch=self.topology.epoch,
            subtopologies=tuple(
                b.Subtopology(
                    subtopology_id=s.subtopology_id,
                    source_topics=s.source_topics,
                    source_topic_regex=(),
                    state_changelog_topics=tuple(
                        info(t, 0, (("cleanup.policy", "compact"),)) for t in s.changelog_topics
                    ),
                    repartition_sink_topics=s.repartition_sink_topics,
                    repartition_source_topics=tuple(
                        info(n, p) for n, p in s.repartition_source_topics
                    ),
                    copartition_groups=tuple(
                        b.CopartitionGroup(
                            source_topics=g, source_topic_regex=(), repartition_source_topics=()
                        )
                        for g in s.copartition_groups
                    ),
                )
                for s in self.topology.subtopologies
            ),
        )

    # -------------------------------------------------------------- answers
    def _on_response(self, response: Any) -> None:
        error = response.error_code
        if error is ErrorCode.none:
            self._on_success(response)
        elif error in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id):
            log.info("[%s] fenced (%s): rejoining", self.member_id, error_name(error))
            self._drop_all("fenced")
            self.state = MemberState.FENCED
            self._notify("fenced")
        elif error in RETRIABLE:
            if error is not ErrorCode.coordinator_load_in_progress:
                self._coordinator = None
        else:
            log.warning(
                "[%s] fatal: %s %s", self.member_id, error_name(error), response.error_message
            )
            self.error = error
            self.state = MemberState.FATAL

    def _on_success(self, response: Any) -> None:
        self.member_epoch = int(response.member_epoch)
        self.heartbeat_interval_ms = int(response.heartbeat_interval.total_seconds() * 1000)
        self.statuses = [(int(s.status_code), str(s.status_detail)) for s in response.status or ()]
        self.endpoint_epoch = int(response.endpoint_information_epoch)
        if response.partitions_by_user_endpoint is not None:
            self.partitions_by_endpoint = response.partitions_by_user_endpoint
        if response.active_tasks is not None:
            self.state = MemberState.RECONCILING
            self._reconcile(
                _tasks_of(response.active_tasks),
                _tasks_of(response.standby_tasks or ()),
                _tasks_of(response.warmup_tasks or ()),
            )
            self.state = MemberState.ACKNOWLEDGING
        elif self.state in (MemberState.ACKNOWLEDGING, MemberState.JOINING):
            self.state = MemberState.STABLE
        self._notify("heartbeat")

    def _notify(self, event: str) -> None:
        if self._on_change is not None:
            self._on_change(event, self)

    def _reconcile(self, active: Tasks, standby: Tasks, warmup: Tasks) -> None:
        """Kafka Streams revokes, then assigns (no callbacks to wait for here)."""
        for kind, old, new in (
            ("active", self.owned.active, active),
            ("standby", self.owned.standby, standby),
            ("warmup", self.owned.warmup, warmup),
        ):
            for s, ps in sorted(old.items()):
                for p in sorted(ps - new.get(s, frozenset())):
                    self.revoked.append((kind, s, p))
        self.owned = Owned(active, standby, warmup)

    def _drop_all(self, why: str) -> None:
        self._reconcile({}, {}, {})
        self.member_epoch = 0
