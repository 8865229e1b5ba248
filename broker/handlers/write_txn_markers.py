"""WriteTxnMarkers (key 27): the transaction coordinator's COMMIT/ABORT markers.

Sent broker to broker: the coordinator of a transaction (``broker/txn/``, its marker
channel) sends each partition leader one marker per transaction that wrote there. As
Kafka's ``handleWriteTxnMarkersRequest``: every marker is appended to its partitions as
a control batch (``protocol.control_batch.build_control_batch``) written as the
coordinator (``AppendOrigin.COORDINATOR``), acks=all with Kafka's request timeout — the
request waits in the Produce purgatory until the in-sync replicas have every marker —
and answered once all are done, with an error per partition (the log's: NOT_LEADER_OR_
FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT,
INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, ...). For ``__consumer_offsets``
partitions written successfully, the group coordinator then commits or drops the
producer's pending transactional offsets (Kafka's ``scheduleHandleTxnCompletion``).

With an authorizer, CLUSTER_ACTION on the cluster (an inter-broker API; else
CLUSTER_AUTHORIZATION_FAILED for every partition).

Version notes:
- v2 (KIP-1228, Kafka 4.2): each marker names its transaction's version; a marker of
  transactions v2 must carry an epoch above the producer's at the partition (EndTxn v5
  bumped it), else INVALID_PRODUCER_EPOCH for that partition (``producer_state.py``).
  v1 markers keep the old rule (an epoch not below the producer's).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.cluster.cluster_metadata import OFFSETS_TOPIC
from broker.group.group_txn import handle_txn_completion
from broker.handlers.group_common import answer_when_called
from broker.replica.append_origin import AppendOrigin
from broker.security.authorizer.authorization import AclOperation, authorize_cluster
from broker.server.context import RequestContext
from broker.txn.transaction_config import REQUEST_TIMEOUT_MS
from protocol.builders import response_builder
from protocol.control_batch import build_control_batch

if TYPE_CHECKING:
    from broker.replica.delayed_produce import ProduceStatuses

log = logging.getLogger("broker.txn")

API_KEY = 27
MIN_VERSION = 1
MAX_VERSION = 2

TopicPartition = tuple[str, int]
# Per marker (in request order): its producer id and an error per partition.
MarkerResults = list[tuple[int, dict[TopicPartition, ErrorCode]]]


def _partitions(marker: Any) -> list[TopicPartition]:
    return [(t.name, int(p)) for t in marker.topics for p in t.partition_indexes]


def topic_partitions(ctx: RequestContext, request: Any) -> list[tuple[str | None, int | None]]:
    return [tp for marker in request.markers for tp in _partitions(marker)]


def _response(ctx: RequestContext, results: MarkerResults) -> Any:
    b = response_builder(API_KEY, ctx.api_version)
    markers = []
    for producer_id, errors in results:
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), error in errors.items():
            by_topic.setdefault(topic, []).append(
                b.WritableTxnMarkerPartitionResult(partition_index=partition, error_code=error)
            )
        markers.append(
            b.WritableTxnMarkerResult(
                producer_id=producer_id,
                topics=tuple(
                    b.WritableTxnMarkerTopicResult(name=name, partitions=tuple(parts))
                    for name, parts in by_topic.items()
                ),
            )
        )
    return b.WriteTxnMarkersResponse(markers=tuple(markers))


def handle(ctx: RequestContext, request: Any) -> Any:
    markers = list(request.markers)
    if ctx.services.security.authorizer is not None and not authorize_cluster(
        ctx, AclOperation.CLUSTER_ACTION
    ):
        return error_response(ctx, request, ErrorCode.cluster_authorization_failed)
    if not markers:
        return _response(ctx, [])
    services = ctx.services
    replica_manager = services.replica_manager

    def start(callback: Callable[[MarkerResults], None]) -> None:
        results: MarkerResults = [(int(m.producer_id), {}) for m in markers]
        remaining = len(markers)

        def marker_done(index: int, errors: dict[TopicPartition, ErrorCode]) -> None:
            nonlocal remaining
            results[index][1].update(errors)
            remaining -= 1
            if remaining == 0:
                callback(results)

        for index, marker in enumerate(markers):
            partitions = _partitions(marker)
            if not partitions:
                marker_done(index, {})
                continue
            producer_id = int(marker.producer_id)
            commit = bool(marker.transaction_result)
            now = replica_manager.wall_clock_ms()
            entries = {
                tp: build_control_batch(
                    producer_id,
                    int(marker.producer_epoch),
                    int(marker.coordinator_epoch),
                    commit,
                    now,
                )
                for tp in partitions
            }
            replica_manager.append_records(
                REQUEST_TIMEOUT_MS,
                -1,
                entries,
                _on_appended(ctx, index, producer_id, commit, marker_done),
                ctx,
                origin=AppendOrigin.COORDINATOR,
                transaction_version=int(getattr(marker, "transaction_version", 0)),
            )

    return answer_when_called(start, lambda results: _response(ctx, results))


def _on_appended(
    ctx: RequestContext,
    index: int,
    producer_id: int,
    commit: bool,
    marker_done: Callable[[int, dict[TopicPartition, ErrorCode]], None],
) -> Callable[[ProduceStatuses], None]:
    def respond(statuses: ProduceStatuses) -> None:
        errors = {tp: status.result.error for tp, status in statuses.items()}
        offsets_partitions = {
            tp[1]
            for tp, error in errors.items()
            if tp[0] == OFFSETS_TOPIC and error is ErrorCode.none
        }
        if offsets_partitions:
            # The marker is in the offsets topic: materialize (or drop) the producer's
            # transactional offsets in those partitions' groups.
            try:
                handle_txn_completion(
                    ctx.services.coordinators.group_metadata_manager,
                    producer_id,
                    offsets_partitions,
                    commit,
                )
            except Exception:
                log.exception(
                    "Received an exception while trying to update the offsets cache on "
                    "transaction marker append"
                )
                for tp in errors:
                    if tp[0] == OFFSETS_TOPIC and tp[1] in offsets_partitions:
                        errors[tp] = ErrorCode.unknown_server_error
        marker_done(index, errors)

    return respond


def error_response(ctx: RequestContext, request: Any, error: ErrorCode) -> Any:
    """``error`` for every partition of every marker."""
    return _response(
        ctx,
        [(int(m.producer_id), dict.fromkeys(_partitions(m), error)) for m in request.markers],
    )
