"""Which leading part of a log retention may delete: Kafka's three rules.

Both logs call `deletable_prefix` with their deletion units in offset order: segments
for DiskLog, batches for MemoryLog (which has no segments, so it deletes at batch
granularity). Kafka applies, in order:

1. retention.ms: a unit whose largest timestamp is older than now - retention.ms
   (only with cleanup.policy containing "delete");
2. retention.bytes: while deleting the unit still leaves at least retention.bytes
   (only with "delete");
3. log start offset: a unit wholly below the log start offset (after DeleteRecords).

Each rule deletes a prefix and stops at the first unit it keeps. No unit is deleted
unless all of its offsets are below the high watermark (when one is given: data a
follower may still need stays), and an empty last unit is never deleted. The caller
keeps the log end offset whatever is deleted (DiskLog rolls a fresh segment first when
everything goes).
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.log.log_config import LogConfig


def deletable_prefix(
    *,
    base_offsets: Sequence[int],
    sizes: Sequence[int],
    largest_timestamps: Sequence[int],
    log_end_offset: int,
    log_start_offset: int,
    high_watermark: int | None,
    config: LogConfig,
    now_ms: int,
) -> int:
    """How many leading units to delete."""
    n = len(base_offsets)

    def upper_bound(i: int) -> int:
        return base_offsets[i + 1] if i + 1 < n else log_end_offset

    def may_delete(i: int) -> bool:
        if high_watermark is not None and upper_bound(i) > high_watermark:
            return False
        return not (i == n - 1 and sizes[i] == 0)

    count = 0
    if config.deletes and config.retention_ms >= 0:
        while (
            count < n
            and may_delete(count)
            and now_ms - largest_timestamps[count] > config.retention_ms
        ):
            count += 1
    if config.deletes and config.retention_bytes >= 0:
        excess = sum(sizes[count:]) - config.retention_bytes
        while count < n and may_delete(count) and excess - sizes[count] >= 0:
            excess -= sizes[count]
            count += 1
    start_rule = 0
    while (
        start_rule < n
        and start_rule + 1 < n
        and base_offsets[start_rule + 1] <= log_start_offset
        and may_delete(start_rule)
    ):
        start_rule += 1
    return max(count, start_rule)
