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
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from broker.cluster_metadata import ClusterMetadata, PartitionState

log = logging.getLogger("broker.controller")

NO_LEADER = -1


class Controller:
    """Decides leaders and ISRs for the whole cluster; counts what it did."""

    def __init__(self, cluster: ClusterMetadata) -> None:
        self.cluster = cluster
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.leader_elections = 0
        self.offline_partitions = 0

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
        log.info("%s-%d ISR %s -> %s", topic, partition, state.isr, ordered)
        self.cluster.change_partition(topic, partition, isr=ordered)
        return ErrorCode.none

    # -- broker liveness ---------------------------------------------------------------

    def on_broker_failure(self, broker_id: int) -> None:
        """A broker stopped: drop it from every ISR, re-elect where it led."""
        endpoint = self.cluster.brokers.get(broker_id)
        if endpoint is not None:
            endpoint.alive = False
        alive = {b.broker_id for b in self.cluster.alive_brokers()}
        for name, topic in list(self.cluster.topics.items()):
            changed = False
            for state in topic.partitions:
                if broker_id not in state.isr and state.leader != broker_id:
                    continue
                changed = True
                self._remove_from_isr(name, state, broker_id, alive)
            if changed:
                self.cluster.partition_changed(name)
        self._move_controller(alive)

    def _remove_from_isr(
        self, topic: str, state: PartitionState, broker_id: int, alive: set[int]
    ) -> None:
        remaining = [r for r in state.isr if r != broker_id and r in alive]
        if state.leader != broker_id:
            self.cluster.change_partition(topic, state.partition, isr=remaining, notify=False)
            return
        candidates = [r for r in state.replicas if r in remaining]
        if candidates:
            self.leader_elections += 1
            log.info(
                "%s-%d leader %d -> %d (epoch %d)",
                topic,
                state.partition,
                broker_id,
                candidates[0],
                state.leader_epoch + 1,
            )
            self.cluster.change_partition(
                topic, state.partition, leader=candidates[0], isr=remaining, notify=False
            )
        else:
            # No clean choice: offline until an ISR member returns; keep it in the ISR.
            self.offline_partitions += 1
            log.warning("%s-%d is offline: no live replica in ISR", topic, state.partition)
            self.cluster.change_partition(
                topic, state.partition, leader=NO_LEADER, isr=[broker_id], notify=False
            )

    def on_broker_startup(self, broker_id: int) -> None:
        """A broker is back: lead the partitions that were waiting for it.

        Its other replicas become followers (they already are: the broker's replica
        manager re-reads the metadata at start) and rejoin the ISR once caught up.
        """
        alive = {b.broker_id for b in self.cluster.alive_brokers()}
        for name, topic in list(self.cluster.topics.items()):
            changed = False
            for state in topic.partitions:
                if state.leader == NO_LEADER and broker_id in state.isr:
                    self.leader_elections += 1
                    self.offline_partitions = max(0, self.offline_partitions - 1)
                    self.cluster.change_partition(
                        name, state.partition, leader=broker_id, isr=[broker_id], notify=False
                    )
                    changed = True
            if changed:
                self.cluster.partition_changed(name)
        self._move_controller(alive)

    def _move_controller(self, alive: set[int]) -> None:
        """The active controller is shown as the lowest live broker id."""
        if alive and self.cluster.controller_id not in alive:
            self.cluster.controller_id = min(alive)
