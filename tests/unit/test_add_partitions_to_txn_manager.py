"""The partition leader's side of transactions v2 (Kafka's AddPartitionsToTxnManager):
the request it sends the coordinator, how it answers what the coordinator says, and the
one-entry-per-transactional-id rule, without sockets."""

from __future__ import annotations

import asyncio
import io
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from broker.cluster.cluster_metadata import ClusterMetadata
from broker.txn.add_partitions_to_txn_manager import (
    AddPartitionsToTxnManager,
    TransactionSupportedOperation,
    _TxnData,
    add_partitions_request,
    produce_request_version_to_operation,
    txn_offset_commit_request_version_to_operation,
)
from protocol.builders import request_builder, response_builder

E = ErrorCode
OP = TransactionSupportedOperation


def test_request_versions_name_kafkas_operations() -> None:
    assert [produce_request_version_to_operation(v) for v in (10, 11, 12)] == [
        OP.DEFAULT_ERROR,
        OP.GENERIC_ERROR_SUPPORTED,
        OP.ADD_PARTITION,
    ]
    assert [txn_offset_commit_request_version_to_operation(v) for v in (3, 4, 5)] == [
        OP.DEFAULT_ERROR,
        OP.GENERIC_ERROR_SUPPORTED,
        OP.ADD_PARTITION,
    ]


def _manager() -> AddPartitionsToTxnManager:
    metadata = ClusterMetadata()
    metadata.register_broker(0, "127.0.0.1", 1)
    return AddPartitionsToTxnManager(0, metadata, lambda _t: (E.none, metadata.brokers[0]))


def _response(results: dict[str, dict[tuple[str, int], ErrorCode]], error: E = E.none) -> Any:
    b = response_builder(24, 5)
    return b.AddPartitionsToTxnResponse(
        throttle_time=0,
        error_code=error,
        results_by_transaction=tuple(
            b.AddPartitionsToTxnResult(
                transactional_id=txn,
                topic_results=tuple(
                    b.AddPartitionsToTxnTopicResult(
                        name=topic,
                        results_by_partition=(
                            b.AddPartitionsToTxnPartitionResult(
                                partition_index=p, partition_error_code=code
                            ),
                        ),
                    )
                    for (topic, p), code in errors.items()
                ),
            )
            for txn, errors in results.items()
        ),
    )


def test_the_request_is_add_partitions_to_txn_v5_adding_them() -> None:
    answers: list[Any] = []
    data = _TxnData("tx", 7, 3, frozenset({("t", 1), ("t", 0)}), answers.append, OP.ADD_PARTITION)
    # Kafka's AddPartitionsToTxnRequest.json v5: one transaction, VerifyOnly false.
    request = add_partitions_request([data])
    buffer = io.BytesIO()
    entity_writer(type(request))(buffer, request)
    assert buffer.getvalue() == (
        b"\x02"  # one transaction
        + b"\x03tx"
        + (7).to_bytes(8, "big")
        + (3).to_bytes(2, "big")
        + b"\x00"  # VerifyOnly false
        + b"\x02\x02t\x03"
        + (0).to_bytes(4, "big")
        + (1).to_bytes(4, "big")
        + b"\x00"  # the topic's tags
        + b"\x00"  # the transaction's tags
        + b"\x00"  # the request's tags
    )


def test_the_coordinators_errors_are_translated_as_kafkas() -> None:
    manager = _manager()
    got: dict[str, Any] = {}
    tp = ("t", 0)
    old = _TxnData("old", 1, 0, frozenset({tp}), lambda e: got.update(old=e), OP.DEFAULT_ERROR)
    new = _TxnData("new", 2, 0, frozenset({tp}), lambda e: got.update(new=e), OP.ADD_PARTITION)
    answer = {"old": {tp: E.transaction_abortable}, "new": {tp: E.producer_fenced}}
    manager.on_response([old, new], _response(answer))
    # TRANSACTION_ABORTABLE is INVALID_TXN_STATE for an old client; fenced is an epoch error.
    assert got == {"old": {tp: E.invalid_txn_state}, "new": {tp: E.invalid_producer_epoch}}
    manager.on_response([new], _response({}, E.cluster_authorization_failed))
    assert got["new"] == {("t", 0): E.invalid_txn_state}
    manager.on_response([new], None)
    assert got["new"] == {("t", 0): E.network_exception}
    manager.on_response([new], _response({"new": {("t", 0): E.none}}))
    assert got["new"] == {}


def test_one_entry_per_transactional_id_the_newer_epoch_wins() -> None:
    async def run() -> dict[str, Any]:
        metadata = ClusterMetadata()
        metadata.register_broker(0, "127.0.0.1", 1)
        manager = AddPartitionsToTxnManager(0, metadata, lambda _t: (E.none, metadata.brokers[0]))
        await manager.start()
        got: dict[str, Any] = {}
        tps = frozenset({("t", 0)})
        manager.add_or_verify_transaction(
            "tx", 1, 5, tps, lambda e: got.update(a=e), OP.ADD_PARTITION
        )
        manager.add_or_verify_transaction(
            "tx", 1, 4, tps, lambda e: got.update(b=e), OP.ADD_PARTITION
        )
        manager.add_or_verify_transaction(
            "tx", 1, 5, tps, lambda e: got.update(c=e), OP.ADD_PARTITION
        )
        manager.add_or_verify_transaction(
            "tx", 1, 6, tps, lambda e: got.update(d=e), OP.ADD_PARTITION
        )
        assert [d.producer_epoch for d in manager.drain(0)] == [6]
        await manager.stop()
        return got

    got = asyncio.run(run())
    assert got["b"] == {("t", 0): E.invalid_producer_epoch}  # older than the queued one
    assert got["a"] == {("t", 0): E.network_exception}  # the same epoch again: a retry
    assert got["c"] == {("t", 0): E.invalid_producer_epoch}  # a newer epoch replaced it
    assert "d" not in got


def test_no_coordinator_is_coordinator_not_available() -> None:
    manager = AddPartitionsToTxnManager(
        0, ClusterMetadata(), lambda _t: (E.coordinator_not_available, None)
    )
    got: list[Any] = []
    manager.add_or_verify_transaction(
        "tx", 1, 0, frozenset({("t", 0)}), got.append, OP.ADD_PARTITION
    )
    assert got == [{("t", 0): E.coordinator_not_available}]


async def test_a_produce_v12_whose_partition_cannot_be_added_is_refused_retriable() -> None:
    from protocol.record_builder import build_record_batch
    from tests.helpers.dispatch_node import dispatch_node

    node = dispatch_node()
    node.broker.services.metadata.create_topic("t", 1, 1, {})
    b = request_builder(0, 12)
    batch = build_record_batch(
        [(None, b"v", ())],
        timestamp_ms=node.clock.now_ms(),
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    body = b.ProduceRequest(
        transactional_id="tx",
        acks=-1,
        timeout=1000,
        topic_data=(
            b.TopicProduceData(
                name="t", partition_data=(b.PartitionProduceData(index=0, records=batch),)
            ),
        ),
    )
    (answer,) = node.answer(node.send(0, 12, body)).responses[0].partition_responses
    # No coordinator for the transactional id: Kafka's ReplicaManager answers
    # NOT_ENOUGH_REPLICAS, which a client retries without refreshing its metadata.
    assert answer.error_code is E.not_enough_replicas
    assert answer.error_message == (
        "Unable to verify the partition has been added to the transaction. "
        "Underlying error: COORDINATOR_NOT_AVAILABLE"
    )
