"""What a JoinGroup asks of the coordinator, as one frozen value.

Kafka's ``handleJoinGroup`` takes the request's fields one by one (group id, member id,
group instance id, ``requireKnownMemberId``, client id and host, both timeouts, protocol
type, protocols, reason) and hands them down through every join path. Here the handler
builds one :class:`JoinGroupParams` from the request, whatever its version, and the
coordinator passes that along instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.group.results import UNKNOWN_MEMBER_ID


@dataclass(frozen=True, slots=True)
class JoinGroupParams:
    """The fields of a JoinGroup request (every version) plus what its context adds.

    ``require_known_member_id`` is True from JoinGroup v4 (KIP-394) and
    ``support_skipping_assignment`` from v9. JoinGroup v0 has no rebalance timeout: the
    handler passes the session timeout, as Kafka does. ``protocols`` is in the member's
    order of preference: ``(name, metadata)``.
    """

    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = False
    support_skipping_assignment: bool = False
    reason: str | None = None

    def __post_init__(self) -> None:
        # Kafka hands the metadata to the assignor as bytes; requests may carry views.
        object.__setattr__(
            self, "protocols", tuple((name, bytes(meta)) for name, meta in self.protocols)
        )

    @property
    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    @property
    def join_reason(self) -> str:
        return self.reason or "not provided"
