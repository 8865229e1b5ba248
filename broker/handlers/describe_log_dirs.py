"""DescribeLogDirs (key 35): this broker's log directories and the partitions in each.

As Kafka's ``ReplicaManager.describeLogDirs``: one result per log directory (``log.dirs``;
see ``broker/log/log_manager.py``), listing the partitions this broker holds a log for
there (all of them when ``topics`` is null, else the ones named that it holds), each
with its size in bytes, offset lag max(high watermark - log end, 0) -- 0, since no
replica is ever half way between directories (AlterReplicaLogDirs moves it at once) --
and ``is_future_key`` false. v4+ adds the directory's total and usable
bytes (the file system's, as Kafka reports them; -1, Kafka's "unknown", where there is
no file system).

A broker's log directories are ``<dir>/broker-<id>`` for each directory of
``log.dirs`` (the data directory first: ``--data-dir``, else the first of them).
Differences from Kafka: a broker without a data directory keeps its logs in memory and
reports the pseudo directory ``memory://broker-<id>``;
throttle time 0.

With an authorizer, DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from broker.security.authorizer.authorization import AclOperation, cluster_denied
from broker.server.context import RequestContext
from protocol.builders import response_builder

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 4

UNKNOWN_VOLUME_BYTES = -1


def handle(ctx: RequestContext, request: Any) -> Any:
    if cluster_denied(ctx, AclOperation.DESCRIBE):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    b = response_builder(API_KEY, ctx.api_version)
    manager = ctx.services.replica_manager
    logs = manager.log_manager
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, int(p)) for t in request.topics for p in t.partitions}
    # log dir (None: the memory pseudo dir) -> topic -> its partitions there
    dirs: list[Path | None] = [*logs.log_dirs] or [None]
    by_dir: dict[Path | None, dict[str, list[Any]]] = {d: {} for d in dirs}
    for (topic, index), log in sorted(logs.logs.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        partition = manager.partitions.get((topic, index))
        lag = 0
        if partition is not None:
            lag = max(partition.high_watermark - log.log_end_offset, 0)
        log_dir = logs.log_dir_of(topic, index)
        by_dir.setdefault(log_dir, {}).setdefault(topic, []).append(
            b.DescribeLogDirsPartition(
                partition_index=index,
                partition_size=log.size_bytes,
                offset_lag=lag,
                is_future_key=False,
            )
        )
    results = []
    for log_dir, by_topic in by_dir.items():
        total = usable = UNKNOWN_VOLUME_BYTES
        if log_dir is not None:
            try:
                usage = shutil.disk_usage(log_dir)
                total, usable = usage.total, usage.free
            except OSError:
                pass
        results.append(
            b.DescribeLogDirsResult(
                error_code=ErrorCode.none,
                log_dir=_log_dir_name(ctx, log_dir),
                topics=tuple(
                    b.DescribeLogDirsTopic(name=name, partitions=tuple(partitions))
                    for name, partitions in by_topic.items()
                ),
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return b.DescribeLogDirsResponse(
        throttle_time=0, error_code=ErrorCode.none, results=tuple(results)
    )


def _log_dir_name(ctx: RequestContext, log_dir: Path | None) -> str:
    if log_dir is None:
        return f"memory://broker-{ctx.services.broker_id}"
    return str(log_dir.resolve())


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` at the top (v3+) and on one log directory without a name or partitions
    (v1-v2 have no top-level error; the request was not handled, so no directory was
    looked at)."""
    b = response_builder(API_KEY, ctx.api_version)
    result = b.DescribeLogDirsResult(
        error_code=error,
        log_dir="",
        topics=(),
        total_bytes=UNKNOWN_VOLUME_BYTES,
        usable_bytes=UNKNOWN_VOLUME_BYTES,
    )
    return b.DescribeLogDirsResponse(throttle_time=0, error_code=error, results=(result,))
