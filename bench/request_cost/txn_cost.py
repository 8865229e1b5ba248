"""What a transaction costs the broker: a transactional produce + commit, v1 and v2.

One ``serve`` child (``--broker-cwd``: whose broker; its ``protocol`` encodes the frames)
and one connection of the project's raw client, one request at a time. Each of
``--transactions`` transactions writes one batch of ``--records`` records to one
partition (acks=all) and commits:

- ``v1``: AddPartitionsToTxn v3, Produce v11, EndTxn v4 (what aiokafka, kafka-python and
  librdkafka 2.16 send);
- ``v2`` (transactions v2, KIP-890 part 2; skipped on a broker without EndTxn v5):
  Produce v12 (the leader adds the partition) and EndTxn v5, the next transaction on
  the epoch it answered.

A request answered with a retriable error (CONCURRENT_TRANSACTIONS while the previous
markers are written, NOT_ENOUGH_REPLICAS for the same reason under v2) is sent again
after 2 ms and counted. Per flavor: transactions/s, the broker's CPU per transaction (on-CPU
time of its threads, schedstat) and the latency of one transaction, p50/p99. It never
asserts::

    .venv/bin/python -m bench.request_cost.txn_cost [--transactions 2000] [--records 10]
        [--broker-cwd DIR] [--flavors v1,v2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from bench.lib.checkout import use_protocol_of
from bench.lib.stats import percentile

PRODUCE, FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN = 0, 10, 22, 24, 26
TOPIC, TXN_ID = "txn-cost", "txn-cost"
RETRY_BACKOFF_S = 0.002  # a client's backoff, short: the markers take a few ms
RETRIABLE = {"concurrent_transactions", "not_enough_replicas", "coordinator_load_in_progress"}


def _run_ns(pid: int) -> int:
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with suppress(OSError), open(f"/proc/{pid}/task/{task}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


def _batch(pid: int, epoch: int, sequence: int, records: int) -> bytes:
    from protocol.record_builder import build_record_batch

    return build_record_batch(
        [(None, b"x" * 100, ())] * records,
        timestamp_ms=int(time.time() * 1000),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )


async def _retrying(raw: Any, api_key: int, version: int, message: str, **fields: Any) -> Any:
    """The request until its error (top level or first partition) is not retriable."""
    retries = 0
    while True:
        answer = await raw.request(api_key, version, message, **fields)
        error = _error(answer)
        if error not in RETRIABLE:
            return answer, retries
        retries += 1
        await asyncio.sleep(RETRY_BACKOFF_S)


def _error(answer: Any) -> str:
    code = getattr(answer, "error_code", None)
    if code is None and hasattr(answer, "responses"):
        code = answer.responses[0].partition_responses[0].error_code
    if code is None and hasattr(answer, "results_by_topic_v3_and_below"):
        code = answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    return str(getattr(code, "name", code))


async def _flavor(
    raw: Any, flavor: str, transactions: int, records: int
) -> tuple[list[float], int]:
    from protocol.builders import request_builder

    init, _ = await _retrying(
        raw,
        INIT_PRODUCER_ID,
        4,
        "InitProducerIdRequest",
        transactional_id=f"{TXN_ID}-{flavor}",
        transaction_timeout=60000,
    )
    pid, epoch = int(init.producer_id), int(init.producer_epoch)
    produce_v = 12 if flavor == "v2" else 11
    b = request_builder(PRODUCE, produce_v)
    sequence, retries, latencies = 0, 0, []
    for _ in range(transactions):
        started = time.perf_counter()
        if flavor == "v1":
            a = request_builder(ADD_PARTITIONS, 3)
            _, n = await _retrying(
                raw,
                ADD_PARTITIONS,
                3,
                "AddPartitionsToTxnRequest",
                v3_and_below_transactional_id=f"{TXN_ID}-{flavor}",
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(a.AddPartitionsToTxnTopic(name=TOPIC, partitions=(0,)),),
            )
            retries += n
        _, n = await _retrying(
            raw,
            PRODUCE,
            produce_v,
            "ProduceRequest",
            transactional_id=f"{TXN_ID}-{flavor}",
            acks=-1,
            timeout=30000,
            topic_data=(
                b.TopicProduceData(
                    name=TOPIC,
                    partition_data=(
                        b.PartitionProduceData(
                            index=0, records=_batch(pid, epoch, sequence, records)
                        ),
                    ),
                ),
            ),
        )
        retries += n
        ended, n = await _retrying(
            raw,
            END_TXN,
            5 if flavor == "v2" else 4,
            "EndTxnRequest",
            transactional_id=f"{TXN_ID}-{flavor}",
            producer_id=pid,
            producer_epoch=epoch,
            committed=True,
        )
        retries += n
        if flavor == "v2":  # the next transaction runs on the bumped epoch, from 0
            epoch, sequence = int(ended.producer_epoch), 0
        else:
            sequence += records
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies, retries


async def _main(args: argparse.Namespace) -> None:
    from protocol.builders import request_builder
    from testkit.broker_process import BrokerProcess
    from testkit.raw_client import RawClient

    cwd = Path(args.broker_cwd).resolve()
    broker = BrokerProcess([], cwd=cwd, stderr=None, log_level="WARNING")
    try:
        raw = await RawClient.connect(broker.bootstrap)
        versions = await raw.request(
            18, 3, "ApiVersionsRequest", client_software_name="b", client_software_version="1"
        )
        end_txn_max = next(int(k.max_version) for k in versions.api_keys if k.api_key == END_TXN)
        await raw.request(
            19,
            7,
            "CreateTopicsRequest",
            topics=(
                request_builder(19, 7).CreatableTopic(
                    name=TOPIC, num_partitions=1, replication_factor=1, assignments=(), configs=()
                ),
            ),
            timeout=30000,
            validate_only=False,
        )
        await raw.request(FIND_COORDINATOR, 3, "FindCoordinatorRequest", key=TXN_ID, key_type=1)
        print(f"# broker of {cwd} (pid {broker.proc.pid}); EndTxn up to v{end_txn_max}")
        header = ("flavor", "txn/s", "brk us/txn", "p50 ms", "p99 ms", "retries")
        print("{:8} {:>8} {:>11} {:>8} {:>8} {:>8}".format(*header))
        for flavor in args.flavors.split(","):
            if flavor == "v2" and end_txn_max < 5:
                print(f"{flavor:8} (not served)")
                continue
            await _flavor(raw, flavor, max(args.transactions // 10, 1), args.records)  # warm
            cpu0, wall0 = _run_ns(broker.proc.pid), time.perf_counter()
            latencies, retries = await _flavor(raw, flavor, args.transactions, args.records)
            cpu = (_run_ns(broker.proc.pid) - cpu0) / 1e3 / args.transactions
            rate = args.transactions / (time.perf_counter() - wall0)
            print(
                f"{flavor:8} {rate:8.0f} {cpu:11.0f} {percentile(latencies, 50):8.2f} "
                f"{percentile(latencies, 99):8.2f} {retries:8d}"
            )
        await raw.close()
    finally:
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=2000)
    parser.add_argument("--records", type=int, default=10)
    parser.add_argument("--flavors", default="v1,v2")
    parser.add_argument("--broker-cwd", default=".", help="checkout whose broker runs (this one)")
    args = parser.parse_args()
    use_protocol_of(Path(args.broker_cwd))
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
