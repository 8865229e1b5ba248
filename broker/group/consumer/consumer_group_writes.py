"""Writing a consumer group's changes to ``__consumer_offsets``, as Kafka 4 does.

Every change of a group (a heartbeat's, a leave's, a fencing by a timeout, a deletion) is
written to the group's ``__consumer_offsets`` partition as Kafka's records
(``consumer_group_records.py``: group epoch, subscription metadata, member subscriptions,
target assignment, current member assignments, tombstones), acks=all through the classic
groups' path (``append_consumer_group_records``, the manager's ``GroupLog``), in the
order the changes happen. The caller answers a heartbeat from ``on_done`` (the handler
waits in the Produce purgatory meanwhile), as Kafka answers after its write.

Where this differs from Kafka: the records are the diff of the group before and after
the change (``records_for_changes``); Kafka writes records and applies them by replaying.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.group.append_errors import coordinator_write_error
from broker.group.consumer.consumer_group import ConsumerGroup
from broker.group.consumer.consumer_group_records import (
    ConsumerGroupRecord,
    ConsumerGroupView,
    records_for_changes,
)
from broker.server.purgatories import ParkedRequest

log = logging.getLogger("broker.group.consumer")


class ConsumerGroupRecordsLog(Protocol):
    """The one write path to ``__consumer_offsets`` (the ``GroupMetadataManager``)."""

    def append_consumer_group_records(
        self,
        group_id: str,
        records: list[ConsumerGroupRecord],
        on_done: Callable[[ErrorCode], None] | None,
        parked_request: ParkedRequest | None = None,
    ) -> None: ...


def write_group_changes(
    records_log: ConsumerGroupRecordsLog,
    group_id: str,
    before: ConsumerGroupView,
    after: ConsumerGroup | None,
    on_done: Callable[[ErrorCode], None] | None = None,
    parked_request: ParkedRequest | None = None,
) -> None:
    """Write what changed in the group since ``before`` (its records, Kafka's order),
    acks=all; ``on_done`` gets the write's error mapped for the client (NONE at once when
    nothing changed). Writes leave in call order."""
    records = records_for_changes(group_id, before, ConsumerGroupView.of(after))
    if not records:
        if on_done is not None:
            on_done(ErrorCode.none)
        return

    def written(append_error: ErrorCode) -> None:
        if append_error is not ErrorCode.none:
            log.warning(
                "[GroupId %s] Writing %d records failed: %s",
                group_id,
                len(records),
                append_error.name,
            )
        if on_done is not None:
            on_done(coordinator_write_error(append_error))

    records_log.append_consumer_group_records(group_id, records, written, parked_request)
