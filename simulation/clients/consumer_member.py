"""A KIP-848 consumer group member (ConsumerGroupHeartbeat) that consumes and commits.

Reconciles as Kafka's ``ConsumerMembershipManager`` does, reduced to one subscribed topic:

- it joins at member epoch 0 with a member id of its own (KIP-1082), its subscription and a
  rebalance timeout, and heartbeats every ``heartbeat_interval`` the coordinator gives, each
  heartbeat naming the partitions it owns;
- an answer with an assignment is the member's new *target*; it reconciles to it at once:
  first it revokes what it owns outside the target (commits their positions, stops
  fetching them), then it takes what is new (their committed offsets, OffsetFetch v9), and
  sends a heartbeat right away to acknowledge (Kafka's member does not wait the interval);
- FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: its partitions are lost (no commit, Kafka's
  ``onPartitionsLost``) and it rejoins at epoch 0 with the same id;
- leaving: it revokes everything, then a heartbeat at epoch -1.

A second task fetches its owned partitions from their leaders (Fetch v12) and commits
after every batch (OffsetCommit v9 with its member epoch), noting each record and high
watermark in the `History` for the checkers every consumer shares. Each owned set it
reconciles to goes into `GroupEvents` with its epoch (the KIP-848 checker's input).

A ``MemberPlan`` can freeze it once (its network cut, as a paused process's is, for longer
than a session: the coordinator fences it and its partitions move; thawed, it learns it was
fenced and rejoins) or kill it (its connections dropped without a word; a new incarnation,
a new member id, starts later).

Where we differ from Kafka's consumer: no auto-commit timer (a commit after every batch,
as the aiokafka members do); a new partition starts at its committed offset or 0; one
topic; Fetch without sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.builders import Builder
from simulation.clients.client_history import GroupEvents, Owned, Partition
from simulation.clients.link import RETRIABLE_COORDINATOR, ClusterLink
from simulation.clients.records import data_records
from simulation.history import History

__all__ = ["ConsumerMember", "MemberPlan"]

FETCH, OFFSET_COMMIT, OFFSET_FETCH, CONSUMER_GROUP_HEARTBEAT = 1, 8, 9, 68
REBALANCE_TIMEOUT_MS = 60_000
COMMIT_TIMEOUT_S = 5.0
#: What the member spends on a batch before it fetches again.
THINK_S = 2.0
FENCED = (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id)


@dataclass(frozen=True, slots=True)
class MemberPlan:
    """What the nemesis of the clients does to one member (times are virtual seconds)."""

    freeze_at_s: float | None = None
    frozen_s: float = 0.0
    kill_at_s: float | None = None
    restart_after_s: float = 15.0


class ConsumerMember:
    """One KIP-848 member in the mix; `run` until ``stop_at_s``. See the module doc."""

    def __init__(
        self,
        *,
        bootstrap: str,
        group: str,
        topic: str,
        name: str,
        stop_at_s: float,
        history: History,
        events: GroupEvents,
        rng: random.Random,
        plan: MemberPlan,
    ) -> None:
        self._bootstrap = bootstrap
        self.group, self.topic, self.name = group, topic, name
        self._stop_at_s = stop_at_s
        self._history = history
        self._events = events
        self._rng = rng
        self._plan = plan
        self._loop = asyncio.get_running_loop()
        self._new_incarnation()

    def _new_incarnation(self) -> None:
        self.member_id = str(uuid.UUID(int=self._rng.getrandbits(128)))
        self.epoch = 0
        self.owned: set[Partition] = set()
        self.target: set[Partition] = set()
        self.target_epoch = 0
        self.positions: dict[Partition, int] = {}
        self.committed: dict[Partition, int] = {}
        self._heartbeat_s = 3.0
        self._coordinator: int | None = None
        self._hb = ClusterLink(self._bootstrap, f"{self.name}-hb")
        self._data = ClusterLink(self._bootstrap, f"{self.name}-data")
        self._frozen_once = False

    def _now(self) -> float:
        return self._loop.time()

    def _error(self, what: str) -> None:
        self._history.client_errors[f"{self.name} {what}"] += 1

    def _note(self, why: str) -> None:
        self._events.owned.append(
            Owned(
                self.group,
                self.member_id,
                self.name,
                self.epoch,
                tuple(sorted(self.owned)),
                self._now(),
                why,
            )
        )

    # -- the member's life ---------------------------------------------------------------

    async def run(self) -> None:
        plan = self._plan
        while self._now() < self._stop_at_s:
            dies_at = plan.kill_at_s if plan.kill_at_s and plan.kill_at_s > self._now() else None
            until = min(self._stop_at_s, dies_at or self._stop_at_s)
            tasks = [
                self._loop.create_task(self._heartbeats(until)),
                self._loop.create_task(self._consume(until)),
            ]
            await asyncio.gather(*tasks)
            if dies_at is not None and self._now() < self._stop_at_s:
                self._die()
                await asyncio.sleep(plan.restart_after_s)
                self._new_incarnation()
                continue
            await self._leave()
            break

    def _die(self) -> None:
        """Killed: connections dropped, no leave; what it owned is nobody's until its
        session expires at the coordinator."""
        self._hb.close()
        self._data.close()
        self.owned.clear()
        self._note("killed")
        self._history.faults.append(f"{self._now():.3f}s kill member {self.name}")

    async def _leave(self) -> None:
        if self.epoch > 0:
            await self._revoke(set(self.owned), "left")
            self.epoch = -1
            with contextlib.suppress(ConnectionError):
                await self._heartbeat()
        self._hb.close()
        self._data.close()

    # -- heartbeats and reconciliation ---------------------------------------------------

    async def _heartbeats(self, until_s: float) -> None:
        while self._now() < until_s:
            acknowledge = False
            try:
                acknowledge = await self._heartbeat()
            except ConnectionError:
                self._coordinator = None
                self._error("heartbeat ConnectionError")
            if acknowledge:
                continue
            await asyncio.sleep(min(self._heartbeat_s, max(0.0, until_s - self._now())) or 0.001)

    async def _heartbeat(self) -> bool:
        """One heartbeat; True when it changed what the member owns (acknowledge at once)."""
        if self._coordinator is None:
            await self._hb.refresh((self.topic,))
            self._coordinator = await self._hb.coordinator(self.group)
        owned = self._owned_by_topic_id()
        joining = self.epoch == 0

        def build(b: Builder) -> Any:
            return b.ConsumerGroupHeartbeatRequest(
                group_id=self.group,
                member_id=self.member_id,
                member_epoch=self.epoch,
                rebalance_timeout=REBALANCE_TIMEOUT_MS,
                subscribed_topic_names=(self.topic,),
                topic_partitions=()
                if joining
                else tuple(b.TopicPartitions(topic_id=t, partitions=ps) for t, ps in owned),
            )

        sent = self._now()
        body, _ = await self._hb.call(self._coordinator, CONSUMER_GROUP_HEARTBEAT, 1, build)
        error = body.error_code
        if self.epoch < 0:
            return False
        if error is ErrorCode.none:
            self._events.heartbeat_ok(self.member_id, sent)
            self._heartbeat_s = body.heartbeat_interval.total_seconds() or self._heartbeat_s
            if body.assignment is not None:
                self.target = await self._target(body.assignment)
            self.target_epoch = int(body.member_epoch)
            return await self._reconcile()
        self._error(error.name)
        if error in FENCED:
            self.owned.clear()
            self.positions.clear()
            self.epoch = 0
            self.target = set()
            self._note("fenced")
        elif error in RETRIABLE_COORDINATOR:
            self._coordinator = None
        return False

    def _owned_by_topic_id(self) -> list[tuple[uuid.UUID, tuple[int, ...]]]:
        topic_id = self._hb.topic_ids.get(self.topic)
        if topic_id is None or not self.owned:
            return []
        return [(topic_id, tuple(sorted(p for _, p in self.owned)))]

    async def _target(self, assignment: Any) -> set[Partition]:
        target: set[Partition] = set()
        for tp in assignment.topic_partitions:
            name = self._hb.topic_names.get(tp.topic_id)
            if name is None:
                await self._hb.refresh((self.topic,))
                name = self._hb.topic_names.get(tp.topic_id)
            if name is not None:
                target.update((name, int(p)) for p in tp.partitions)
        return target

    async def _reconcile(self) -> bool:
        """Revoke, then assign (Kafka's order); True when the owned set changed."""
        revoked = self.owned - self.target
        added = self.target - self.owned
        changed = False
        if revoked:
            await self._revoke(revoked, "revoked")
            changed = True
        if added:
            offsets = await self._committed_offsets(added)
            if offsets is not None:
                self.owned |= added
                for tp in added:
                    self.positions[tp] = max(0, offsets.get(tp, 0))
                changed = True
        if self.target_epoch != self.epoch or changed:
            self.epoch = self.target_epoch
            self._note("assigned" if added else "revoked" if revoked else "epoch")
        return changed

    async def _revoke(self, revoked: set[Partition], why: str) -> None:
        await self._commit(revoked, COMMIT_TIMEOUT_S)
        self.owned -= revoked
        for tp in revoked:
            self.positions.pop(tp, None)
        self._note(why)

    async def _committed_offsets(self, partitions: set[Partition]) -> dict[Partition, int] | None:
        def build(b: Builder) -> Any:
            return b.OffsetFetchRequest(
                groups=(
                    b.OffsetFetchRequestGroup(
                        group_id=self.group,
                        member_id=self.member_id,
                        member_epoch=self.target_epoch,
                        topics=(
                            b.OffsetFetchRequestTopics(
                                name=self.topic,
                                partition_indexes=tuple(sorted(p for _, p in partitions)),
                            ),
                        ),
                    ),
                ),
                require_stable=True,
            )

        try:
            assert self._coordinator is not None
            body, _ = await self._hb.call(self._coordinator, OFFSET_FETCH, 9, build)
        except ConnectionError:
            self._error("offset fetch ConnectionError")
            return None
        group = body.groups[0]
        if group.error_code is not ErrorCode.none:
            self._error(f"offset fetch {group.error_code.name}")
            return None
        found: dict[Partition, int] = {}
        for topic in group.topics:
            for p in topic.partitions:
                if p.error_code is not ErrorCode.none:
                    self._error(f"offset fetch {p.error_code.name}")
                    return None
                found[(str(topic.name), int(p.partition_index))] = int(p.committed_offset)
        return found

    async def _commit(self, partitions: set[Partition], timeout_s: float | None = None) -> None:
        """Commit the positions of ``partitions`` that moved since their last commit."""
        offsets = {
            tp: self.positions[tp]
            for tp in sorted(partitions)
            if tp in self.positions and self.positions[tp] != self.committed.get(tp)
        }
        if not offsets or self._coordinator is None or self.epoch <= 0:
            return

        def build(b: Builder) -> Any:
            return b.OffsetCommitRequest(
                group_id=self.group,
                generation_id_or_member_epoch=self.epoch,
                member_id=self.member_id,
                topics=(
                    b.OffsetCommitRequestTopic(
                        name=self.topic,
                        partitions=tuple(
                            b.OffsetCommitRequestPartition(
                                partition_index=p,
                                committed_offset=o,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            )
                            for (_, p), o in offsets.items()
                        ),
                    ),
                ),
            )

        sent = self._now()
        try:
            body, _ = await self._hb.call(self._coordinator, OFFSET_COMMIT, 9, build, timeout_s)
        except ConnectionError:
            self._error("commit ConnectionError")
            return
        for topic in body.topics:
            for p in topic.partitions:
                tp = (str(topic.name), int(p.partition_index))
                if p.error_code is ErrorCode.none:
                    self.committed[tp] = offsets[tp]
                    self._history.committed(
                        self.group, tp[0], tp[1], offsets[tp], (sent, self._now())
                    )
                else:
                    self._error(f"commit {p.error_code.name}")

    # -- consuming -----------------------------------------------------------------------

    async def _consume(self, until_s: float) -> None:
        while self._now() < until_s:
            fetched = await self._fetch_once()
            if fetched:
                await self._maybe_freeze()
                await self._commit(set(self.owned))
            await asyncio.sleep(max(0.001, min(THINK_S, until_s - self._now())))

    async def _maybe_freeze(self) -> None:
        plan = self._plan
        if self._frozen_once or plan.freeze_at_s is None or self._now() < plan.freeze_at_s:
            return
        self._frozen_once = True
        network = getattr(self._loop, "network", None)
        if network is not None:
            network.isolate(self.name)
        self._history.faults.append(f"{self._now():.3f}s freeze member {self.name}")
        await asyncio.sleep(plan.frozen_s)
        if network is not None:
            network.rejoin(self.name)
        self._history.faults.append(f"{self._now():.3f}s thaw member {self.name}")

    async def _fetch_once(self) -> bool:
        """One Fetch to each leader of what the member owns; True when records came."""
        owned = {tp: self.positions[tp] for tp in sorted(self.owned) if tp in self.positions}
        if not owned:
            return False
        by_leader: dict[int, list[Partition]] = {}
        for tp in owned:
            leader = self._data.leaders.get(tp)
            if leader is None:
                try:
                    await self._data.refresh((self.topic,))
                except ConnectionError:
                    return False
                leader = self._data.leaders.get(tp)
            if leader is not None:
                by_leader.setdefault(leader.broker, []).append(tp)
        got = False
        for broker, tps in sorted(by_leader.items()):
            got |= await self._fetch_from(broker, {tp: owned[tp] for tp in tps})
        return got

    async def _fetch_from(self, broker: int, positions: dict[Partition, int]) -> bool:
        def build(b: Builder) -> Any:
            return b.FetchRequest(
                max_wait=1000,
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=0,
                topics=(
                    b.FetchTopic(
                        topic=self.topic,
                        partitions=tuple(
                            b.FetchPartition(
                                partition=p, fetch_offset=o, partition_max_bytes=1 << 16
                            )
                            for (_, p), o in positions.items()
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            )

        try:
            body, _ = await self._data.call(broker, FETCH, 12, build)
        except ConnectionError:
            self._error("fetch ConnectionError")
            await self._refresh_quietly()
            return False
        got = False
        for topic in body.responses:
            for data in topic.partitions:
                tp = (str(topic.topic), int(data.partition_index))
                if data.error_code is not ErrorCode.none:
                    self._error(f"fetch {data.error_code.name}")
                    await self._refresh_quietly()
                    continue
                if tp not in self.owned or self.positions.get(tp) != positions[tp]:
                    continue  # revoked (or moved) while the fetch was out: not ours now
                self._history.high_watermark(self.name, tp[0], tp[1], int(data.high_watermark))
                records = data_records(data.records)
                for offset in sorted(o for o in records if o >= positions[tp]):
                    value = records[offset]
                    if value is not None:
                        self._history.read(self.name, tp[0], tp[1], offset, value)
                    self.positions[tp] = offset + 1
                    got = True
        return got

    async def _refresh_quietly(self) -> None:
        try:
            await self._data.refresh((self.topic,))
        except ConnectionError:
            self._error("metadata ConnectionError")
