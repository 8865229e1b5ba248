"""What the consumer group coordinator asks of the rest of the broker, as protocols:
the classic side (``ClassicGroups``: the ``GroupMetadataManager``) and the topics image
(``TopicsImage``: the ``ClusterMetadata``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.cluster_metadata import TopicInfo
from broker.group.consumer.consumer_group_records import ConsumerGroupRecord
from broker.group.group_metadata import GroupMetadata
from broker.purgatories import ParkedRequest


class ClassicGroups(Protocol):
    """What this coordinator asks of the classic side (the ``GroupMetadataManager``):
    the classic groups, placement, and the one write path to ``__consumer_offsets``."""

    def get_group(self, group_id: str) -> GroupMetadata | None: ...

    def check_coordinator(self, group_id: str) -> ErrorCode: ...

    def partition_for(self, group_id: str) -> int: ...

    def append_consumer_group_records(
        self,
        group_id: str,
        records: list[ConsumerGroupRecord],
        on_done: Callable[[ErrorCode], None] | None,
        parked_request: ParkedRequest | None = None,
    ) -> None: ...


class TopicsImage(Protocol):
    """The topics the assignor may hand out (the ``ClusterMetadata``)."""

    @property
    def topics(self) -> Mapping[str, TopicInfo]: ...

    @property
    def version(self) -> int: ...
