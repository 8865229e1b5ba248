"""What the consumer group coordinator asks of the rest of the broker, as protocols:
the classic side (``ClassicGroups``: the ``GroupMetadataManager``) and the topics image
(``TopicsImage``: the ``ClusterMetadata``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import TopicInfo
from broker.group.consumer.consumer_group_records import ConsumerGroupRecord
from broker.group.consumer.group_conversion import ClassicMemberSpec
from broker.group.group_metadata import GroupMetadata
from broker.server.purgatories import ParkedRequest


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


class ClassicGroupMigration(Protocol):
    """What an online migration asks of the classic coordinator (``GroupCoordinator``,
    ``group/group_migration.py``): take a classic group's members over (upgrade), give
    a consumer group's classic members back (downgrade)."""

    @property
    def classic_group_max_size(self) -> int: ...

    def hand_over_to_consumer_group(self, group: GroupMetadata) -> None: ...

    def take_back_from_consumer_group(
        self, group_id: str, generation_id: int, members: Sequence[ClassicMemberSpec]
    ) -> None: ...


class TopicsImage(Protocol):
    """The topics the assignor may hand out (the ``ClusterMetadata``)."""

    @property
    def topics(self) -> Mapping[str, TopicInfo]: ...

    @property
    def version(self) -> int: ...
