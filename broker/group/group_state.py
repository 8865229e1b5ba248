"""The classic group protocol's five states and the table of legal moves between them.

Kafka keeps, for each state, the set of states a group may come *from*
(``GroupState.validPreviousStates`` in GroupMetadata.scala). A move that is not in the
table is a coordinator bug, never a client error, so it raises instead of answering.
Keeping the table as data (not as ``if`` chains) lets a test check every pair.
"""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    """Kafka's group states; the value is the name DescribeGroups/ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    # A rebalance starts from any live state: a join or leave in Stable, a metadata change
    # while awaiting the leader's assignment, or the first member joining an empty group.
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    # The join phase finished with members: wait for the leader's SyncGroup.
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    # The leader's assignment arrived.
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    # The join phase finished with nobody left.
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    # Deletion, expiry of the last offsets, or unloading: from anywhere, idempotently.
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


class IllegalStateTransition(RuntimeError):
    """A transition the state table forbids: a bug in the coordinator."""


def is_valid_transition(current: GroupState, target: GroupState) -> bool:
    """True when ``target`` lists ``current`` among its valid previous states."""
    return current in VALID_PREVIOUS_STATES[target]


def assert_valid_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    """Raise :class:`IllegalStateTransition` unless ``current -> target`` is in the table."""
    if not is_valid_transition(current, target):
        allowed = ",".join(sorted(s.value for s in VALID_PREVIOUS_STATES[target]))
        raise IllegalStateTransition(
            f"Group {group_id} should be in the {allowed} states before moving to "
            f"{target.value} state. Instead it is in {current.value} state"
        )


def parse_state(name: str) -> GroupState | None:
    """Case-insensitive lookup by Kafka's state name (ListGroups' states filter)."""
    lowered = name.lower()
    for state in GroupState:
        if state.value.lower() == lowered:
            return state
    return None
