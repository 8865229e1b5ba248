"""One partition's next leader, ISR and eligible leader replicas: Kafka's PartitionChangeBuilder.

Every change the controller makes to a partition (a broker fenced or back, an
AlterPartition, an admin election) is computed here from the partition's current state
and a target ISR, then written by the caller (``ClusterMetadata.change_partition``).

KIP-966, eligible leader replicas (ELR), when the ``eligible.leader.replicas.version``
feature is at 1 (Kafka 4.1+ finalizes it on a new cluster):

- The broker's high watermark does not advance while the ISR is smaller than the
  effective ``min.insync.replicas`` ("strict min ISR", ``broker/replica/partition.py``).
  So a replica that leaves the ISR while the ISR is below min ISR has every committed
  record: it goes into the ELR instead of being forgotten.
- **Populate** (``maybePopulateTargetElr``): ISR at or above min ISR -> ELR empty. Below:
  ELR = (ELR + current ISR) - target ISR, less replicas that shut down uncleanly.
- **Elect** (``electAnyLeader``): keep the leader if it is still valid; else the first
  replica, in replica order, in the target ISR -- or, the target ISR being empty, in the
  ELR -- that is an acceptable leader (alive). A leader taken from the ELR makes the ISR
  itself and leaves the ELR (a clean election). Then, ISR and ELR both empty, the last
  known leader (Kafka's "balanced recovery", the one-member last-known ELR); then, with
  ``unclean.leader.election.enable``, any acceptable replica (unclean: the ISR becomes
  the new leader alone and the ELR is cleared).
- **Last known ELR**: as Kafka 4.2 keeps it (``useLastKnownLeaderInBalancedRecovery``), it
  holds the last leader, written when the ISR first becomes empty and cleared when the
  partition has a leader again.
- With ELR the ISR may become empty (the leader was the last member and is gone); without
  it the last member stays in the ISR of a leaderless partition, as KRaft did before.

A PREFERRED election tries the first replica, then the current leader, then the others.

Differences from Kafka: no unclean-shutdown detection (a restarted broker here keeps its
log, as after a clean shutdown, so it stays in the ELR); no leader recovery state, no
directories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from broker.cluster.cluster_metadata import PartitionState

NO_LEADER = -1

#: The level a new Kafka 4.1+ cluster finalizes; a cluster reads the finalized level from
#: its feature table (``broker/cluster/features.py``), this is the default of a bare
#: ``Controller`` (tests).
DEFAULT_ELIGIBLE_LEADER_REPLICAS_LEVEL = 1


class Election(Enum):
    PREFERRED = "preferred"
    ONLINE = "online"
    UNCLEAN = "unclean"


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """What to write; ``None`` fields do not change (Kafka's PartitionChangeRecord)."""

    leader: int | None = None
    isr: list[int] | None = None
    elr: list[int] | None = None
    last_known_elr: list[int] | None = None
    unclean: bool = False

    @property
    def is_no_op(self) -> bool:
        return (
            self.leader is None
            and self.isr is None
            and self.elr is None
            and self.last_known_elr is None
        )


def build_change(
    state: PartitionState,
    target_isr: Sequence[int],
    is_acceptable_leader: Callable[[int], bool],
    *,
    min_isr: int,
    elr_enabled: bool,
    election: Election = Election.ONLINE,
    excluded: Sequence[int] = (),
) -> PartitionChange:
    """The change of ``state`` to ``target_isr`` with a leader elected as Kafka does.

    ``excluded`` replicas may stay in no ELR (Kafka's uncleanShutdownReplicas; here the
    broker being unregistered)."""
    isr = list(target_isr)
    elr = [r for r in state.elr if r not in excluded]
    if elr_enabled:
        if len(isr) >= min_isr:
            elr = []
        else:
            candidates = [*elr, *(r for r in state.isr if r not in elr)]
            elr = [r for r in candidates if r not in isr and r not in excluded]

    def valid(replica: int) -> bool:
        return (replica in isr or (not isr and replica in elr)) and is_acceptable_leader(replica)

    leader, unclean = _elect(state, isr, elr, valid, is_acceptable_leader, election, elr_enabled)
    new_isr: list[int] | None = None
    if leader != state.leader:
        if leader in elr:
            isr = [leader]
            elr = [r for r in elr if r != leader]
        if unclean:
            new_isr = [leader]
    if unclean or not elr_enabled:
        elr = []
    if new_isr is None and (isr or elr_enabled) and isr != state.isr:
        new_isr = isr
    leader_change = leader if leader != state.leader else None
    last_known = _last_known_elr(state, leader_change, new_isr, elr_enabled)
    return PartitionChange(
        leader=leader_change,
        isr=new_isr,
        elr=elr if elr != state.elr else None,
        last_known_elr=last_known,
        unclean=unclean and leader_change is not None,
    )


def _elect(
    state: PartitionState,
    isr: list[int],
    elr: list[int],
    valid: Callable[[int], bool],
    acceptable: Callable[[int], bool],
    election: Election,
    elr_enabled: bool,
) -> tuple[int, bool]:
    """(leader, unclean): Kafka's electPreferredLeader / electAnyLeader."""
    if election is Election.PREFERRED and state.replicas and valid(state.replicas[0]):
        return state.replicas[0], False
    if state.leader != NO_LEADER and valid(state.leader):
        return state.leader, False
    for replica in state.replicas:
        if valid(replica):
            return replica, False
    if elr_enabled and not isr and not elr and len(state.last_known_elr) == 1:
        # Balanced recovery: the last known leader once it is back (as the ELR docs say;
        # Kafka's code does not look at liveness here, which would elect a dead broker).
        last = state.last_known_elr[0]
        if acceptable(last):
            return last, True
    if election is Election.UNCLEAN:
        for replica in state.replicas:
            if acceptable(replica):
                return replica, True
    return NO_LEADER, False


def _last_known_elr(
    state: PartitionState,
    leader_change: int | None,
    new_isr: list[int] | None,
    elr_enabled: bool,
) -> list[int] | None:
    """Kafka's maybeUpdateLastKnownLeader: the last leader, kept while leaderless."""
    if not elr_enabled:
        return [] if state.last_known_elr else None
    if new_isr is not None and not new_isr and state.last_known_elr != [state.leader]:
        if state.leader != NO_LEADER:
            return [state.leader]
        return None
    has_leader = (leader_change is not None and leader_change >= 0) or (
        leader_change is None and state.leader != NO_LEADER
    )
    if has_leader and state.last_known_elr:
        return []
    return None
