"""What the streams group coordinator asks of the rest of the broker, as protocols: the
classic side (``ClassicGroupsLog``: the ``GroupMetadataManager``, which places groups,
knows the classic groups of an id, keeps the offsets and owns the one write path to
``__consumer_offsets``), the KIP-848 side (``ConsumerGroupIds``: whether an id is a
consumer group's) and the topics image (``broker/group/consumer/coordinator_ports.py``'s
``TopicsImage``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.group.group_metadata import GroupMetadata
from broker.server.purgatories import ParkedRequest

KeyValue = tuple[bytes, bytes | None]


class ClassicGroupsLog(Protocol):
    def get_group(self, group_id: str) -> GroupMetadata | None: ...

    def check_coordinator(self, group_id: str) -> ErrorCode: ...

    def partition_for(self, group_id: str) -> int: ...

    def append_coordinator_records(
        self,
        group_id: str,
        records: list[KeyValue],
        on_done: Callable[[ErrorCode], None] | None,
        parked_request: ParkedRequest | None = None,
    ) -> None: ...


class ConsumerGroupIds(Protocol):
    def is_consumer_group(self, group_id: str) -> bool: ...
