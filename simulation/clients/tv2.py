"""A transactions-v2 (KIP-890 part 2) consume-transform-produce pipeline, on the project's
own client: what no client in the environment speaks yet.

It reads ``sim-out`` (the aiokafka transform's committed output) read_committed, at most
`MAX_RECORDS` records per transaction, and writes ``tv2:<partition>:<offset>`` for each to
``sim-txn`` (partition = offset mod 2) with a transactional Produce v12 -- no
AddPartitionsToTxn: the leader adds the partition --, commits its input offsets in the
transaction with TxnOffsetCommit v5 (no AddOffsetsToTxn) and ends it with EndTxn v5, whose
answer carries the bumped epoch the next transaction uses. Every `ABORT_EVERY`-th
transaction is aborted on purpose after its writes, and the reader goes back to the
committed positions: a seek that usually lands inside a batch of ``sim-out``.

After any failure it does what Kafka's producer does with an abortable error it cannot
retry: InitProducerId again (which aborts an ongoing transaction, or lets a commit already
asked for complete), then OffsetFetch with ``require_stable`` (KIP-447) for where to resume.

Each transaction goes to the History's event log: what it read, what it wrote at which
offset, when its commit was asked for and how it ended (``unknown`` when the commit was
asked for and no answer came) -- what the Elle and read checkers judge.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from kio.schema.errors import ErrorCode

from protocol.builders import request_builder
from protocol.record_builder import build_record_batch
from simulation.clients.aiokafka_stop import stop_consumer
from simulation.clients.raw import RawCluster, RawError
from simulation.events import Key, Txn
from simulation.history import History
from virtual_time.determinism import DEFAULT_EPOCH_S

TXN_TOPIC, TV2_ID, TV2_GROUP = "sim-txn", "sim-tv2", "sim-tv2"
READER = "tv2"
MAX_RECORDS, ABORT_EVERY = 10, 4
#: What the pipeline spends on a transaction's records before it polls again (the
#: aiokafka transform's think time).
THINK_S = 2.0
PRODUCE, OFFSET_FETCH, INIT_PRODUCER_ID, END_TXN, TXN_OFFSET_COMMIT = 0, 9, 22, 26, 28
RETRIABLE = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.concurrent_transactions,
        ErrorCode.unstable_offset_commit,
    }
)


class TxnFailed(Exception):
    """The transaction cannot go on: start again from InitProducerId."""


def _now() -> float:
    return asyncio.get_running_loop().time()


class Tv2Producer:
    """A transactional producer speaking transactions v2: one transaction at a time."""

    def __init__(self, cluster: RawCluster, transactional_id: str) -> None:
        self._cluster = cluster
        self._id = transactional_id
        self.producer_id = -1
        self.epoch = -1
        self._sequences: dict[tuple[str, int], int] = {}
        self._leaders: dict[str, dict[int, int]] = {}
        self._coordinators: dict[tuple[str, int], int] = {}

    async def _coordinator(self, key: str, key_type: int) -> int:
        """The coordinator of ``key``, asked again only after an error (a retry)."""
        found = self._coordinators.get((key, key_type))
        if found is None:
            found = await self._cluster.coordinator(key, key_type)
            self._coordinators[(key, key_type)] = found
        return found

    async def _retrying(self, what: str, attempt: Any) -> Any:
        """``attempt()`` until it answers an error that is not retriable (5 tries)."""
        for _ in range(5):
            try:
                answer, error = await attempt()
            except RawError:
                answer, error = None, ErrorCode.request_timed_out
            if error is ErrorCode.none:
                return answer
            if error not in RETRIABLE:
                raise TxnFailed(f"{what}: {error.name}")
            self._leaders.clear()
            self._coordinators.clear()
            await asyncio.sleep(0.5)
        raise TxnFailed(f"{what}: gave up")

    async def init(self) -> None:
        async def attempt() -> Any:
            node = await self._coordinator(self._id, 1)
            answer = await self._cluster.call(
                node, INIT_PRODUCER_ID, 5, "InitProducerIdRequest",
                transactional_id=self._id, transaction_timeout=30_000,
                producer_id=self.producer_id, producer_epoch=self.epoch,
            )  # fmt: skip
            return answer, answer.error_code

        try:
            answer = await self._retrying("InitProducerId", attempt)
        except TxnFailed:  # a fenced or unknown id: start over as a new producer
            self.producer_id = self.epoch = -1
            answer = await self._retrying("InitProducerId", attempt)
        self.producer_id, self.epoch = int(answer.producer_id), int(answer.producer_epoch)
        self._sequences.clear()

    async def produce(self, topic: str, partition: int, values: list[bytes]) -> int:
        """One transactional batch; its base offset."""
        sequence = self._sequences.get((topic, partition), 0)
        batch = build_record_batch(
            [(None, v, ()) for v in values],
            timestamp_ms=int((DEFAULT_EPOCH_S + _now()) * 1000),
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=sequence,
            is_transactional=True,
        )
        b = request_builder(PRODUCE, 12)
        data = (
            b.TopicProduceData(
                name=topic,
                partition_data=(b.PartitionProduceData(index=partition, records=batch),),
            ),
        )

        async def attempt() -> Any:
            if topic not in self._leaders:
                self._leaders[topic] = await self._cluster.leaders(topic)
            leader = self._leaders[topic].get(partition)
            if leader is None:
                return None, ErrorCode.leader_not_available
            answer = await self._cluster.call(
                leader, PRODUCE, 12, "ProduceRequest",
                transactional_id=self._id, acks=-1, timeout=10_000, topic_data=data,
            )  # fmt: skip
            found = answer.responses[0].partition_responses[0]
            return found, found.error_code

        found = await self._retrying("Produce", attempt)
        self._sequences[(topic, partition)] = sequence + len(values)
        return int(found.base_offset)

    async def commit_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        b = request_builder(TXN_OFFSET_COMMIT, 5)
        topics = tuple(
            b.TxnOffsetCommitRequestTopic(
                name=topic,
                partitions=tuple(
                    b.TxnOffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=o,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    )
                    for (t, p), o in sorted(offsets.items())
                    if t == topic
                ),
            )
            for topic in sorted({t for t, _ in offsets})
        )

        async def attempt() -> Any:
            node = await self._coordinator(group, 0)
            answer = await self._cluster.call(
                node, TXN_OFFSET_COMMIT, 5, "TxnOffsetCommitRequest",
                transactional_id=self._id, group_id=group, producer_id=self.producer_id,
                producer_epoch=self.epoch, generation_id=-1, member_id="",
                group_instance_id=None, topics=topics,
            )  # fmt: skip
            errors = [p.error_code for t in answer.topics for p in t.partitions]
            return answer, next((e for e in errors if e is not ErrorCode.none), ErrorCode.none)

        await self._retrying("TxnOffsetCommit", attempt)

    async def end(self, commit: bool) -> None:
        """EndTxn v5; its answer's epoch (bumped) is the next transaction's."""

        async def attempt() -> Any:
            node = await self._coordinator(self._id, 1)
            answer = await self._cluster.call(
                node, END_TXN, 5, "EndTxnRequest", transactional_id=self._id,
                producer_id=self.producer_id, producer_epoch=self.epoch, committed=commit,
            )  # fmt: skip
            return answer, answer.error_code

        answer = await self._retrying("EndTxn", attempt)
        self.producer_id, self.epoch = int(answer.producer_id), int(answer.producer_epoch)
        self._sequences.clear()


async def committed_positions(cluster: RawCluster, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, stable ones only (KIP-447: a pending transactional
    commit answers UNSTABLE_OFFSET_COMMIT until its marker lands)."""
    b = request_builder(OFFSET_FETCH, 8)
    for _ in range(20):
        try:
            node = await cluster.coordinator(group, 0)
            answer = await cluster.call(
                node, OFFSET_FETCH, 8, "OffsetFetchRequest",
                groups=(b.OffsetFetchRequestGroup(group_id=group, topics=None),),
                require_stable=True,
            )  # fmt: skip
        except RawError:
            await asyncio.sleep(0.5)
            continue
        found = answer.groups[0]
        errors = [p.error_code for t in found.topics for p in t.partitions]
        if found.error_code is ErrorCode.none and all(e is ErrorCode.none for e in errors):
            return {
                (t.name, int(p.partition_index)): int(p.committed_offset)
                for t in found.topics
                for p in t.partitions
                if int(p.committed_offset) >= 0
            }
        await asyncio.sleep(0.5)
    raise TxnFailed("OffsetFetch: no stable answer")


async def tv2_pipeline(
    bootstrap: str, stop_at_s: float, history: History, source: str, partitions: int
) -> None:
    """Consume ``source`` read_committed, produce to ``sim-txn`` in v2 transactions."""
    cluster = RawCluster(bootstrap, TV2_ID)
    producer = Tv2Producer(cluster, TV2_ID)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest", isolation_level="read_committed",
    )  # fmt: skip
    await consumer.start()
    assigned = [TopicPartition(source, p) for p in range(partitions)]
    consumer.assign(assigned)
    pipeline = _Pipeline(producer, consumer, cluster, history, stop_at_s)
    try:
        await pipeline.recover()
        while _now() < stop_at_s:
            await pipeline.step()
    finally:
        await stop_consumer(consumer)
        await cluster.close()


class _Pipeline:
    def __init__(
        self, producer: Tv2Producer, consumer: AIOKafkaConsumer, cluster: RawCluster,
        history: History, stop_at_s: float,
    ) -> None:  # fmt: skip
        self._stop_at_s = stop_at_s
        self._producer = producer
        self._consumer = consumer
        self._cluster = cluster
        self._history = history
        self._committed: dict[tuple[str, int], int] = {}
        self._n = 0

    async def step(self) -> None:
        try:
            batch = await self._consumer.getmany(timeout_ms=500, max_records=MAX_RECORDS)
        except KafkaError as exc:
            self._history.client_errors[f"{READER} {type(exc).__name__}"] += 1
            await asyncio.sleep(THINK_S)  # an error at once again must not spin the clock
            return
        records = [(tp, r) for tp, found in batch.items() for r in found if r.value is not None]
        if not records:
            return
        self._n += 1
        txn = self._history.events.begin(f"{TV2_ID}#{self._n}")
        for tp, r in records:
            key = (tp.topic, tp.partition, r.offset)
            txn.reads.append(key)
            self._history.events.read(READER, key, r.value, _now(), read_committed=True)
        try:
            await self._transact(txn, [(tp, r) for tp, r in records])
        except TxnFailed as exc:
            self._history.client_errors[f"{READER} {exc}"] += 1
            txn.outcome = "unknown" if txn.end_sent_at_s is not None else "aborted"
            self._history.transactions[f"v2 {txn.outcome}"] += 1
            await self.recover()
        await asyncio.sleep(THINK_S)

    async def _transact(self, txn: Txn, records: list[tuple[TopicPartition, Any]]) -> None:
        writes: dict[int, list[tuple[Key, bytes]]] = {}
        offsets: dict[tuple[str, int], int] = {}
        for tp, r in records:
            value = b"tv2:%d:%d" % (tp.partition, r.offset)
            writes.setdefault(r.offset % 2, []).append(((tp.topic, tp.partition, r.offset), value))
            offsets[(tp.topic, tp.partition)] = r.offset + 1
        for partition, items in sorted(writes.items()):
            base = await self._producer.produce(TXN_TOPIC, partition, [v for _, v in items])
            txn.writes += [((TXN_TOPIC, partition, base + i), v) for i, (_, v) in enumerate(items)]
        await self._producer.commit_offsets(TV2_GROUP, offsets)
        if self._n % ABORT_EVERY == 0:
            await self._producer.end(commit=False)
            txn.outcome = "aborted"
            self._history.transactions["v2 aborted on purpose"] += 1
            await self._seek(self._committed)
            return
        txn.end_sent_at_s = _now()
        await self._producer.end(commit=True)
        txn.outcome = "committed"
        self._history.transactions["v2 committed"] += 1
        self._committed.update(offsets)

    async def recover(self) -> None:
        """InitProducerId again, then resume where the last committed transaction left."""
        while _now() < self._stop_at_s:
            try:
                await self._producer.init()
                self._committed = await committed_positions(self._cluster, TV2_GROUP)
                break
            except TxnFailed as exc:
                self._history.client_errors[f"{READER} recover {exc}"] += 1
                await asyncio.sleep(1.0)
        await self._seek(self._committed)

    async def _seek(self, positions: dict[tuple[str, int], int]) -> None:
        starts: dict[tuple[str, int], int] = {}
        for tp in self._consumer.assignment():
            position = positions.get((tp.topic, tp.partition))
            if position is None:
                await self._consumer.seek_to_beginning(tp)
            else:
                self._consumer.seek(tp, position)
                starts[(tp.topic, tp.partition)] = position
        self._history.events.new_run(READER, starts)
