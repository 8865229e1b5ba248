"""The in-process controller: leader election, ISR changes, broker liveness.

In Kafka (KRaft) the controller quorum owns partition leadership and the ISR: a
leader asks it to change the ISR (AlterPartition), it fences a broker whose heartbeats
stop and elects new leaders from the ISR, and it brings a restarted broker's replicas
back. Every broker then learns the new state from the metadata log. Here all brokers
share one ``ClusterMetadata`` in one process, so the controller is one object that
writes it, and brokers learn by their metadata subscription — synchronously.

Only clean elections happen (``unclean.leader.election.enable=false``): a partition
whose every ISR member is down has no leader (-1) until one of them returns; its ISR
keeps that last member, as KRaft does, so the returning broker leads again.

Logs are for a person: a broker that stops or starts is one INFO line with a summary
of the partitions it moved, and ISR changes granted in one turn of the event loop (a
leader's ISR expiration pass, a follower catching up on every partition of one fetch)
are one INFO line per kind of change (``IsrChangeLog``). The per-partition detail is
at DEBUG.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata, PartitionState
from broker.cluster.kraft_quorum import KRaftQuorum
from broker.cluster.replication_control import maybe_complete_reassignment

log = logging.getLogger("broker.controller")  # the name its log lines have always carried

NO_LEADER = -1
#: Partitions named in one summary line before "+N more".
SHOWN_PARTITIONS = 6


def partition_list(names: Sequence[str], shown: int = SHOWN_PARTITIONS) -> str:
    """``a-0, a-1, b-3, +12 more``: a few partition names (the users' topics before the
    internal ones, partitions in number order), then how many are left."""
    ordered = sorted(names, key=_partition_order)
    head = ", ".join(ordered[:shown])
    return head if len(ordered) <= shown else f"{head}, +{len(ordered) - shown} more"


def _partition_order(name: str) -> tuple[bool, str, int]:
    topic, _, index = name.rpartition("-")
    return topic.startswith("__"), topic, int(index) if index.isdigit() else -1


@dataclass
class BrokerChange:
    """What the controller did when a broker stopped or started (for one log line)."""

    broker_id: int
    #: partition name -> its new leader
    leaders_moved: dict[str, int] = field(default_factory=dict)
    #: partitions whose ISR lost the broker while their leader stayed
    isr_shrunk: list[str] = field(default_factory=list)
    #: partitions left without a leader (every ISR member down)
    offline: list[str] = field(default_factory=list)

    def summary(self, event: str) -> str:
        parts = [f"Broker {self.broker_id} {event}"]
        if self.leaders_moved:
            by_leader: dict[int, int] = {}
            for leader in self.leaders_moved.values():
                by_leader[leader] = by_leader.get(leader, 0) + 1
            to = ", ".join(
                "offline" if b == NO_LEADER else f"{n} to broker {b}"
                for b, n in sorted(by_leader.items())
            )
            names = partition_list(list(self.leaders_moved))
            parts.append(
                f"leadership of {len(self.leaders_moved)} partitions moved ({to}: {names})"
            )
        if self.isr_shrunk:
            parts.append(f"left the ISR of {len(self.isr_shrunk)} more partitions")
        if self.offline:
            parts.append(
                f"{len(self.offline)} partitions offline, no live ISR member "
                f"({partition_list(self.offline)})"
            )
        if len(parts) == 1:
            return parts[0]
        return parts[0] + ": " + "; ".join(parts[1:])


class IsrChangeLog:
    """ISR changes granted in one turn of the event loop, logged as one line per kind
    (shrink or expand, and which broker left or joined). Without a running loop (unit
    tests) each change is logged at once."""

    def __init__(self) -> None:
        self._pending: dict[tuple[str, int], list[str]] = {}
        self._scheduled = False

    def record(self, name: str, old: list[int], new: list[int]) -> None:
        log.debug("%s ISR %s -> %s", name, old, new)
        for broker in new:
            if broker not in old:
                self._pending.setdefault(("joined", broker), []).append(name)
        for broker in old:
            if broker not in new:
                self._pending.setdefault(("left", broker), []).append(name)
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._scheduled = True
        loop.call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, {}
        for (kind, broker), names in sorted(pending.items()):
            if kind == "joined":
                verb = "Expanding ISR: broker %d rejoined the ISR of %d partitions (%s)"
            else:
                verb = "Shrinking ISR: broker %d left the ISR of %d partitions (%s)"
            log.info(verb, broker, len(names), partition_list(names))


class Controller:
    """Decides leaders and ISRs for the whole cluster; counts what it did."""

    def __init__(self, cluster: ClusterMetadata, quorum: KRaftQuorum | None = None) -> None:
        self.cluster = cluster
        # The KRaft controller quorum DescribeQuorum shows (default: every broker votes).
        self.quorum = quorum if quorum is not None else KRaftQuorum(cluster)
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.leader_elections = 0
        self.offline_partitions = 0
        self.isr_log = IsrChangeLog()

    # -- AlterPartition (leaders ask) --------------------------------------------------

    def alter_partition_isr(
        self, topic: str, partition: int, leader_id: int, leader_epoch: int, new_isr: list[int]
    ) -> ErrorCode:
        """A leader asks to change its partition's ISR (Kafka's AlterPartition).

        Refused when the asker is not the current leader of that epoch
        (FENCED_LEADER_EPOCH) or adds a broker that is not alive (INELIGIBLE_REPLICA,
        KIP-841). A granted change bumps the partition epoch and tells every broker.
        """
        state = self.cluster.partition_state(topic, partition)
        if state is None:
            return ErrorCode.unknown_topic_or_partition
        if state.leader != leader_id or state.leader_epoch != leader_epoch:
            return ErrorCode.fenced_leader_epoch
        alive = {b.broker_id for b in self.cluster.alive_brokers()}
        added = [r for r in new_isr if r not in state.isr]
        if any(r not in alive or r not in state.replicas for r in added):
            return ErrorCode.ineligible_replica
        if leader_id not in new_isr:
            return ErrorCode.invalid_request
        ordered = [r for r in state.replicas if r in new_isr]
        if ordered == state.isr:
            return ErrorCode.none
        shrunk = any(r not in new_isr for r in state.isr)
        if shrunk:
            self.isr_shrinks += 1
        if added:
            self.isr_expands += 1
        self.isr_log.record(f"{topic}-{partition}", state.isr, ordered)
        self.cluster.change_partition(topic, partition, isr=ordered, notify=False)
        # A reassignment whose target replicas are all in the ISR now completes in the
        # same change (KRaft's PartitionChangeBuilder; broker/cluster/replication_control.py).
        maybe_complete_reassignment(self.cluster, topic, partition)
        self.cluster.partition_changed(topic)
        return ErrorCode.none

    # -- broker liveness ---------------------------------------------------------------

    def on_broker_failure(self, broker_id: int) -> BrokerChange:
        """A broker stopped: drop it from every ISR, re-elect where it led.

        Logs one line with what moved and returns it."""
        self.cluster.mark_broker_stopped(broker_id)
        alive = {b.broker_id for b in self.cluster.alive_brokers()}
        change = BrokerChange(broker_id)
        for name, topic in list(self.cluster.topics.items()):
            changed = False
            for state in topic.partitions:
                if broker_id not in state.isr and state.leader != broker_id:
                    continue
                changed = True
                self._remove_from_isr(name, state, broker_id, alive, change)
            if changed:
                self.cluster.partition_changed(name)
        self._move_controller(alive)
        log.info("%s", change.summary("is down (fenced)"))
        return change

    def _remove_from_isr(
        self,
        topic: str,
        state: PartitionState,
        broker_id: int,
        alive: set[int],
        change: BrokerChange,
    ) -> None:
        name = f"{topic}-{state.partition}"
        remaining = [r for r in state.isr if r != broker_id and r in alive]
        if state.leader != broker_id:
            log.debug("%s ISR %s -> %s", name, state.isr, remaining)
            change.isr_shrunk.append(name)
            self.cluster.change_partition(topic, state.partition, isr=remaining, notify=False)
            return
        candidates = [r for r in state.replicas if r in remaining]
        if candidates:
            self.leader_elections += 1
            log.debug(
                "%s leader %d -> %d (epoch %d)",
                name,
                broker_id,
                candidates[0],
                state.leader_epoch + 1,
            )
            change.leaders_moved[name] = candidates[0]
            self.cluster.change_partition(
                topic, state.partition, leader=candidates[0], isr=remaining, notify=False
            )
        else:
            # No clean choice: offline until an ISR member returns; keep it in the ISR.
            self.offline_partitions += 1
            log.debug("%s is offline: no live replica in ISR", name)
            change.offline.append(name)
            self.cluster.change_partition(
                topic, state.partition, leader=NO_LEADER, isr=[broker_id], notify=False
            )

    def on_broker_startup(self, broker_id: int) -> BrokerChange:
        """A broker is back: lead the partitions that were waiting for it.

        Its other replicas become followers (they already are: the broker's replica
        manager re-reads the metadata at start) and rejoin the ISR once caught up.
        Logs one line with what moved and returns it.
        """
        alive = {b.broker_id for b in self.cluster.alive_brokers()}
        change = BrokerChange(broker_id)
        for name, topic in list(self.cluster.topics.items()):
            changed = False
            for state in topic.partitions:
                if state.leader == NO_LEADER and broker_id in state.isr:
                    self.leader_elections += 1
                    self.offline_partitions = max(0, self.offline_partitions - 1)
                    change.leaders_moved[f"{name}-{state.partition}"] = broker_id
                    self.cluster.change_partition(
                        name, state.partition, leader=broker_id, isr=[broker_id], notify=False
                    )
                    changed = True
            if changed:
                self.cluster.partition_changed(name)
        self._move_controller(alive)
        follows = sum(
            1
            for topic in self.cluster.topics.values()
            for state in topic.partitions
            if broker_id in state.replicas and broker_id not in state.isr
        )
        event = "is up (unfenced)"
        if follows:
            event += f", catching up on {follows} partitions to rejoin their ISR"
        log.info("%s", change.summary(event))
        return change

    def _move_controller(self, alive: set[int]) -> None:
        """The active controller is shown as the lowest live broker id."""
        if alive and self.cluster.controller_id not in alive:
            self.cluster.controller_id = min(alive)
