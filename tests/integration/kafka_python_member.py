"""One kafka-python group member in a process of its own (run by the group tests).

``python kafka_python_member.py BOOTSTRAP TOPIC GROUP CLIENT_ID`` subscribes, polls, and
prints its assignment as a JSON list on stdout each time it changes; it leaves the group
and exits when its stdin closes. Separate processes, as in real deployments: several
kafka-python consumers sharing the broker's interpreter contend for one GIL.
"""

from __future__ import annotations

import json
import sys
import threading

from kafka import KafkaConsumer


def main() -> None:
    bootstrap, topic, group, client_id = sys.argv[1:5]
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=client_id,
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
        auto_offset_reset="earliest",
    )
    last: list[int] | None = None
    try:
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
