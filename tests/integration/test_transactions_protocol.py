"""The transaction APIs at the wire, with a raw client: the answers and error codes real
clients rely on, request by request (FindCoordinator key type 1, InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit with OffsetFetch ``require_stable``,
EndTxn, WriteTxnMarkers, DescribeTransactions, ListTransactions, ApiVersions)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from broker.group import TopicPartition
from protocol.builders import request_builder
from testkit.polling import wait_until
from testkit.raw_client import RawClient

pytestmark = pytest.mark.asyncio

E = ErrorCode
API_VERSIONS, FIND_COORDINATOR, OFFSET_FETCH, INIT_PRODUCER_ID = 18, 10, 9, 22
ADD_PARTITIONS, ADD_OFFSETS, END_TXN, WRITE_MARKERS, TXN_OFFSET_COMMIT = 24, 25, 26, 27, 28
DESCRIBE_TXNS, LIST_TXNS = 65, 66
TP = TopicPartition("t", 0)


@pytest.fixture
async def raw(kafka: MiniKafka) -> AsyncIterator[RawClient]:
    kafka.cluster.create_topic("t", 2, 1, {})
    client = await RawClient.connect(kafka.bootstrap)
    try:
        yield client
    finally:
        await client.close()


async def init(raw: RawClient, txn_id: str, timeout_ms: int = 60000, **kw: Any) -> Any:
    return await raw.request(
        INIT_PRODUCER_ID,
        4,
        "InitProducerIdRequest",
        transactional_id=txn_id,
        transaction_timeout=timeout_ms,
        **kw,
    )


async def add_partitions(
    raw: RawClient, txn_id: str, pid: int, epoch: int, partitions: dict[str, list[int]]
) -> dict[tuple[str, int], ErrorCode]:
    b = request_builder(ADD_PARTITIONS, 3)
    response = await raw.request(
        ADD_PARTITIONS,
        3,
        "AddPartitionsToTxnRequest",
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=tuple(
            b.AddPartitionsToTxnTopic(name=name, partitions=tuple(parts))
            for name, parts in partitions.items()
        ),
    )
    return {
        (t.name, int(p.partition_index)): p.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


async def end(raw: RawClient, txn_id: str, pid: int, epoch: int, version: int = 3) -> ErrorCode:
    response = await raw.request(
        END_TXN,
        version,
        "EndTxnRequest",
        transactional_id=txn_id,
        producer_id=pid,
        producer_epoch=epoch,
        committed=True,
    )
    error: ErrorCode = response.error_code
    return error


async def fetch_stable(raw: RawClient, group: str) -> tuple[int, ErrorCode]:
    b = request_builder(OFFSET_FETCH, 8)
    response = await raw.request(
        OFFSET_FETCH,
        8,
        "OffsetFetchRequest",
        groups=(
            b.OffsetFetchRequestGroup(
                group_id=group,
                topics=(b.OffsetFetchRequestTopics(name="t", partition_indexes=(0,)),),
            ),
        ),
        require_stable=True,
    )
    part = response.groups[0].topics[0].partitions[0]
    return int(part.committed_offset), part.error_code


async def test_the_transaction_apis_are_advertised(raw: RawClient) -> None:
    response = await raw.request(
        API_VERSIONS, 3, "ApiVersionsRequest", client_software_name="t", client_software_version="1"
    )
    served = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
    assert served[INIT_PRODUCER_ID] == (0, 6)
    assert served[ADD_PARTITIONS] == (0, 5)
    assert served[ADD_OFFSETS] == (0, 4)
    assert served[END_TXN] == (0, 5)  # v5: transactions v2 (KIP-890 part 2)
    assert served[WRITE_MARKERS] == (1, 2)
    assert served[TXN_OFFSET_COMMIT] == (0, 5)
    assert served[DESCRIBE_TXNS] == (0, 0)
    assert served[LIST_TXNS] == (0, 2)


async def test_find_coordinator_for_a_transactional_id(kafka: MiniKafka, raw: RawClient) -> None:
    v3 = await raw.request(FIND_COORDINATOR, 3, "FindCoordinatorRequest", key="tx", key_type=1)
    assert (v3.error_code, v3.node_id, v3.port) == (E.none, 0, kafka.brokers[0].port)
    topic = kafka.cluster.topics["__transaction_state"]
    assert len(topic.partitions) == 50 and topic.is_internal
    assert topic.configs["cleanup.policy"] == "compact"
    v4 = await raw.request(
        FIND_COORDINATOR, 4, "FindCoordinatorRequest", key_type=1, coordinator_keys=("a", "")
    )
    assert [c.error_code for c in v4.coordinators] == [E.none, E.invalid_request]


async def test_init_producer_id_checks_its_input(raw: RawClient) -> None:
    # Before FindCoordinator created __transaction_state nobody coordinates the id.
    assert (await init(raw, "tx")).error_code is E.not_coordinator
    await raw.request(FIND_COORDINATOR, 3, "FindCoordinatorRequest", key="tx", key_type=1)
    assert (await init(raw, "tx", 900_001)).error_code is E.invalid_transaction_timeout
    half = await init(raw, "tx", producer_id=5, producer_epoch=-1)
    assert half.error_code is E.invalid_request
    ok = await init(raw, "tx")
    assert (ok.error_code, ok.producer_epoch) == (E.none, 0)


async def test_a_whole_transaction_at_the_wire(kafka: MiniKafka, raw: RawClient) -> None:
    await raw.request(FIND_COORDINATOR, 3, "FindCoordinatorRequest", key="raw-group", key_type=0)
    await raw.request(FIND_COORDINATOR, 3, "FindCoordinatorRequest", key="raw-tx", key_type=1)
    r = await init(raw, "raw-tx")
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    # An unknown topic fails the whole request, the rest is not attempted.
    assert await add_partitions(raw, "raw-tx", pid, epoch, {"t": [0], "nope": [0]}) == {
        ("t", 0): E.operation_not_attempted,
        ("nope", 0): E.unknown_topic_or_partition,
    }
    assert await add_partitions(raw, "raw-tx", pid, epoch, {"t": [0]}) == {("t", 0): E.none}
    added = await raw.request(
        ADD_OFFSETS,
        3,
        "AddOffsetsToTxnRequest",
        transactional_id="raw-tx",
        producer_id=pid,
        producer_epoch=epoch,
        group_id="raw-group",
    )
    assert added.error_code is E.none
    b = request_builder(TXN_OFFSET_COMMIT, 3)
    committed = await raw.request(
        TXN_OFFSET_COMMIT,
        3,
        "TxnOffsetCommitRequest",
        transactional_id="raw-tx",
        group_id="raw-group",
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            b.TxnOffsetCommitRequestTopic(
                name="t",
                partitions=(
                    b.TxnOffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=42,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )
    assert committed.topics[0].partitions[0].error_code is E.none
    assert await fetch_stable(raw, "raw-group") == (-1, E.unstable_offset_commit)

    described = await raw.request(
        DESCRIBE_TXNS, 0, "DescribeTransactionsRequest", transactional_ids=("raw-tx", "none")
    )
    tx, unknown = described.transaction_states
    assert (tx.error_code, tx.transaction_state, int(tx.producer_id)) == (E.none, "Ongoing", pid)
    assert sorted((t.topic, list(t.partitions)) for t in tx.topics)[1] == ("t", [0])
    assert unknown.error_code is E.transactional_id_not_found
    listed = await raw.request(LIST_TXNS, 1, "ListTransactionsRequest", state_filters=("Ongoing",))
    assert [t.transactional_id for t in listed.transaction_states] == ["raw-tx"]

    assert await end(raw, "raw-tx", pid, epoch + 1, version=1) is E.invalid_producer_epoch
    assert await end(raw, "raw-tx", pid, epoch + 1) is E.producer_fenced
    assert await end(raw, "raw-tx", pid, epoch) is E.none
    # The markers are written behind the answer; then the offset is committed.
    manager = kafka.brokers[0].services.coordinators.group_metadata_manager
    await wait_until(
        lambda: not manager.get_offsets("raw-group", [TP], True)[TP].error,
        "the COMMIT marker to reach __consumer_offsets",
    )
    assert await fetch_stable(raw, "raw-group") == (42, E.none)


async def test_write_txn_markers_answers_per_partition(raw: RawClient) -> None:
    b = request_builder(WRITE_MARKERS, 1)
    response = await raw.request(
        WRITE_MARKERS,
        1,
        "WriteTxnMarkersRequest",
        markers=(
            b.WritableTxnMarker(
                producer_id=77,
                producer_epoch=0,
                transaction_result=False,
                topics=(
                    b.WritableTxnMarkerTopic(name="nope", partition_indexes=(0,)),
                    b.WritableTxnMarkerTopic(name="t", partition_indexes=(1,)),
                ),
                coordinator_epoch=0,
            ),
        ),
    )
    (marker,) = response.markers
    errors = {
        (t.name, int(p.partition_index)): p.error_code for t in marker.topics for p in t.partitions
    }
    assert int(marker.producer_id) == 77
    assert errors == {("nope", 0): E.unknown_topic_or_partition, ("t", 1): E.none}
