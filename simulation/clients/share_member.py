"""A share consumer (KIP-932): ShareGroupHeartbeat, ShareFetch, ShareAcknowledge.

As Kafka's ``ShareConsumerImpl`` in explicit acknowledgement mode, reduced to one topic:

- a heartbeat task keeps the member in its share group (ShareGroupHeartbeat v1: member
  epoch 0 to join with a member id of its own, -1 to leave) and learns its assignment;
- a fetch task opens one share session per leader it reads from (ShareFetch v1, session
  epoch 0, then +1 per request, partitions added and forgotten as the assignment moves),
  takes what it is given, decides for each record -- drawn from its seed: mostly ACCEPT,
  some RELEASE, a few REJECT, a few left unacknowledged for their lock to expire, and
  every ``STICKY_RELEASE``-th offset RELEASEd every time, so that it reaches the delivery
  limit and is archived -- and acknowledges them on that session (ShareAcknowledge v1),
  an acquired offset without a data record (a transaction marker) with GAP;
- leaving (at the end of the run) releases what it still holds, then leaves the group.

Every acquisition and every acknowledgement, with its time and outcome, goes into
`ShareEvents` for the share checkers; so do the connections it opens and closes (Kafka 4.1
releases a closed connection's share sessions) and the heartbeats that were answered.

A ``MemberPlan`` can freeze it once with records in flight (its network cut for longer than
a lock and a session: the locks expire, the records go to the others; thawed, its
acknowledgements are refused) or kill it (connections dropped with records in flight;
a new member later). A *drainer* (``drain=True``) joins after the others have left and
ACCEPTs whatever is left, until nothing more comes: what the share checker's "every
committed record is settled" then reads.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.builders import Builder
from simulation.clients.client_history import (
    ACCEPT,
    GAP,
    REJECT,
    RELEASE,
    Acknowledgement,
    Acquisition,
    Partition,
    ShareEvents,
)
from simulation.clients.link import ClusterLink
from simulation.clients.member_life import ProtocolMember
from simulation.clients.records import data_records

__all__ = ["ShareMember"]

INCREMENTAL_ALTER_CONFIGS, SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 44, 76, 78, 79
GROUP_RESOURCE, SET = 32, 0
#: Every this-many-th offset is RELEASEd by everyone who gets it: it meets the limit.
STICKY_RELEASE = 37
MAX_RECORDS = 50
SESSION_ERRORS = (ErrorCode.share_session_not_found, ErrorCode.invalid_share_session_epoch)


class ShareMember(ProtocolMember[ShareEvents]):
    """One share consumer in the mix; `run` until ``stop_at_s``. See the module doc."""

    heartbeat_api = SHARE_GROUP_HEARTBEAT

    def __init__(
        self, *, group_configs: dict[str, str], drain: bool = False, **member: Any
    ) -> None:
        """``member``: `ProtocolMember`'s arguments."""
        self._group_configs = group_configs
        self._drain = drain
        super().__init__(**member)

    def _new_incarnation(self) -> None:
        super()._new_incarnation()
        self.assigned: set[Partition] = set()
        # broker -> (next session epoch, the partitions in the session)
        self._sessions: dict[int, tuple[int, set[Partition]]] = {}
        self._held: dict[tuple[Partition, int], int] = {}  # (tp, offset) -> broker
        self._hb = ClusterLink(self._bootstrap, f"{self.name}-{self.member_id[:8]}-hb")
        self._data = ClusterLink(
            self._bootstrap,
            f"{self.name}-{self.member_id[:8]}-data",
            on_opened=self._opened,
            on_closed=self._closed,
        )
        self._empty_rounds = 0

    def _opened(self, serial: int, broker: int) -> None:
        self._events.opened[(self._data.client_id, serial)] = self._now()

    def _closed(self, serial: int, broker: int) -> None:
        self._events.closed[(self._data.client_id, serial)] = self._now()
        self._sessions.pop(broker, None)

    # -- the member's life ---------------------------------------------------------------

    async def run(self) -> None:
        await self._configure_group()
        await super().run()

    async def _live(self, until_s: float) -> None:
        heartbeats = self._loop.create_task(self._heartbeats(until_s))
        await self._fetch_loop(until_s)
        heartbeats.cancel()
        await asyncio.gather(heartbeats, return_exceptions=True)

    async def _configure_group(self) -> None:
        """The group's GROUP configs (IncrementalAlterConfigs SET), before anyone joins."""

        def build(b: Builder) -> Any:
            return b.IncrementalAlterConfigsRequest(
                resources=(
                    b.AlterConfigsResource(
                        resource_type=GROUP_RESOURCE,
                        resource_name=self.group,
                        configs=tuple(
                            b.AlterableConfig(name=k, config_operation=SET, value=v)
                            for k, v in sorted(self._group_configs.items())
                        ),
                    ),
                ),
                validate_only=False,
            )

        while self._now() < self._stop_at_s:
            try:
                await self._hb.refresh((self.topic,))
                broker = min(self._hb.brokers)
                body, _ = await self._hb.call(broker, INCREMENTAL_ALTER_CONFIGS, 1, build)
                error = body.responses[0].error_code
                if error is ErrorCode.none:
                    return
                self._error(f"group config {error.name}")
            except (ConnectionError, ValueError):
                self._error("group config ConnectionError")
            await asyncio.sleep(1.0)

    def _killed(self) -> None:
        self._events.gone[self.member_id] = self._now()

    async def _let_go(self) -> None:
        """What it still holds is RELEASEd."""
        held: dict[int, list[tuple[Partition, int, int]]] = {}
        for (tp, offset), broker in sorted(self._held.items()):
            held.setdefault(broker, []).append((tp, offset, RELEASE))
        for broker, acks in sorted(held.items()):
            await self._acknowledge(broker, acks)
        self._events.gone[self.member_id] = self._now()

    # -- heartbeats ----------------------------------------------------------------------

    def _heartbeat_request(self) -> Callable[[Builder], Any]:
        def build(b: Builder) -> Any:
            return b.ShareGroupHeartbeatRequest(
                group_id=self.group,
                member_id=self.member_id,
                member_epoch=self.epoch,
                subscribed_topic_names=(self.topic,) if self.epoch == 0 else None,
            )

        return build

    async def _heartbeat_answered(self, body: Any) -> bool:
        self.epoch = int(body.member_epoch)
        if body.assignment is not None:
            self.assigned = self._partitions(body.assignment)
        return False

    def _fenced(self) -> None:
        super()._fenced()
        self.assigned = set()

    def _partitions(self, assignment: Any) -> set[Partition]:
        found: set[Partition] = set()
        for tp in assignment.topic_partitions:
            name = self._hb.topic_names.get(tp.topic_id)
            if name is not None:
                found.update((name, int(p)) for p in tp.partitions)
        return found

    # -- fetching and acknowledging ------------------------------------------------------

    async def _fetch_loop(self, until_s: float) -> None:
        """Poll every leader, process what came (a seeded think time: the records stay
        acquired meanwhile, as an application's do between poll and commit), then
        acknowledge on each leader's session."""
        while self._now() < until_s:
            by_leader = await self._leaders()
            acquired = {
                broker: await self._share_fetch(broker, tps)
                for broker, tps in sorted(by_leader.items())
            }
            got = sum(map(len, acquired.values()))
            if got:
                await self._maybe_freeze()
            await asyncio.sleep(0.05 if self._drain else self._rng.uniform(1.0, 3.0))
            for broker, records in acquired.items():
                await self._acknowledge_acquired(broker, records)
            if self._drain:
                whole = len(self.assigned) == self._data.partitions.get(self.topic, -1)
                self._empty_rounds = self._empty_rounds + 1 if whole and not got else 0
                if self._empty_rounds >= 3:
                    return

    async def _leaders(self) -> dict[int, list[Partition]]:
        by_leader: dict[int, list[Partition]] = {}
        for tp in sorted(self.assigned):
            leader = self._data.leaders.get(tp)
            if leader is None:
                await self._refresh_quietly()
                leader = self._data.leaders.get(tp)
            if leader is not None:
                by_leader.setdefault(leader.broker, []).append(tp)
        if not by_leader:
            await asyncio.sleep(0.5)
        return by_leader

    async def _acknowledge_acquired(
        self, broker: int, acquired: list[tuple[Partition, int, bool]]
    ) -> None:
        acks = []
        for tp, offset, has_record in acquired:
            kind = self._decide(offset) if has_record else GAP
            if kind is None:
                self._held[(tp, offset)] = broker
            else:
                acks.append((tp, offset, kind))
        if acks:
            await self._acknowledge(broker, acks)

    def _decide(self, offset: int) -> int | None:
        """ACCEPT mostly; None: leave it unacknowledged for its lock to expire."""
        if self._drain:
            return ACCEPT
        if offset % STICKY_RELEASE == 0:
            return RELEASE
        draw = self._rng.random()
        if draw < 0.05:
            return None
        if draw < 0.10:
            return REJECT
        if draw < 0.20:
            return RELEASE
        return ACCEPT

    async def _share_fetch(
        self, broker: int, tps: list[Partition]
    ) -> list[tuple[Partition, int, bool]]:
        """One ShareFetch on this broker's session: what it acquired, (tp, offset, is a
        data record)."""
        epoch, current = self._sessions.get(broker, (0, set()))
        wanted = set(tps)
        added = sorted(wanted if epoch == 0 else wanted - current)
        forgotten = sorted(current - wanted) if epoch > 0 else []
        topic_id = self._data.topic_ids.get(self.topic)
        if topic_id is None:
            await self._refresh_quietly()
            return []

        def build(b: Builder) -> Any:
            return b.ShareFetchRequest(
                group_id=self.group,
                member_id=self.member_id,
                share_session_epoch=epoch,
                max_wait=1000,
                min_bytes=1,
                max_bytes=1 << 20,
                max_records=MAX_RECORDS,
                batch_size=MAX_RECORDS,
                topics=(
                    b.FetchTopic(
                        topic_id=topic_id,
                        partitions=tuple(
                            b.FetchPartition(partition_index=p, acknowledgement_batches=())
                            for _, p in added
                        ),
                    ),
                )
                if added
                else (),
                forgotten_topics_data=(
                    b.ForgottenTopic(topic_id=topic_id, partitions=tuple(p for _, p in forgotten)),
                )
                if forgotten
                else (),
            )

        sent = self._now()
        epochs = {p: self._events.leader_epoch(topic, p) for topic, p in wanted}
        try:
            body, serial = await self._data.call(broker, SHARE_FETCH, 1, build, timeout_s=15)
        except ConnectionError:
            self._error("share fetch ConnectionError")
            await self._refresh_quietly()
            return []
        if body.error_code is not ErrorCode.none:
            self._error(f"share fetch {body.error_code.name}")
            self._sessions.pop(broker, None)
            return []
        self._sessions[broker] = (epoch + 1, wanted)
        return await self._acquired(body, broker, (self._data.client_id, serial), sent, epochs)

    async def _acquired(
        self,
        body: Any,
        broker: int,
        connection: tuple[str, int],
        sent: float,
        sent_epochs: dict[int, int],
    ) -> list[tuple[Partition, int, bool]]:
        """What a ShareFetch answer acquired, noted in the events: (tp, offset, is a data
        record); offsets without one (markers) are acquired too, and acknowledged as GAP.
        Each acquisition carries its partition's leader epoch when the fetch left and when
        its answer came (`Acquisition`)."""
        received = self._now()
        lock_s = body.acquisition_lock_timeout.total_seconds()
        acquired: list[tuple[Partition, int, bool]] = []
        for topic in body.responses:
            for data in topic.partitions:
                tp = (self.topic, int(data.partition_index))
                if data.error_code is not ErrorCode.none:
                    self._error(f"share fetch {data.error_code.name}")
                    await self._refresh_quietly()
                    continue
                records = data_records(data.records)
                for batch in data.acquired_records:
                    for offset in range(int(batch.first_offset), int(batch.last_offset) + 1):
                        acquired.append((tp, offset, offset in records))
                        if offset not in records:
                            continue
                        self._events.acquisitions.append(
                            Acquisition(
                                self.group, self.member_id, self.name, tp[0], tp[1], offset,
                                int(batch.delivery_count), broker, connection, sent, received,
                                lock_s, records[offset], sent_epochs.get(tp[1], -1),
                                self._events.leader_epoch(*tp),
                            )
                        )  # fmt: skip
        return acquired

    async def _acknowledge(self, broker: int, acks: list[tuple[Partition, int, int]]) -> None:
        session = self._sessions.get(broker)
        topic_id = self._data.topic_ids.get(self.topic)
        sent = self._now()
        errors: dict[int, ErrorCode] = {}
        if session is None or topic_id is None:
            errors = {p: ErrorCode.share_session_not_found for (_, p), _, _ in acks}
        else:
            errors = await self._send_acknowledge(broker, session[0], topic_id, acks)
        for (topic, partition), offset, kind in acks:
            self._held.pop(((topic, partition), offset), None)
            error = errors.get(partition, ErrorCode.network_exception)
            ok = error is ErrorCode.none
            self._events.acknowledgements.append(
                Acknowledgement(
                    self.group,
                    self.member_id,
                    self.name,
                    topic,
                    partition,
                    offset,
                    kind,
                    sent,
                    ok,
                    "" if ok else error.name,
                )
            )

    async def _send_acknowledge(
        self, broker: int, epoch: int, topic_id: uuid.UUID, acks: list[tuple[Partition, int, int]]
    ) -> dict[int, ErrorCode]:
        by_partition: dict[int, list[tuple[int, int]]] = {}
        for (_, partition), offset, kind in acks:
            by_partition.setdefault(partition, []).append((offset, kind))

        def build(b: Builder) -> Any:
            return b.ShareAcknowledgeRequest(
                group_id=self.group,
                member_id=self.member_id,
                share_session_epoch=epoch,
                topics=(
                    b.AcknowledgeTopic(
                        topic_id=topic_id,
                        partitions=tuple(
                            b.AcknowledgePartition(
                                partition_index=p,
                                acknowledgement_batches=tuple(
                                    b.AcknowledgementBatch(
                                        first_offset=first,
                                        last_offset=last,
                                        acknowledge_types=kinds,
                                    )
                                    for first, last, kinds in _batches(offsets)
                                ),
                            )
                            for p, offsets in sorted(by_partition.items())
                        ),
                    ),
                ),
            )

        try:
            body, _ = await self._data.call(broker, SHARE_ACKNOWLEDGE, 1, build, timeout_s=15)
        except ConnectionError:
            self._error("share acknowledge ConnectionError")
            return {}
        if body.error_code is not ErrorCode.none:
            self._error(f"share acknowledge {body.error_code.name}")
            if body.error_code in SESSION_ERRORS:
                self._sessions.pop(broker, None)
            return {}
        self._sessions[broker] = (epoch + 1, self._sessions.get(broker, (0, set()))[1])
        found = {int(p.partition_index): p.error_code for t in body.responses for p in t.partitions}
        for error in found.values():
            if error is not ErrorCode.none:
                self._error(f"share acknowledge {error.name}")
        return found


def _batches(offsets: list[tuple[int, int]]) -> list[tuple[int, int, tuple[int, ...]]]:
    """Contiguous runs of (offset, type): (first, last, one type per offset)."""
    runs: list[tuple[int, int, tuple[int, ...]]] = []
    for offset, kind in sorted(offsets):
        if runs and runs[-1][1] == offset - 1:
            first, _, kinds = runs[-1]
            runs[-1] = (first, offset, (*kinds, kind))
        else:
            runs.append((offset, offset, (kind,)))
    return runs
