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
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.builders import Builder
from simulation.clients.client_history import GroupEvents, Owned, Partition
from simulation.clients.link import ClusterLink
from simulation.clients.member_life import ProtocolMember
from simulation.clients.records import data_records

__all__ = ["ConsumerMember"]

FETCH, OFFSET_COMMIT, OFFSET_FETCH, CONSUMER_GROUP_HEARTBEAT = 1, 8, 9, 68
REBALANCE_TIMEOUT_MS = 60_000
COMMIT_TIMEOUT_S = 5.0
#: What the member spends on a batch before it fetches again.
THINK_S = 2.0


class ConsumerMember(ProtocolMember[GroupEvents]):
    """One KIP-848 member in the mix; `run` until ``stop_at_s``. See the module doc."""

    heartbeat_api = CONSUMER_GROUP_HEARTBEAT

    def _new_incarnation(self) -> None:
        super()._new_incarnation()
        self.owned: set[Partition] = set()
        self.target: set[Partition] = set()
        self.target_epoch = 0
        self.positions: dict[Partition, int] = {}
        self.committed: dict[Partition, int] = {}
        self._hb = ClusterLink(self._bootstrap, f"{self.name}-hb")
        self._data = ClusterLink(self._bootstrap, f"{self.name}-data")

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

    async def _live(self, until_s: float) -> None:
        tasks = [
            self._loop.create_task(self._heartbeats(until_s)),
            self._loop.create_task(self._consume(until_s)),
        ]
        await asyncio.gather(*tasks)

    def _killed(self) -> None:
        """What it owned is nobody's until its session expires at the coordinator."""
        self.owned.clear()
        self._note("killed")

    async def _let_go(self) -> None:
        if self.epoch > 0:
            await self._revoke(set(self.owned), "left")

    # -- heartbeats and reconciliation ---------------------------------------------------

    def _heartbeat_pause_s(self, until_s: float) -> float:
        return min(self._heartbeat_s, max(0.0, until_s - self._now())) or 0.001

    def _heartbeat_request(self) -> Callable[[Builder], Any]:
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

        return build

    async def _heartbeat_answered(self, body: Any) -> bool:
        """A new target reconciled at once; True when that changed what the member owns
        (it acknowledges at once)."""
        if body.assignment is not None:
            self.target = await self._target(body.assignment)
        self.target_epoch = int(body.member_epoch)
        return await self._reconcile()

    def _fenced(self) -> None:
        """Its partitions are lost (no commit)."""
        self.owned.clear()
        self.positions.clear()
        super()._fenced()
        self.target = set()
        self._note("fenced")

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
