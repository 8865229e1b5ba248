"""A DeleteRecords caller: an admin that now and then deletes records of one partition of
``sim-events`` below what every group reading it has committed (less a margin), as a
retention job would. One partition only: the invariants that judge the final log (no
duplicate from the idempotent producer, the transform's exactly once) keep the others
whole.

Each delete goes to the History before it is sent (`events.Delete`): records below its
offset may be gone whether or not the answer arrives, so the checkers do not count them
as lost. The committed offsets are asked of the coordinators (OffsetFetch, stable
offsets only) rather than taken from the history: what an operator's tool would see.
"""

from __future__ import annotations

import asyncio
import random

from kio.schema.errors import ErrorCode

from protocol.builders import request_builder
from simulation.clients.raw import RawCluster, RawError
from simulation.clients.tv2 import TxnFailed, committed_positions
from simulation.events import Delete
from simulation.history import History

DELETE_RECORDS = 21
#: Records kept below the lowest committed offset (a consumer rewinding a little finds them).
MARGIN = 5


async def delete_records_now_and_then(
    bootstrap: str,
    stop_at_s: float,
    history: History,
    rng: random.Random,
    topic: str,
    groups: tuple[str, ...],
    every_s: float = 60.0,
    partition: int = 0,
) -> None:
    cluster = RawCluster(bootstrap, "sim-deleter")
    loop = asyncio.get_running_loop()
    done: dict[int, int] = {}
    try:
        # never asleep past the stop: a run's virtual end waits for every client
        await asyncio.sleep(min(rng.uniform(0.5, 1.5) * every_s, stop_at_s - loop.time()))
        while loop.time() < stop_at_s:
            try:
                await _delete_round(cluster, history, topic, partition, groups, done)
            except (RawError, TxnFailed) as exc:
                history.client_errors[f"deleter {type(exc).__name__}"] += 1
            pause = rng.uniform(0.5, 1.5) * every_s
            await asyncio.sleep(max(0.0, min(pause, stop_at_s - loop.time())))
    finally:
        await cluster.close()


async def _delete_round(
    cluster: RawCluster, history: History, topic: str, partition: int,
    groups: tuple[str, ...], done: dict[int, int],
) -> None:  # fmt: skip
    committed = [await committed_positions(cluster, group) for group in groups]
    leader = (await cluster.leaders(topic)).get(partition)
    loop = asyncio.get_running_loop()
    b = request_builder(DELETE_RECORDS, 2)
    offsets = [c.get((topic, partition)) for c in committed]
    if leader is None or any(o is None for o in offsets):
        return
    below = min(o for o in offsets if o is not None) - MARGIN
    if below <= done.get(partition, 0):
        return
    delete = Delete(topic, partition, below, loop.time(), None)
    history.events.deletes.append(delete)
    answer = await cluster.call(
        leader, DELETE_RECORDS, 2, "DeleteRecordsRequest",
        topics=(b.DeleteRecordsTopic(name=topic, partitions=(
            b.DeleteRecordsPartition(partition_index=partition, offset=below),)),),
        timeout=10_000,
    )  # fmt: skip
    found = answer.topics[0].partitions[0]
    if found.error_code is ErrorCode.none:
        delete.low_watermark = int(found.low_watermark)
        done[partition] = below
    else:
        history.client_errors[f"deleter {found.error_code.name}"] += 1
