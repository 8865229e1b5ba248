"""The in-process controller: leader election, ISR changes, broker liveness.

In Kafka (KRaft) the controller quorum owns partition leadership and the ISR: a
leader asks it to change the ISR (AlterPartition), it fences a broker whose heartbeats
stop and elects new leaders from the ISR, and it brings a restarted broker's replicas
back. Every broker then learns the new state from the metadata log. Here all brokers
share one ``ClusterMetadata`` in one process, so the controller is one object that
writes it, and brokers learn by their metadata subscription — synchronously.

Every partition change goes through ``partition_change.build_change`` (Kafka's
PartitionChangeBuilder): KIP-966's eligible leader replicas while the
``eligible.leader.replicas.version`` feature is 1 (Kafka 4.1+'s default; the cluster-level
``min.insync.replicas`` comes with it), clean elections from the ISR (or, the ISR being
empty, the ELR), unclean ones where ``unclean.leader.election.enable`` is true. A
partition with no electable replica has no leader (-1) until one returns: with ELR its
ISR is empty and its ELR and last-known ELR say who may lead; without, its ISR keeps the
last member, as KRaft did before ELR.

Logs are for a person: a broker that stops or starts is one INFO line with a summary
of the partitions it moved, and ISR changes granted in one turn of the event loop (a
leader's ISR expiration pass, a follower catching up on every partition of one fetch)
are one INFO line per kind of change (``IsrChangeLog``). The per-partition detail is
at DEBUG.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata, PartitionState
from broker.cluster.kraft_quorum import KRaftQuorum
from broker.cluster.partition_change import (
    DEFAULT_ELIGIBLE_LEADER_REPLICAS_LEVEL,
    Election,
    PartitionChange,
    build_change,
)
from broker.cluster.replication_control import maybe_complete_reassignment

log = logging.getLogger("broker.controller")  # the name its log lines have always carried

NO_LEADER = -1
MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
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
    """Decides leaders, ISRs and ELRs for the whole cluster; counts what it did."""

    def __init__(
        self,
        cluster: ClusterMetadata,
        quorum: KRaftQuorum | None = None,
        *,
        static_min_insync_replicas: int = 1,
        eligible_leader_replicas_level: Callable[[], int] = lambda: (
            DEFAULT_ELIGIBLE_LEADER_REPLICAS_LEVEL
        ),
    ) -> None:
        self.cluster = cluster
        # The KRaft controller quorum DescribeQuorum shows (default: every broker votes).
        self.quorum = quorum if quorum is not None else KRaftQuorum(cluster)
        self.static_min_insync_replicas = static_min_insync_replicas
        self._elr_level = eligible_leader_replicas_level
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.leader_elections = 0
        self.offline_partitions = 0
        self.isr_log = IsrChangeLog()
        if self.elr_enabled:
            self.maybe_generate_elr_safety_configs()

    # -- KIP-966 -----------------------------------------------------------------------

    @property
    def elr_enabled(self) -> bool:
        """``eligible.leader.replicas.version`` >= 1 (Kafka's ``isElrEnabled``)."""
        return self._elr_level() >= 1

    def maybe_generate_elr_safety_configs(self) -> None:
        """Kafka's ``maybeGenerateElrSafetyRecords``: with ELR on, ``min.insync.replicas``
        lives at the cluster level (the static value when none is set) and never per
        broker. DescribeConfigs then shows it on every topic as DYNAMIC_DEFAULT_BROKER_CONFIG."""
        configs = self.cluster.broker_configs
        for name in sorted(n for n, c in configs.items() if n and MIN_INSYNC_REPLICAS in c):
            rest = {k: v for k, v in configs[name].items() if k != MIN_INSYNC_REPLICAS}
            log.info("Removing broker-level %s for broker %s", MIN_INSYNC_REPLICAS, name)
            self.cluster.set_broker_configs(name, rest)
        cluster_level = configs.get("", {})
        if MIN_INSYNC_REPLICAS not in cluster_level:
            value = str(self.static_min_insync_replicas)
            log.info("Generating cluster-level %s of %s", MIN_INSYNC_REPLICAS, value)
            self.cluster.set_broker_configs("", {**cluster_level, MIN_INSYNC_REPLICAS: value})

    def effective_min_isr(self, topic: str) -> int:
        """Kafka's ``getTopicEffectiveMinIsr``: the topic's, else the cluster's, else the
        static ``min.insync.replicas``, capped by the replication factor."""
        info = self.cluster.topics[topic]
        value = info.configs.get(MIN_INSYNC_REPLICAS) or self.cluster.broker_configs.get(
            "", {}
        ).get(MIN_INSYNC_REPLICAS)
        min_isr = int(value) if value else self.static_min_insync_replicas
        replication = len(info.partitions[0].replicas) if info.partitions else 1
        return min(min_isr, replication)

    def unclean_election_enabled(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` of the topic, else the cluster default."""
        value = self.cluster.topics[topic].configs.get(UNCLEAN_LEADER_ELECTION) or (
            self.cluster.broker_configs.get("", {}).get(UNCLEAN_LEADER_ELECTION, "false")
        )
        return value.strip().lower() == "true"

    def partition_change(
        self,
        topic: str,
        state: PartitionState,
        target_isr: list[int],
        acceptable: Callable[[int], bool],
        election: Election | None = None,
        excluded: Sequence[int] = (),
    ) -> PartitionChange:
        """The controller's one way to a partition's next state (PartitionChangeBuilder)."""
        if election is None:
            unclean = self.unclean_election_enabled(topic)
            election = Election.UNCLEAN if unclean else Election.ONLINE
        return build_change(
            state,
            target_isr,
            acceptable,
            min_isr=self.effective_min_isr(topic),
            elr_enabled=self.elr_enabled,
            election=election,
            excluded=excluded,
        )

    def _apply(self, topic: str, state: PartitionState, change: PartitionChange) -> None:
        if change.is_no_op:
            return
        if change.unclean:
            log.warning(
                "Unclean election of %s-%d: broker %d leads, records only its ISR "
                "predecessors had are lost",
                topic,
                state.partition,
                change.leader,
            )
        self.cluster.change_partition(
            topic,
            state.partition,
            leader=change.leader,
            isr=change.isr,
            elr=change.elr,
            last_known_elr=change.last_known_elr,
            notify=False,
        )

    # -- AlterPartition (leaders ask) --------------------------------------------------

    def alter_partition_isr(
        self, topic: str, partition: int, leader_id: int, leader_epoch: int, new_isr: list[int]
    ) -> ErrorCode:
        """A leader asks to change its partition's ISR (Kafka's AlterPartition).

        Refused when the asker is not the current leader of that epoch
        (FENCED_LEADER_EPOCH) or adds a broker that is not alive (INELIGIBLE_REPLICA,
        KIP-841). A granted change bumps the partition epoch and tells every broker; with
        ELR, replicas leaving an ISR below min ISR join the ELR.
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
        change = self.partition_change(topic, state, ordered, alive.__contains__)
        self._apply(topic, state, change)
        # A reassignment whose target replicas are all in the ISR now completes in the
        # same change (KRaft's PartitionChangeBuilder; broker/cluster/replication_control.py).
        maybe_complete_reassignment(self.cluster, topic, partition)
        self.cluster.partition_changed(topic)
        return ErrorCode.none

    def move_leader_away(self, topic: str, partition: int, broker_id: int) -> bool:
        """Another live in-sync replica leads ``topic-partition`` instead of ``broker_id``,
        the ISR unchanged (as a preferred-replica election moves a leadership); False
        when ``broker_id`` does not lead it or no other replica can. BUGGIFY's leader
        step-down in the middle of an append (`broker.buggify`)."""
        info = self.cluster.topics.get(topic)
        if info is None or partition >= len(info.partitions):
            return False
        state = info.partitions[partition]
        if state.leader != broker_id:
            return False
        alive = {b.broker_id for b in self.cluster.alive_brokers()} - {broker_id}
        decided = self.partition_change(
            topic, state, list(state.isr), alive.__contains__, Election.ONLINE
        )
        if decided.leader is None or decided.leader == NO_LEADER:
            return False
        self._apply(topic, state, decided)
        self.leader_elections += 1
        log.debug("%s-%d leader %d steps down for %d", topic, partition, broker_id, state.leader)
        self.cluster.partition_changed(topic)
        return True

    # -- broker liveness ---------------------------------------------------------------

    def on_broker_failure(self, broker_id: int) -> BrokerChange:
        """A broker stopped: drop it from every ISR, re-elect where it led.

        Logs one line with what moved and returns it."""
        self.cluster.mark_broker_stopped(broker_id)
        change = self._remove_broker_everywhere(broker_id)
        self._move_controller({b.broker_id for b in self.cluster.alive_brokers()})
        log.info("%s", change.summary("is down (fenced)"))
        return change

    def _remove_broker_everywhere(self, broker_id: int, unregister: bool = False) -> BrokerChange:
        """Kafka's handleBrokerFenced: every partition that has the broker in its ISR or
        ELR or as leader gets a new ISR without it and, where it led, a new leader."""
        alive = {b.broker_id for b in self.cluster.alive_brokers()} - {broker_id}
        change = BrokerChange(broker_id)
        for name, topic in list(self.cluster.topics.items()):
            changed = False
            for state in topic.partitions:
                if (
                    broker_id not in state.isr
                    and broker_id not in state.elr
                    and state.leader != broker_id
                ):
                    continue
                changed = True
                self._remove_from_isr(name, state, broker_id, alive, change, unregister)
            if changed:
                self.cluster.partition_changed(name)
        return change

    def _remove_from_isr(
        self,
        topic: str,
        state: PartitionState,
        broker_id: int,
        alive: set[int],
        change: BrokerChange,
        unregister: bool = False,
    ) -> None:
        name = f"{topic}-{state.partition}"
        was_leader = state.leader == broker_id
        old_isr = list(state.isr)
        target = [r for r in state.isr if r != broker_id and r in alive]
        excluded = (broker_id,) if unregister else ()
        decided = self.partition_change(topic, state, target, alive.__contains__, excluded=excluded)
        if unregister and state.last_known_elr == [broker_id] and decided.last_known_elr is None:
            decided = replace(decided, last_known_elr=[])
        self._apply(topic, state, decided)
        if not was_leader:
            if broker_id in old_isr:
                log.debug("%s ISR %s -> %s", name, old_isr, state.isr)
                change.isr_shrunk.append(name)
            return
        if state.leader != NO_LEADER:
            self.leader_elections += 1
            log.debug(
                "%s leader %d -> %d (epoch %d)", name, broker_id, state.leader, state.leader_epoch
            )
            change.leaders_moved[name] = state.leader
        else:
            # No clean choice: offline until an ISR (or, with ELR, ELR) member returns.
            self.offline_partitions += 1
            log.debug("%s is offline: no live replica in ISR", name)
            change.offline.append(name)

    def on_broker_startup(self, broker_id: int) -> BrokerChange:
        """A broker is back: lead the partitions that were waiting for it.

        Kafka's handleBrokerUnfenced: every leaderless partition runs an election in
        which this broker counts as alive (a last ISR member, an ELR member, or the last
        known leader). Its other replicas become followers (they already are: the
        broker's replica manager re-reads the metadata at start) and rejoin the ISR once
        caught up. Logs one line with what moved and returns it.
        """
        alive = {b.broker_id for b in self.cluster.alive_brokers()} | {broker_id}
        change = BrokerChange(broker_id)
        for name, topic in list(self.cluster.topics.items()):
            changed = False
            for state in topic.partitions:
                if state.leader != NO_LEADER or broker_id not in state.replicas:
                    continue
                decided = self.partition_change(name, state, list(state.isr), alive.__contains__)
                if decided.is_no_op:
                    continue
                self._apply(name, state, decided)
                changed = True
                if state.leader != NO_LEADER:
                    self.leader_elections += 1
                    self.offline_partitions = max(0, self.offline_partitions - 1)
                    change.leaders_moved[f"{name}-{state.partition}"] = state.leader
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

    # -- UnregisterBroker --------------------------------------------------------------

    def unregister_broker(self, broker_id: int) -> tuple[ErrorCode, str | None]:
        """Kafka's ``unregisterBroker`` (Admin.unregisterBroker, key 64): the broker
        leaves every ISR and ELR, loses its leaderships, and its registration is gone
        (Metadata and DescribeCluster stop listing it). BROKER_ID_NOT_REGISTERED for an
        id with no registration. Kafka does not refuse a live broker: its next heartbeat
        fails and it registers again; here a live broker registers again at once, so it
        stays listed and rejoins its ISRs as a follower."""
        endpoint = self.cluster.brokers.get(broker_id)
        if endpoint is None:
            return (
                ErrorCode.broker_id_not_registered,
                f"Broker ID {broker_id} is not currently registered",
            )
        change = self._remove_broker_everywhere(broker_id, unregister=True)
        self.cluster.unregister_broker(broker_id)
        log.info("%s", change.summary("is unregistered"))
        if endpoint.alive:
            self.cluster.register_broker(broker_id, endpoint.host, endpoint.port)
            for listener, (host, port) in endpoint.listeners.items():
                self.cluster.register_listener(broker_id, listener, host, port)
            self.on_broker_startup(broker_id)
        else:
            self._move_controller({b.broker_id for b in self.cluster.alive_brokers()})
        return ErrorCode.none, None

    def _move_controller(self, alive: set[int]) -> None:
        """The active controller is shown as the lowest live broker id."""
        if alive and self.cluster.controller_id not in alive:
            self.cluster.controller_id = min(alive)
