"""The simulated clients: `minikafka workload`'s mix, as aiokafka runs it, writing a History.

- ``producer-all``: idempotent, acks=all, on ``sim-events`` (RF 3, min.insync.replicas 2):
  every acknowledged record must survive whatever the nemesis does;
- ``producer-one``: acks=1 on the same topic (it may lose what a dying leader had alone: Kafka's
  contract, so it is counted, not checked);
- a consumer group ``sim-group`` of three members that commit after every batch; the third,
  ``doomed``, is a zombie: part-way it freezes between a poll and its commit (its network is
  cut: `SimNetwork.isolate`) for longer than its session, so the coordinator expires it and
  its partitions move; then it thaws and commits what it polled before the freeze, a commit
  from a member the group no longer has (Kafka refuses it), and rejoins;
- a transactional consume-transform-produce from ``sim-events`` to ``sim-out``
  (read_committed, offsets committed in the transaction), aborting every fifth transaction on
  purpose after writing to it;
- a read_committed watcher of ``sim-out``, recording what it reads and its high watermarks;
- the clients of `simulation.clients` (`start_more_clients`): a transactions-v2 pipeline
  from ``sim-out`` to ``sim-txn`` on the project's own client, a DeleteRecords caller on
  ``sim-events`` partition 0, a producer throttled by a ``producer_byte_rate`` quota.
- a Kafka Streams application, a streams group over ``sim-events`` whose members die, leave
  and come back (`simulation.clients.streams_app`).
- the project's own KIP-848 members and share consumers (`simulation.clients.mix`);
- with ``sasl_bootstrap``, a SCRAM client on the SASL listener with ACLs, the admin that
  gives and takes them, and a client with a wrong password (`simulation.clients.sasl_app`).

Every consumer notes each record it is given (`History.read`, and into the event log with
its run and isolation, for Jepsen's checkers) and the high watermark of each assigned
partition after every poll, for the checkers. Spacing between sends is drawn from the
seed. Errors a client meets are counted (they are what
faults cause) and the client goes on, as an application would.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from simulation.clients.aiokafka_stop import stop_consumer
from simulation.clients.aiokafka_txn import note_writes, renewed_if_fatal, settle_open_txns
from simulation.clients.deleter import delete_records_now_and_then
from simulation.clients.mix import protocol_clients
from simulation.clients.sasl_app import TOPIC as SASL_TOPIC
from simulation.clients.sasl_app import sasl_clients
from simulation.clients.streams_app import run_streams_app
from simulation.clients.throttled import produce_throttled
from simulation.clients.tv2 import TXN_TOPIC, tv2_pipeline
from simulation.history import Assignment, History
from virtual_time.determinism import DEFAULT_EPOCH_S
from virtual_time.network import client_node

EVENTS, OUTPUT, TIERED = "sim-events", "sim-out", "sim-tiered"
GROUP, TRANSFORM_GROUP = "sim-group", "sim-ctp"
ABORT_EVERY = 5
SESSION_TIMEOUT_MS = 10_000
#: How long the zombie member stays frozen: well past its session, so it is expired.
ZOMBIE_FROZEN_S = 3 * SESSION_TIMEOUT_MS / 1000


@dataclass(frozen=True, slots=True)
class WorkloadSettings:
    bootstrap: str
    stop_at_s: float  # virtual time at which the clients stop working
    rate_per_s: float = 5.0  # records per second per producer
    think_s: float = 1.0  # what a consumer spends on a batch before it polls again
    freeze_at_s: float | None = None  # when the doomed member freezes (None: never)
    tiered: bool = False  # --tiered: a producer and a reader of the tiered topic
    sasl_bootstrap: str | None = None  # the SASL listener's: the SASL clients join (None: not)


def _stamp() -> int:
    """A record timestamp from the simulation's wall clock (aiokafka's own is bound at import):
    the epoch `determinism` pins plus the loop's virtual time."""
    return int((DEFAULT_EPOCH_S + asyncio.get_running_loop().time()) * 1000)


def _error_name(exc: BaseException) -> str:
    return type(exc).__name__


async def _pause(rng: random.Random, rate_per_s: float) -> None:
    await asyncio.sleep(rng.expovariate(rate_per_s))


async def produce_acks_all(
    settings: WorkloadSettings, history: History, rng: random.Random, topic: str = EVENTS
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap, acks="all", enable_idempotence=True
    )
    await producer.start()
    n = 0
    try:
        while asyncio.get_running_loop().time() < settings.stop_at_s:
            value = b"a-%d" % n
            n += 1
            try:
                meta = await producer.send_and_wait(
                    topic, value, key=b"%d" % rng.randrange(16), timestamp_ms=_stamp()
                )
                history.acked_all[(meta.topic, meta.partition, meta.offset)] = value
            except KafkaError as exc:
                history.send_failures[f"acks=all {_error_name(exc)}"] += 1
            await _pause(rng, settings.rate_per_s)
    finally:
        await producer.stop()


async def produce_acks_one(
    settings: WorkloadSettings, history: History, rng: random.Random
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks=1)
    await producer.start()
    n = 0
    try:
        while asyncio.get_running_loop().time() < settings.stop_at_s:
            try:
                await producer.send_and_wait(EVENTS, b"b-%d" % n, timestamp_ms=_stamp())
                history.acked_one += 1
            except KafkaError as exc:
                history.send_failures[f"acks=1 {_error_name(exc)}"] += 1
            n += 1
            await _pause(rng, settings.rate_per_s)
    finally:
        await producer.stop()


class _Recorder(ConsumerRebalanceListener):  # type: ignore[misc]
    """Writes each assignment a member is told of, with its generation, into the history
    (and starts the member's next run of reads: `EventLog.new_run`)."""

    def __init__(
        self, history: History, group: str, consumer: Callable[[], Any], name: str
    ) -> None:
        self._history = history
        self._group = group
        self._consumer = consumer
        self._name = name

    async def on_partitions_revoked(self, revoked: Any) -> None:
        return None

    async def on_partitions_assigned(self, assigned: Any) -> None:
        coordinator = self._consumer()._coordinator
        parts = tuple(sorted((tp.topic, tp.partition) for tp in assigned))
        self._history.events.new_run(self._name)
        self._history.assignments.append(
            Assignment(self._group, coordinator.generation, coordinator.member_id, parts)
        )


def _new_consumer(settings: WorkloadSettings, group: str | None, **extra: Any) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=1000,
        **extra,
    )


def _note_poll(
    history: History,
    name: str,
    consumer: AIOKafkaConsumer,
    batch: dict[TopicPartition, Any],
    read_committed: bool = False,
) -> None:
    """What a poll gave: each record, and every assigned partition's high watermark (an
    empty answer carries one too: a high watermark that moved back below the consumer's
    position gives no records, and is exactly what must be seen)."""
    now = asyncio.get_running_loop().time()
    for tp, records in batch.items():
        for r in records:
            if r.value is not None:
                history.read(name, tp.topic, tp.partition, r.offset, r.value)
                key = (tp.topic, tp.partition, r.offset)
                history.events.read(name, key, r.value, now, read_committed=read_committed)
    for tp in sorted(consumer.assignment()):
        high = consumer.highwater(tp)
        if high is not None:
            history.high_watermark(name, tp.topic, tp.partition, high)


@dataclass
class Zombie:
    """The doomed member's freeze: between a poll and its commit, for ``frozen_s``, from
    ``at_s`` on (once). Its network is cut meanwhile, as a paused process's would be."""

    at_s: float
    history: History
    frozen_s: float = ZOMBIE_FROZEN_S
    done: bool = False

    async def maybe_freeze(self, name: str) -> None:
        loop = asyncio.get_running_loop()
        if self.done or loop.time() < self.at_s:
            return
        self.done = True
        network = getattr(loop, "network", None)
        if network is not None:
            network.isolate(name)
        self.history.faults.append(f"{loop.time():.3f}s freeze member {name}")
        await asyncio.sleep(self.frozen_s)
        if network is not None:
            network.rejoin(name)
        self.history.faults.append(f"{loop.time():.3f}s thaw member {name}")


async def group_member(
    settings: WorkloadSettings, history: History, name: str, zombie: Zombie | None = None
) -> None:
    """A member of ``sim-group`` committing after every batch; a zombie once when told."""
    consumer = _new_consumer(settings, GROUP)
    consumer.subscribe([EVENTS], listener=_Recorder(history, GROUP, lambda: consumer, name))
    await consumer.start()
    try:
        await _consume_and_commit(settings, history, name, consumer, zombie)
    finally:
        await stop_consumer(consumer)


async def _consume_and_commit(
    settings: WorkloadSettings,
    history: History,
    name: str,
    consumer: AIOKafkaConsumer,
    zombie: Zombie | None,
) -> None:
    loop = asyncio.get_running_loop()
    while loop.time() < settings.stop_at_s:
        try:
            batch = await consumer.getmany(timeout_ms=500, max_records=50)
            _note_poll(history, name, consumer, batch)
            polled_in = consumer._coordinator.generation
            if batch and zombie is not None:
                await zombie.maybe_freeze(name)
            if batch:
                offsets = {tp: records[-1].offset + 1 for tp, records in batch.items()}
                sent, sent_in = loop.time(), consumer._coordinator.generation
                await consumer.commit(offsets)
                span = (sent, loop.time())
                _note_commit(history, name, offsets, (polled_in, sent_in, span), consumer)
        except KafkaError as exc:
            history.client_errors[f"{name} {_error_name(exc)}"] += 1
        await asyncio.sleep(settings.think_s)


def _note_commit(
    history: History,
    name: str,
    offsets: dict[TopicPartition, int],
    polled: tuple[int, int, tuple[float, float]],
    consumer: AIOKafkaConsumer,
) -> None:
    """Note an acknowledged commit for the never-back checker, unless aiokafka rejoined
    between the poll and the commit: the commit then went out in the new generation, by a
    member that owns the partitions, with offsets polled in an earlier one. Kafka accepts
    that (it may move a committed offset back: the application's choice, not a broker bug),
    so it is counted apart. A stale commit accepted in its own old generation is still
    noted and caught (the planted ``stale-member-commit-accepted``), also when aiokafka
    learnt of its expiry (generation -1) while the commit was out: a zombie's heartbeat and
    commit leave together when it thaws. ``polled`` is the generation of the poll, the one
    when the commit was sent, and the commit's (sent, acknowledged) span."""
    polled_in, sent_in, span = polled
    now_in = consumer._coordinator.generation
    if sent_in != polled_in or now_in not in (polled_in, NO_GENERATION):
        history.client_errors[f"{name} committed an earlier generation's poll"] += 1
        return
    for tp, offset in offsets.items():
        history.committed(GROUP, tp.topic, tp.partition, offset, span)


#: aiokafka's generation once it learnt it is no longer a member (``reset_generation``).
NO_GENERATION = -1


#: the transform's transactional.id
TRANSFORM_ID = "sim-transform"


async def transform(settings: WorkloadSettings, history: History) -> None:
    """Consume-transform-produce in transactions; every ABORT_EVERY-th one aborted on purpose."""
    consumer = _new_consumer(settings, TRANSFORM_GROUP, isolation_level="read_committed")
    # Where each partition's last committed transaction left it. After an abort or a
    # rebalance the transform (the group's only member) goes back there, not to what
    # OffsetFetch says: aiokafka does not ask for stable offsets (OffsetFetch require_stable,
    # KIP-447), so the broker may still answer the offsets from before the last commit, whose
    # marker is on its way — a duplicate Kafka would give aiokafka too.
    committed: dict[TopicPartition, int] = {}
    # partitions it has read from: a rewind of one with no commit yet goes to the start
    touched: set[TopicPartition] = set()
    resume = _Resume(lambda: history.events.new_run("transform"))
    consumer.subscribe([EVENTS], listener=resume)
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, transactional_id=TRANSFORM_ID)
    await consumer.start()
    await producer.start()
    loop = asyncio.get_running_loop()
    n = 0
    while loop.time() < settings.stop_at_s:
        try:
            if resume.reassigned:
                resume.reassigned = False
                await _rewind(consumer, committed, touched, history)
            batch = await consumer.getmany(timeout_ms=500, max_records=50)
            _note_poll(history, "transform", consumer, batch, read_committed=True)
            if not batch:
                continue
            touched.update(batch)
            n += 1
            offsets = await _transform_batch(producer, batch, history, n % ABORT_EVERY == 0)
            committed.update(offsets)
            await asyncio.sleep(settings.think_s)
        except _Rewind:
            await _rewind(consumer, committed, touched, history)
        except KafkaError as exc:
            history.client_errors[f"transform {_error_name(exc)}"] += 1
            aborted = await _abort_after_error(producer, history)
            settle_open_txns(history.events, aborted)
            renewed = await renewed_if_fatal(
                producer, settings.bootstrap, TRANSFORM_ID, settings.stop_at_s
            )
            if renewed is not producer:
                history.client_errors["transform producer replaced after a fatal error"] += 1
                producer = renewed
            # the last commit's outcome is unknown: let its markers land, then ask the broker
            await asyncio.sleep(5)
            committed.clear()
            await _rewind(consumer, committed, touched, history)
    await producer.stop()
    await stop_consumer(consumer)


async def _transform_batch(
    producer: AIOKafkaProducer, batch: dict[TopicPartition, Any], history: History, abort: bool
) -> dict[TopicPartition, int]:
    values = [
        b"out:%d:%d" % (tp.partition, record.offset)
        for tp, records in batch.items()
        for record in records
    ]
    txn = history.events.begin(f"sim-transform#{len(history.events.txns)}")
    txn.reads = [(tp.topic, tp.partition, r.offset) for tp, rs in batch.items() for r in rs]
    await producer.begin_transaction()
    sent = [(await producer.send(OUTPUT, v, timestamp_ms=_stamp()), v) for v in values]
    if abort:
        values = [b"aborted:" + v for v in values]
        for value in values:
            sent.append((await producer.send(OUTPUT, value, timestamp_ms=_stamp()), value))
        await producer.abort_transaction()
        note_writes(txn, sent, "aborted")
        history.aborted_values.update(values)
        history.transactions["aborted on purpose"] += 1
        raise _Rewind()
    offsets = {tp: records[-1].offset + 1 for tp, records in batch.items()}
    await producer.send_offsets_to_transaction(offsets, TRANSFORM_GROUP)
    txn.end_sent_at_s = asyncio.get_running_loop().time()
    note_writes(txn, sent, "open")
    await producer.commit_transaction()
    note_writes(txn, sent, "committed")
    history.transactions["committed"] += 1
    return offsets


class _Resume(ConsumerRebalanceListener):  # type: ignore[misc]
    """Notes a (re)assignment; the transform then goes back to its own committed positions.

    Not in the callback itself: aiokafka runs it while the transform may be awaiting a
    commit, whose offsets are not in ``committed`` yet. The transform's next reads are a
    new run at once (``on_assigned``): aiokafka resumes the new assignment at the group's
    committed offsets before the transform's seek."""

    def __init__(self, on_assigned: Callable[[], None]) -> None:
        self.reassigned = False
        self._on_assigned = on_assigned

    async def on_partitions_revoked(self, revoked: Any) -> None:
        return None

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.reassigned = True
        self._on_assigned()


class _Rewind(Exception):
    """Go back to where the last committed transaction left each partition."""


async def _abort_after_error(producer: AIOKafkaProducer, history: History) -> bool:
    if producer._txn_manager is not None and producer._txn_manager.is_in_transaction():
        try:
            await producer.abort_transaction()
            history.transactions["aborted after an error"] += 1
            return True
        except KafkaError as exc:
            history.client_errors[f"transform abort {_error_name(exc)}"] += 1
    return False


async def _rewind(
    consumer: AIOKafkaConsumer,
    committed: dict[TopicPartition, int],
    touched: set[TopicPartition],
    history: History,
) -> None:
    """Back to where the last committed transaction left each partition: its own record,
    else the group's committed offset, else -- for a partition it read with nothing
    committed yet (its first transaction aborted) -- the start, as auto.offset.reset
    'earliest' would. aiokafka's ``seek_to_committed`` leaves a partition without a commit
    where it is, past the aborted records (campaign seed 98: 21 inputs never transformed)."""
    starts = {}
    try:
        for tp in consumer.assignment():
            if tp in committed:
                consumer.seek(tp, committed[tp])
                starts[(tp.topic, tp.partition)] = committed[tp]
                continue
            offset = await consumer.committed(tp)  # what seek_to_committed asks, and does
            if offset and offset > 0:
                consumer.seek(tp, offset)
            elif tp in touched:
                await consumer.seek_to_beginning(tp)
        history.events.new_run("transform", starts)
    except KafkaError as exc:
        history.events.new_run("transform")
        history.client_errors[f"transform seek {_error_name(exc)}"] += 1


async def watch_output(settings: WorkloadSettings, history: History) -> None:
    """A read_committed reader of the transform's output, recording values and watermarks."""
    consumer = _new_consumer(settings, None, isolation_level="read_committed")
    await consumer.start()
    partitions = await _wait_for_partitions(consumer, OUTPUT)
    consumer.assign(partitions)
    loop = asyncio.get_running_loop()
    while loop.time() < settings.stop_at_s:
        try:
            batch = await consumer.getmany(timeout_ms=500)
        except KafkaError as exc:
            history.client_errors[f"watcher {_error_name(exc)}"] += 1
            continue
        _note_poll(history, "watcher", consumer, batch, read_committed=True)
        for records in batch.values():
            history.read_committed_values.extend(r.value for r in records if r.value is not None)
    await stop_consumer(consumer)


async def _wait_for_partitions(consumer: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
    while True:
        found = consumer.partitions_for_topic(topic)
        if found:
            return [TopicPartition(topic, p) for p in sorted(found)]
        await consumer._client.force_metadata_update()
        await asyncio.sleep(0.5)


async def run_clients(settings: WorkloadSettings, history: History, rng: random.Random) -> None:
    """Every client of the mix, each in its own task and client node, until ``stop_at_s``."""
    tasks: list[asyncio.Task[None]] = []

    def start(name: str, coro: Any) -> None:
        with client_node(name):
            tasks.append(asyncio.get_running_loop().create_task(coro, name=f"sim-{name}"))

    zombie = None if settings.freeze_at_s is None else Zombie(settings.freeze_at_s, history)
    start("producer-all", produce_acks_all(settings, history, random.Random(rng.random())))
    start("producer-one", produce_acks_one(settings, history, random.Random(rng.random())))
    start("member-1", group_member(settings, history, "member-1"))
    start("member-2", group_member(settings, history, "member-2"))
    start("doomed", group_member(settings, history, "doomed", zombie))
    start("transform", transform(settings, history))
    start("watcher", watch_output(settings, history))
    start_more_clients(start, settings, history, rng)
    for name, coro in protocol_clients(  # KIP-848 members and share consumers
        bootstrap=settings.bootstrap, now_s=asyncio.get_running_loop().time(),
        stop_at_s=settings.stop_at_s, events_topic=EVENTS, output_topic=OUTPUT,
        history=history, rng=rng,
    ):  # fmt: skip
        start(name, coro)
    if settings.sasl_bootstrap is not None:
        for name, coro in sasl_clients(
            bootstrap=settings.bootstrap, sasl_bootstrap=settings.sasl_bootstrap,
            now_s=asyncio.get_running_loop().time(), stop_at_s=settings.stop_at_s,
            history=history, rng=random.Random(rng.random()),
        ):  # fmt: skip
            start(name, coro)
    if settings.tiered:
        tiered_rng = random.Random(rng.random())
        start("producer-tiered", produce_acks_all(settings, history, tiered_rng, TIERED))
        start("tiered-reader", read_tiered_from_start(settings, history))
    streams_rng = random.Random(rng.random())
    streams = run_streams_app(settings.bootstrap, settings.stop_at_s, history, streams_rng, 3)
    start("streams-app", streams)  # 3: the partitions `scenario` gives sim-events
    await asyncio.gather(*tasks)


#: The tiered topic's configs: small segments that leave the local logs once copied.
TIERED_TOPIC_CONFIGS = {
    "remote.storage.enable": "true",
    "segment.bytes": "1024",
    "local.retention.bytes": "1",
}


async def create_tiered_topic(bootstrap: str, partitions: int, replication: int) -> None:
    """The tiered topic, created by a CreateTopics request as an application creates it: a
    capture of the run holds the request, so its what-if replay creates the topic tiered
    (topics created without a request reach a replay without their configs)."""
    with client_node("admin"):
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
    try:
        topic = NewTopic(TIERED, partitions, replication, topic_configs=TIERED_TOPIC_CONFIGS)
        await admin.create_topics([topic])
    finally:
        await admin.close()


def start_more_clients(
    start: Callable[[str, Any], None], settings: WorkloadSettings, history: History,
    rng: random.Random,
) -> None:  # fmt: skip
    """The clients of `simulation.clients` (issue 33): a transactions-v2 pipeline from
    ``sim-out`` to ``sim-txn``, a DeleteRecords caller on ``sim-events`` below both
    groups' commits, a producer throttled by a ``producer_byte_rate`` quota."""
    until = settings.stop_at_s
    start("tv2", tv2_pipeline(settings.bootstrap, until, history, OUTPUT, 2))
    deleter_rng, throttled_rng = random.Random(rng.random()), random.Random(rng.random())
    groups = (GROUP, TRANSFORM_GROUP)
    deleter = delete_records_now_and_then(
        settings.bootstrap, until, history, deleter_rng, EVENTS, groups
    )
    start("deleter", deleter)
    start(
        "throttled",
        produce_throttled(
            settings.bootstrap, until, history, throttled_rng, EVENTS, settings.rate_per_s / 4
        ),
    )


async def read_tiered_from_start(settings: WorkloadSettings, history: History) -> None:
    """Read the tiered topic from its start to its end, again and again: below the local log
    start every fetch is the remote tier's (DelayedRemoteFetch), faults or not. Every other
    pass finds the start by time (ListOffsets by timestamp: the tier's search parks in
    DelayedRemoteListOffsets), the others by ``seek_to_beginning``."""
    consumer = _new_consumer_at(settings.bootstrap, None, "read_uncommitted")
    await consumer.start()
    try:
        partitions = await _wait_for_partitions(consumer, TIERED)
        consumer.assign(partitions)
        passes = 0
        while asyncio.get_running_loop().time() < settings.stop_at_s:
            passes += 1
            try:
                await _seek_to_start(consumer, partitions, by_time=passes % 2 == 0)
                ends = await consumer.end_offsets(partitions)
                while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
                    if asyncio.get_running_loop().time() >= settings.stop_at_s:
                        break
                    await consumer.getmany(timeout_ms=1000)
            except KafkaError as exc:
                history.client_errors[f"tiered-reader {_error_name(exc)}"] += 1
            await asyncio.sleep(settings.think_s)
    finally:
        await stop_consumer(consumer)


async def _seek_to_start(
    consumer: AIOKafkaConsumer, partitions: list[TopicPartition], *, by_time: bool
) -> None:
    if not by_time:
        await consumer.seek_to_beginning(*partitions)
        return
    found = await consumer.offsets_for_times(dict.fromkeys(partitions, 0))
    for tp in partitions:
        at = found.get(tp)
        if at is None:  # nothing written yet
            await consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, at.offset)


async def read_final_state(bootstrap: str, history: History, *, tiered: bool = False) -> None:
    """Everything in both topics (to their ends) and the transform's committed offsets; with
    ``tiered``, the tiered topic from offset 0 too (most of it from the remote tier)."""
    everything = _new_consumer_at(bootstrap, None, "read_uncommitted")
    committed = _new_consumer_at(bootstrap, None, "read_committed")
    offsets = _new_consumer_at(bootstrap, TRANSFORM_GROUP, "read_committed")
    for consumer in (everything, committed, offsets):
        await consumer.start()
    try:
        history.final_records[EVENTS] = await _read_to_end(everything, EVENTS)
        history.final_records[OUTPUT] = await _read_to_end(committed, OUTPUT)
        history.final_isolation.update({EVENTS: False, OUTPUT: True, TIERED: False})
        history.final_records[TXN_TOPIC] = await _read_final(bootstrap, TXN_TOPIC, "read_committed")
        history.final_isolation[TXN_TOPIC] = True
        if history.protocol.sasl.topic:  # the SASL clients ran (read here as ANONYMOUS)
            history.final_records[SASL_TOPIC] = await _read_final(
                bootstrap, SASL_TOPIC, "read_uncommitted"
            )
            history.final_isolation[SASL_TOPIC] = False
        if tiered:  # a consumer of its own: one assigned elsewhere asks no other metadata
            reader = _new_consumer_at(bootstrap, None, "read_uncommitted")
            await reader.start()
            try:
                history.final_records[TIERED] = await _read_to_end(reader, TIERED)
            finally:
                await stop_consumer(reader)
        for tp in await _wait_for_partitions(offsets, EVENTS):
            offset = await offsets.committed(tp)
            if offset is not None:
                history.final_committed[(TRANSFORM_GROUP, tp.topic, tp.partition)] = offset
    finally:
        for consumer in (everything, committed, offsets):
            await stop_consumer(consumer)


async def _read_final(bootstrap: str, topic: str, isolation: str) -> list[tuple[int, int, bytes]]:
    """A topic read to its end by a consumer of its own (one assigned elsewhere asks no
    other topic's metadata)."""
    reader = _new_consumer_at(bootstrap, None, isolation)
    await reader.start()
    try:
        return await _read_to_end(reader, topic)
    finally:
        await stop_consumer(reader)


def _new_consumer_at(bootstrap: str, group: str | None, isolation: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level=isolation,
    )


async def _read_to_end(consumer: AIOKafkaConsumer, topic: str) -> list[tuple[int, int, bytes]]:
    partitions = await _wait_for_partitions(consumer, topic)
    consumer.assign(partitions)
    await consumer.seek_to_beginning(*partitions)
    ends = await consumer.end_offsets(partitions)
    records: list[tuple[int, int, bytes]] = []
    while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
        batch = await consumer.getmany(timeout_ms=1000)
        for tp, found in batch.items():
            records.extend((tp.partition, r.offset, r.value) for r in found if r.value is not None)
    return sorted(records)
