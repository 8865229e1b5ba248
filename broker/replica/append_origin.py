"""Who is appending to a partition's log (Kafka's AppendOrigin).

- ``CLIENT``: a producer's Produce request. Control batches (transaction markers) are
  refused (INVALID_RECORD, as Kafka's LogValidator), sequences are checked.
- ``COORDINATOR``: the broker's own coordinators — the transaction coordinator writing
  COMMIT/ABORT markers (WriteTxnMarkers), the group coordinator writing
  ``__consumer_offsets``. Control batches are accepted.
- ``REPLICATION``: a follower storing its leader's batches as they are.
"""

from __future__ import annotations

from enum import Enum


class AppendOrigin(Enum):
    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"
