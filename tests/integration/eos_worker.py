"""One exactly-once consume-transform-produce worker in a process of its own (run by
``test_exactly_once_kip848.py``).

``python eos_worker.py BOOTSTRAP GROUP SOURCE SINK TRANSACTIONAL_ID TIMEOUT_MS`` is a
confluent-kafka consumer of GROUP with ``group.protocol=consumer`` (KIP-848) and a
transactional producer of its own, in the loop of KIP-447: read a batch, write each record
to the same partition of SINK, give the batch's offsets to the transaction with the
consumer's group metadata (member id, member epoch, instance id), commit. When the
transaction must abort (the coordinator fenced this member: its epoch moved on in a
rebalance, or it is no member any more) it aborts and rewinds to the group's committed
offsets, so nothing is lost or written twice. It leaves the group and exits when its stdin
closes, printing one JSON line of what it did; the test kills one with SIGKILL to play a
crash.

A process of its own, as in real deployments (and so that it can die): several librdkafka
clients sharing the brokers' interpreter would contend for one GIL. Its producer closes
connections idle for 3 s: the way around a librdkafka 2.16 hang after the group
coordinator's broker leaves the cluster (see ``Worker.__init__``).
"""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

BATCH = 250  # records a transaction: several transactions a part, so events land between them


class Worker:
    def __init__(
        self, bootstrap: str, group: str, source: str, sink: str, txn_id: str, timeout_ms: str
    ) -> None:
        self.source, self.sink = source, sink
        self.errors: Counter[str] = Counter()
        self.committed = 0
        self.aborted = 0
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "log_level": 3,
            }
        )
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": txn_id,
                # A crashed worker's open transaction blocks the partitions it wrote until
                # the coordinator aborts it at this timeout.
                "transaction.timeout.ms": int(timeout_ms),
                # librdkafka 2.16 keeps a broker that left the cluster metadata (it
                # "decommissions" it) in its coordinator cache: when that broker was the
                # group's coordinator, the next send_offsets_to_transaction waits for it
                # to come back, forever and whatever its timeout (librdkafka issues #5511
                # and #5456; the same against Kafka). A state change of any other
                # connection makes it ask FindCoordinator again; closing idle connections
                # provides one within seconds.
                "connections.max.idle.ms": 3000,
                "log_level": 3,
            }
        )

    def run(self, stop: threading.Event) -> None:
        self.producer.init_transactions()
        self.consumer.subscribe([self.source])
        while not stop.is_set():
            records = [m for m in self.consumer.consume(BATCH, 0.1) if m.error() is None]
            if records:
                self.process(records)
        self.consumer.close()

    def process(self, records: list[Any]) -> None:
        self.producer.begin_transaction()
        nexts: dict[int, int] = {}
        for m in records:
            self.producer.produce(self.sink, m.value(), key=m.key(), partition=m.partition())
            nexts[m.partition()] = m.offset() + 1
        offsets = [TopicPartition(self.source, p, o) for p, o in sorted(nexts.items())]
        try:
            self._retrying(
                lambda: self.producer.send_offsets_to_transaction(
                    offsets, self.consumer.consumer_group_metadata()
                )
            )
            self._retrying(self.producer.commit_transaction)
            self.committed += 1
        except KafkaException as exc:
            error = exc.args[0]
            self.errors[error.name()] += 1
            if error.fatal() or not error.txn_requires_abort():
                raise
            self._retrying(self.producer.abort_transaction)
            self.aborted += 1
            self.rewind()

    def _retrying(self, call: Any) -> None:
        while True:
            try:
                call()
                return
            except KafkaException as exc:
                error = exc.args[0]
                if not error.retriable() or error.txn_requires_abort():
                    raise
                self.errors[error.name()] += 1

    def rewind(self) -> None:
        """After an abort: read again from the group's committed offsets."""
        assignment = self.consumer.assignment()
        if not assignment:
            return
        for tp in self.consumer.committed(assignment, timeout=30):
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(TopicPartition(self.source, tp.partition, offset))


def main() -> None:
    worker = Worker(*sys.argv[1:7])
    stop = threading.Event()

    def wait_for_stdin_to_close() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=wait_for_stdin_to_close, daemon=True).start()
    worker.run(stop)
    report = {"committed": worker.committed, "aborted": worker.aborted, "errors": worker.errors}
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
