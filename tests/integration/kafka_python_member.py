"""One kafka-python group member in a process of its own (run by the group tests).

``python kafka_python_member.py BOOTSTRAP TOPIC GROUP CLIENT_ID`` subscribes, waits until
its metadata holds TOPIC, polls, and prints its assignment as a JSON list on stdout each
time it changes; it leaves the group and exits when its stdin closes. Separate processes,
as in real deployments: several kafka-python consumers sharing the broker's interpreter
contend for one GIL.

Why it waits for the topic's metadata before its first ``poll`` (kafka-python 3.0.x, see
the docstring of ``test_two_kafka_python_consumers_split_partitions``): a leader that
assigns before it knows the topic's partitions rejoins later through
``ConsumerCoordinator.need_rejoin``'s snapshot check, and a rejoin begun that way is
dropped when it outlives the ``poll`` that started it — the member then never heartbeats
or joins again. ``KafkaConsumer.topics()`` always sends a Metadata request; its answer
runs the coordinator's metadata listener with the subscription already in place, so every
assignment this member makes as leader uses the topic's real partitions.
"""

from __future__ import annotations

import json
import sys
import threading

from kafka import KafkaConsumer


def main() -> None:
    bootstrap, topic, group, client_id = sys.argv[1:5]
    stop = threading.Event()

    def wait_for_stdin_to_close() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=wait_for_stdin_to_close, daemon=True).start()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=client_id,
        # A loaded machine can starve a process for seconds: a longer session keeps a
        # slow member in the group instead of evicting it and rebalancing again.
        session_timeout_ms=20000,
        heartbeat_interval_ms=300,
        auto_offset_reset="earliest",
    )
    last: list[int] | None = None
    try:
        while topic not in consumer.topics() and not stop.is_set():
            stop.wait(0.1)
        while not stop.is_set():
            consumer.poll(timeout_ms=100)
            now = sorted(tp.partition for tp in consumer.assignment())
            if now != last:
                print(json.dumps(now), flush=True)
                last = now
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
