"""One member of a classic group: identity, protocols, assignment and liveness flags.

Mirrors Kafka's ``MemberMetadata``. A member is *awaiting join* while its JoinGroup is
parked (a callback is stored) and *awaiting sync* while its SyncGroup is parked; both
count as proof of life, because a client whose request is parked cannot heartbeat on
that connection. ``is_new`` marks a member added by the current rebalance: it cannot
heartbeat yet either, so it gets the long new-member join timeout instead.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from broker.group.response_callback import ResponseCallback
from broker.group.results import JoinGroupResult, MemberSummary, SyncGroupResult

Protocols = list[tuple[str, bytes]]


@dataclass(eq=False)
class MemberMetadata:
    """A member's state inside :class:`~broker.group.group_metadata.GroupMetadata`."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: Protocols
    assignment: bytes = b""
    awaiting_join_callback: ResponseCallback[JoinGroupResult] | None = field(
        default=None, repr=False
    )
    awaiting_sync_callback: ResponseCallback[SyncGroupResult] | None = field(
        default=None, repr=False
    )
    is_new: bool = False
    # Set when a heartbeat (or anything proving liveness) arrives, so the member's
    # DelayedHeartbeat completes; cleared again when the next one is scheduled.
    heartbeat_satisfied: bool = False

    @property
    def is_static_member(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync_callback is not None

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """Kafka's rule: new members must heartbeat (join) explicitly; others are alive
        while parked in JoinGroup/SyncGroup, else they need a fresh heartbeat."""
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol: str) -> bytes:
        """This member's metadata for ``protocol`` (the assignor input)."""
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise ValueError(f"Member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols, same order, same metadata bytes: a rejoin that changes nothing."""
        if len(protocols) != len(self.supported_protocols):
            return False
        return all(
            n1 == n2 and bytes(m1) == bytes(m2)
            for (n1, m1), (n2, m2) in zip(protocols, self.supported_protocols, strict=True)
        )

    def vote(self, candidates: Collection[str]) -> str:
        """The member's most preferred protocol among ``candidates`` (its list is ordered
        by preference)."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"Member {self.member_id} does not support any of {sorted(candidates)}")

    def summary(self, protocol: str | None) -> MemberSummary:
        """DescribeGroups view; metadata/assignment only when a protocol is chosen."""
        if protocol is None:
            return MemberSummary(
                self.member_id, self.group_instance_id, self.client_id, self.client_host, b"", b""
            )
        return MemberSummary(
            self.member_id,
            self.group_instance_id,
            self.client_id,
            self.client_host,
            self.metadata(protocol),
            self.assignment,
        )
