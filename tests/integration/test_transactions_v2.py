"""Transactions v2 (KIP-890 part 2) and the features that turn them on (KIP-584), over
TCP with real clients where they speak them.

- kafka-python's admin (``describe_features``/``update_features``) and ``minikafka
  features``, the twin of ``kafka-features.sh``, read and move ``transaction.version``.
- confluent-kafka 2.16 (librdkafka 2.16 is a transactions-v1 client: AddPartitionsToTxn
  v0, EndTxn v1, Produce v10, whatever the cluster finalizes) runs exactly once
  consume-transform-produce, and its aborts stay invisible to read_committed, on a
  cluster at ``transaction.version`` 2 and on one downgraded to 0 before the test.
- No client in the environment speaks v2 yet, so the project's own client drives it:
  InitProducerId, a transactional Produce v12 with no AddPartitionsToTxn (the leader adds
  the partition), TxnOffsetCommit v5 with no AddOffsetsToTxn, EndTxn v5 answering the
  bumped epoch, the old epoch fenced, and a read_committed consumer seeing the
  committed transaction only.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidUpdateVersionError
from kio.schema.errors import ErrorCode

from broker.app import MiniKafka
from minikafka.cli import main as cli_main
from protocol.builders import request_builder
from protocol.record_builder import build_record_batch
from testkit.polling import wait_until
from testkit.raw_client import RawClient
from tests.integration.conftest import running_cluster
from tests.integration.test_transactions_other_clients import (
    _ck_commit_and_abort,
    _ck_committed,
    _ck_consume_transform_produce,
    _ck_plain_produce,
    _ck_read_committed,
)

pytestmark = pytest.mark.asyncio

E = ErrorCode
PRODUCE, OFFSET_FETCH, FIND_COORDINATOR, INIT_PRODUCER_ID = 0, 9, 10, 22
END_TXN, TXN_OFFSET_COMMIT, API_VERSIONS, UPDATE_FEATURES = 26, 28, 18, 57
DESCRIBE_TXNS = 65


def _kp_admin(bootstrap: str) -> Any:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)


def _kp_set_transaction_version(bootstrap: str, level: int) -> dict[str, Any]:
    admin: Any = _kp_admin(bootstrap)
    try:
        kind = "SAFE_DOWNGRADE" if level < 2 else "UPGRADE"
        result = admin.update_features({"transaction.version": (kind, level)})
        assert result == {"transaction.version": "OK"}, result
        described: dict[str, Any] = admin.describe_features()
        return described
    finally:
        admin.close()


async def test_kafka_python_admin_and_the_cli_read_and_move_the_levels() -> None:
    async with running_cluster() as app:
        admin: Any = await asyncio.to_thread(_kp_admin, app.bootstrap)
        try:
            described = await asyncio.to_thread(admin.describe_features)
            assert described["transaction.version"]["supported"] == (0, 2)
            assert described["transaction.version"]["finalized"] == (2, 2)
            assert described["metadata.version"]["finalized"] == (29, 29)
            assert described["streams.version"]["finalized"] == (1, 1)
            with pytest.raises(InvalidUpdateVersionError, match="only supports versions 0-2"):
                await asyncio.to_thread(
                    admin.update_features, {"transaction.version": ("UPGRADE", 3)}
                )
        finally:
            await asyncio.to_thread(admin.close)
        assert app.stores.features.level("transaction.version") == 2

        # One run as a user runs it (a child process), the others in a thread of this
        # process (the same ``main``; a child costs seconds to start).
        done = await asyncio.to_thread(
            _cli_in_process, "downgrade", "--feature", "transaction.version=0", app.bootstrap
        )
        assert done == (0, "transaction.version was downgraded to 0.\n", "")
        assert app.stores.features.level("transaction.version") == 0
        failed = await asyncio.to_thread(
            _cli_in_process, "upgrade", "--feature", "group.version=2", app.bootstrap
        )
        assert failed[0] == 1
        assert failed[1].startswith("Could not upgrade group.version to 2. Invalid update")
        assert "1 out of 1 operation(s) failed." in failed[2]
        command = [sys.executable, "-m", "minikafka", "features", "describe"]
        listing = await asyncio.to_thread(
            subprocess.run,
            [*command, "--bootstrap-server", app.bootstrap],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert listing.returncode == 0
        assert (
            "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t"
            "FinalizedVersionLevel: 0\tEpoch: 1\n"
        ) in listing.stdout
        assert "FinalizedVersionLevel: 4.2-IV1" in listing.stdout


def _cli_in_process(*args: str) -> tuple[int, str, str]:
    """``minikafka features ARGS --bootstrap-server B`` (B the last argument), in-process."""
    *command, bootstrap = args
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["features", *command, "--bootstrap-server", bootstrap])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("transaction_version", [2, 0])
async def test_confluent_kafka_exactly_once_at_either_transaction_version(
    transaction_version: int,
) -> None:
    async with running_cluster(3) as app:
        if transaction_version != 2:
            described = await asyncio.to_thread(
                _kp_set_transaction_version, app.bootstrap, transaction_version
            )
            assert "finalized" not in described["transaction.version"]
        app.cluster.create_topic("ck-in", 2, 3, {})
        app.cluster.create_topic("ck-out", 2, 3, {})
        app.cluster.create_topic("ck-txn", 2, 3, {})
        await asyncio.to_thread(_ck_plain_produce, app.bootstrap, "ck-in", 10)
        processed = await asyncio.to_thread(
            _ck_consume_transform_produce, app.bootstrap, "ck-in", "ck-out", 10
        )
        assert processed == 10
        got = await asyncio.to_thread(_ck_read_committed, app.bootstrap, "ck-out", 2, 10)
        assert got == sorted(f"ck-{i}".encode() for i in range(10))
        assert await asyncio.to_thread(_ck_committed, app.bootstrap, "ck-in", 2) == [5, 5]
        await asyncio.to_thread(_ck_commit_and_abort, app.bootstrap, "ck-txn")
        visible = await asyncio.to_thread(_ck_read_committed, app.bootstrap, "ck-txn", 2, 4)
        assert visible == [f"ck-committed-{i}".encode() for i in range(4)]


# ------------------------------------------------ transactions v2, the project's client
def _txn_batch(pid: int, epoch: int, sequence: int, value: bytes) -> bytes:
    return build_record_batch(
        [(None, value, ())],
        timestamp_ms=1_700_000_000_000,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )


async def _produce_v12(raw: RawClient, pid: int, epoch: int, sequence: int, value: bytes) -> Any:
    b = request_builder(PRODUCE, 12)
    response = await raw.request(
        PRODUCE,
        12,
        "ProduceRequest",
        transactional_id="v2-tx",
        acks=-1,
        timeout=10000,
        topic_data=(
            b.TopicProduceData(
                name="v2",
                partition_data=(
                    b.PartitionProduceData(
                        index=0, records=_txn_batch(pid, epoch, sequence, value)
                    ),
                ),
            ),
        ),
    )
    return response.responses[0].partition_responses[0]


async def _end_v5(raw: RawClient, pid: int, epoch: int, commit: bool) -> Any:
    return await raw.request(
        END_TXN,
        5,
        "EndTxnRequest",
        transactional_id="v2-tx",
        producer_id=pid,
        producer_epoch=epoch,
        committed=commit,
    )


async def _state(raw: RawClient) -> str:
    answer = await raw.request(
        DESCRIBE_TXNS, 0, "DescribeTransactionsRequest", transactional_ids=("v2-tx",)
    )
    state = answer.transaction_states[0]
    assert state.error_code is E.none, state
    return str(state.transaction_state)


async def test_a_v2_transaction_driven_by_the_projects_client(kafka: MiniKafka) -> None:
    kafka.cluster.create_topic("v2", 1, 1, {})
    raw = await RawClient.connect(kafka.bootstrap)
    try:
        # FindCoordinator creates __transaction_state and __consumer_offsets, as a client's.
        for key, key_type in (("v2-group", 0), ("v2-tx", 1)):
            await raw.request(
                FIND_COORDINATOR, 3, "FindCoordinatorRequest", key=key, key_type=key_type
            )
        init = await raw.request(
            INIT_PRODUCER_ID,
            4,
            "InitProducerIdRequest",
            transactional_id="v2-tx",
            transaction_timeout=60000,
        )
        assert init.error_code is E.none
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        # No AddPartitionsToTxn: the Produce v12 adds its partition.
        first = await _produce_v12(raw, pid, epoch, 0, b"committed")
        assert first.error_code is E.none
        assert await _state(raw) == "Ongoing"
        b = request_builder(TXN_OFFSET_COMMIT, 5)
        committed = await raw.request(
            TXN_OFFSET_COMMIT,
            5,
            "TxnOffsetCommitRequest",
            transactional_id="v2-tx",
            group_id="v2-group",
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=(
                b.TxnOffsetCommitRequestTopic(
                    name="v2",
                    partitions=(
                        b.TxnOffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=1,
                            committed_leader_epoch=-1,
                            committed_metadata=None,
                        ),
                    ),
                ),
            ),
        )
        assert committed.topics[0].partitions[0].error_code is E.none
        ended = await _end_v5(raw, pid, epoch, True)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
            E.none,
            pid,
            epoch + 1,
        )

        async def complete() -> bool:
            return await _state(raw) == "CompleteCommit"

        await wait_until(complete, "the commit markers are written")
        # The old epoch is fenced; the answered one starts the next transaction.
        stale = await _produce_v12(raw, pid, epoch, 1, b"stale")
        assert stale.error_code is E.invalid_producer_epoch
        second = await _produce_v12(raw, pid, epoch + 1, 0, b"aborted")
        assert second.error_code is E.none
        aborted = await _end_v5(raw, pid, epoch + 1, False)
        assert (aborted.error_code, aborted.producer_epoch) == (E.none, epoch + 2)
        fetched = await raw.request(
            OFFSET_FETCH,
            7,
            "OffsetFetchRequest",
            group_id="v2-group",
            topics=None,
            require_stable=True,
        )
        assert fetched.error_code is E.none
        assert [int(p.committed_offset) for t in fetched.topics for p in t.partitions] == [1]
    finally:
        await raw.close()
    got = await asyncio.to_thread(_ck_read_committed, kafka.bootstrap, "v2", 1, 1)
    assert got == [b"committed"]


async def test_the_finalized_levels_are_kept_in_the_data_directory(tmp_path: Path) -> None:
    async with running_cluster(data_dir=tmp_path) as app:
        raw = await RawClient.connect(app.bootstrap)
        try:
            b = request_builder(UPDATE_FEATURES, 2)
            answer = await raw.request(
                UPDATE_FEATURES,
                2,
                "UpdateFeaturesRequest",
                feature_updates=(
                    b.FeatureUpdateKey(
                        feature="transaction.version", max_version_level=1, upgrade_type=2
                    ),
                ),
                validate_only=False,
            )
            assert answer.error_code is E.none
        finally:
            await raw.close()
    async with running_cluster(data_dir=tmp_path) as app:
        raw = await RawClient.connect(app.bootstrap)
        try:
            versions = await raw.request(
                API_VERSIONS,
                4,
                "ApiVersionsRequest",
                client_software_name="t",
                client_software_version="1",
            )
        finally:
            await raw.close()
    finalized = {f.name: f.max_version_level for f in versions.finalized_features}
    assert finalized["transaction.version"] == 1
    assert versions.finalized_features_epoch == 1
