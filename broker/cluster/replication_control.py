"""Partition reassignments and admin leader elections: Kafka's ReplicationControlManager.

In KRaft the controller's ReplicationControlManager answers AlterPartitionReassignments,
ListPartitionReassignments and ElectLeaders, and finishes a reassignment when the
leader's AlterPartition brings every target replica into the ISR. Here the controller is
one in-process object over the shared ``ClusterMetadata``, and these are functions over
it (the controller calls ``maybe_complete_reassignment`` on every ISR change it grants).

A reassignment, as Kafka models it (``PartitionReassignmentReplicas``): the partition's
replicas become the target followed by the current replicas not in it, with
``adding_replicas`` (target minus current) and ``removing_replicas`` (current minus
target). Every broker sees the change through its metadata subscription: a new replica
creates its log and fetches from the leader as a follower, and the leader tracks it
like any follower. When the ISR holds every target replica, the reassignment completes
in the same metadata change: replicas and ISR lose the removing replicas; a leader that
was removed hands over to the first target replica in the ISR (Kafka's preferred order);
the leader epoch is bumped when replicas were removed (KRaft fences the old replica set
that way). A target all already in the ISR (a shrink, a reorder) completes at once, and
a target equal to the current replicas changes nothing. Cancelling (null replicas)
reverts to the replicas without the adding ones (Kafka's ``PartitionReassignmentRevert``),
refused with INVALID_REPLICA_ASSIGNMENT when that would need an unclean election.

Elections (ElectLeaders): PREFERRED makes the first replica leader when it is alive and
in the ISR (ELECTION_NOT_NEEDED when it already leads, PREFERRED_LEADER_NOT_AVAILABLE
otherwise); UNCLEAN gives a leaderless partition a leader -- an alive ISR member if any (with
KIP-966, an alive ELR member when the ISR is empty, which makes the ISR itself), else any
alive replica, whose ISR is then itself (ELECTION_NOT_NEEDED when the partition
has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is alive). A new leader
bumps the leader epoch.

Differences from Kafka: the reassignment's data movement is the follower fetch itself
(no replication throttles, no log-dir placement); the completion is checked on ISR
changes only (a removing replica that dies does not matter, as in Kafka).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import ClusterMetadata, MetadataError, PartitionState

log = logging.getLogger("broker.controller")  # the name its log lines have always carried

NO_LEADER = -1
PREFERRED, UNCLEAN = 0, 1


def _partition(cluster: ClusterMetadata, topic: str, partition: int) -> PartitionState:
    info = cluster.topics.get(topic)
    if info is None:
        raise MetadataError(
            ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {topic}."
        )
    if not 0 <= partition < len(info.partitions):
        raise MetadataError(
            ErrorCode.unknown_topic_or_partition,
            f"Unable to find partition {topic}:{partition}.",
        )
    return info.partitions[partition]


def is_reassigning(state: PartitionState) -> bool:
    return bool(state.adding_replicas or state.removing_replicas)


def _alive(cluster: ClusterMetadata) -> set[int]:
    return {b.broker_id for b in cluster.alive_brokers()}


# -- AlterPartitionReassignments -------------------------------------------------------------


def alter_partition_reassignment(
    cluster: ClusterMetadata,
    topic: str,
    partition: int,
    target: list[int] | None,
    *,
    allow_replication_factor_change: bool = True,
    unclean_allowed: bool = False,
) -> None:
    """Start, change or (``target`` None) cancel a partition's reassignment.

    Raises ``MetadataError`` with Kafka's error; announces the change when there is one.
    """
    state = _partition(cluster, topic, partition)
    if target is None:
        _cancel(cluster, topic, state, unclean_allowed)
        return
    _validate_assignment(cluster, target)
    if not allow_replication_factor_change:
        current_size = len(state.replicas) - len(state.adding_replicas)
        if current_size != len(target):
            raise MetadataError(
                ErrorCode.invalid_replication_factor,
                f"The replication factor is changed from {current_size} to {len(target)}",
            )
    current = list(state.replicas)
    # A replica still being added by an earlier reassignment stays "adding" when the
    # new target keeps it (as Kafka's PartitionChangeBuilder keeps the adding list).
    original = [r for r in current if r not in state.adding_replicas]
    replicas = list(target) + [r for r in current if r not in target]
    adding = [r for r in target if r not in original]
    removing = [r for r in current if r not in target]
    if (replicas, adding, removing) == (
        current,
        state.adding_replicas,
        state.removing_replicas,
    ):
        return  # the reassignment (or the assignment) asked for is the one in place
    state.replicas = replicas
    state.adding_replicas = adding
    state.removing_replicas = removing
    state.partition_epoch += 1
    log.info(
        "Reassigning %s-%d to %s (adding %s, removing %s)",
        topic,
        partition,
        target,
        adding,
        removing,
    )
    maybe_complete_reassignment(cluster, topic, state.partition)
    cluster.partition_changed(topic)


def _validate_assignment(cluster: ClusterMetadata, target: list[int]) -> None:
    """Kafka's ``validateManualPartitionAssignment``."""
    if not target:
        raise MetadataError(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    previous: int | None = None
    for broker_id in sorted(target):
        if broker_id not in cluster.brokers:
            raise MetadataError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered.",
            )
        if broker_id == previous:
            raise MetadataError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id


def _cancel(
    cluster: ClusterMetadata, topic: str, state: PartitionState, unclean_allowed: bool
) -> None:
    if not is_reassigning(state):
        raise MetadataError(
            ErrorCode.no_reassignment_in_progress,
            "No partition reassignment is in progress for this topic partition.",
        )
    adding = set(state.adding_replicas)
    replicas = [r for r in state.replicas if r not in adding]
    isr = [r for r in state.isr if r not in adding]
    if not isr:
        if not unclean_allowed:
            raise MetadataError(
                ErrorCode.invalid_replica_assignment,
                f"Unable to revert partition assignment for {topic}:{state.partition} "
                "because it would require an unclean leader election.",
            )
        isr = replicas[:1]
    state.replicas = replicas
    state.isr = isr
    state.adding_replicas = []
    state.removing_replicas = []
    if state.leader not in isr:
        alive = _alive(cluster)
        candidates = [r for r in replicas if r in isr and r in alive]
        state.leader = candidates[0] if candidates else NO_LEADER
        state.leader_epoch += 1
    state.partition_epoch += 1
    log.info("Cancelled the reassignment of %s-%d: replicas %s", topic, state.partition, replicas)
    cluster.partition_changed(topic)


def maybe_complete_reassignment(cluster: ClusterMetadata, topic: str, partition: int) -> bool:
    """Finish the partition's reassignment if its ISR now holds every target replica
    (Kafka's ``maybeCompleteReassignment``). Changes the state without announcing it:
    the caller announces the change it is part of. True when it completed."""
    state = cluster.topics[topic].partitions[partition]
    if not is_reassigning(state):
        return False
    removing = set(state.removing_replicas)
    target = [r for r in state.replicas if r not in removing]
    if not all(r in state.isr for r in target):
        return False
    removed = bool(removing)
    state.replicas = target
    state.isr = [r for r in state.isr if r not in removing]
    state.adding_replicas = []
    state.removing_replicas = []
    if state.leader not in target:
        alive = _alive(cluster)
        candidates = [r for r in target if r in state.isr and r in alive]
        state.leader = candidates[0] if candidates else NO_LEADER
        state.leader_epoch += 1
    elif removed:
        state.leader_epoch += 1  # KRaft bumps the epoch when replicas are removed
    state.partition_epoch += 1
    log.info(
        "Completed the reassignment of %s-%d: replicas %s, leader %d",
        topic,
        partition,
        target,
        state.leader,
    )
    return True


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def ongoing_reassignments(
    cluster: ClusterMetadata, wanted: dict[str, list[int]] | None = None
) -> Iterator[OngoingReassignment]:
    """ListPartitionReassignments: the reassigning partitions, by topic name then
    partition; ``wanted`` limits them (unknown topics and partitions are skipped)."""
    for name in sorted(cluster.topics if wanted is None else wanted):
        info = cluster.topics.get(name)
        if info is None:
            continue
        indexes = (
            range(len(info.partitions))
            if wanted is None
            else sorted(set(p for p in wanted[name] if 0 <= p < len(info.partitions)))
        )
        for index in indexes:
            state = info.partitions[index]
            if is_reassigning(state):
                yield OngoingReassignment(
                    name,
                    index,
                    tuple(state.replicas),
                    tuple(state.adding_replicas),
                    tuple(state.removing_replicas),
                )


# -- ElectLeaders ----------------------------------------------------------------------------


def elect_leader(
    cluster: ClusterMetadata, topic: str, partition: int, election_type: int
) -> tuple[ErrorCode, str | None]:
    """One partition's admin election (Kafka's ``electLeader``): (error, message).

    Changes the state without announcing it; the caller announces each topic once.
    """
    info = cluster.topics.get(topic)
    if info is None:
        return ErrorCode.unknown_topic_or_partition, f"No such topic as {topic}"
    if not 0 <= partition < len(info.partitions):
        return ErrorCode.unknown_topic_or_partition, f"No such partition as {topic}-{partition}"
    state = info.partitions[partition]
    alive = _alive(cluster)
    if election_type == PREFERRED:
        preferred = state.replicas[0]
        if state.leader == preferred:
            return ErrorCode.election_not_needed, None
        if preferred not in _electable(state) or preferred not in alive:
            return ErrorCode.preferred_leader_not_available, None
        _set_leader(state, preferred)
        return ErrorCode.none, None
    if state.leader != NO_LEADER and state.leader in alive:
        return ErrorCode.election_not_needed, None
    clean = [r for r in state.replicas if r in _electable(state) and r in alive]
    if clean:
        _set_leader(state, clean[0])
        return ErrorCode.none, None
    unclean = [r for r in state.replicas if r in alive]
    if not unclean:
        return ErrorCode.eligible_leaders_not_available, None
    _set_leader(state, unclean[0])
    state.isr = [unclean[0]]
    state.elr = []
    state.last_known_elr = []
    log.warning(
        "Unclean election of %s-%d: broker %d leads, records only its ISR predecessors "
        "had are lost",
        topic,
        partition,
        unclean[0],
    )
    return ErrorCode.none, None


def _electable(state: PartitionState) -> list[int]:
    """Clean leaders: the ISR, or (KIP-966) the ELR when the ISR is empty."""
    return state.isr if state.isr else state.elr


def _set_leader(state: PartitionState, leader: int) -> None:
    """A new leader; one taken from the ELR makes the ISR itself (PartitionChangeBuilder)."""
    if leader in state.elr:
        state.isr = [leader]
        state.elr = [r for r in state.elr if r != leader]
    if state.last_known_elr:
        state.last_known_elr = []
    state.leader = leader
    state.leader_epoch += 1
    state.partition_epoch += 1
