"""How long a consumer group's regex subscriptions take to resolve (KIP-848,
``broker/group/consumer/regex_subscriptions.py``): one RE2 ``Set`` pass over the topic
names, as the heartbeat that needs it runs it, against regex by regex; and the cost of
a heartbeat when the topics image did not change. Prints figures, asserts nothing.

    .venv/bin/python -m bench.groups.regex_bench [--topics 10000] [--regexes 1 10] [--rounds 20]
"""

from __future__ import annotations

import argparse
import time
import uuid

from broker.cluster.cluster_metadata import TopicInfo
from broker.group.consumer import ConsumerGroup
from broker.group.consumer.regex_subscriptions import RegexResolver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10000)
    parser.add_argument("--regexes", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    # One topic in ten is an "orders-N" topic; the regexes select among those.
    topics = {
        (f"orders-{i}" if i % 10 == 0 else f"events-{i}"): TopicInfo(f"t{i}", uuid.uuid4(), [], {})
        for i in range(args.topics)
    }
    names = [n for n, info in topics.items() if not info.is_internal]
    resolver = RegexResolver()
    print(f"{'regexes':>8} {'set pass (ms)':>14} {'one by one (ms)':>16} {'matched':>8}")
    for count in args.regexes:
        regexes = ["^orders-.*"] + [f"^orders-{i}.*" for i in range(1, count)]
        start = time.perf_counter()
        for _ in range(args.rounds):
            resolved = resolver.resolve_all(regexes, names)
        set_ms = (time.perf_counter() - start) / args.rounds * 1000
        start = time.perf_counter()
        for _ in range(args.rounds):
            for regex in regexes:
                resolver.resolve(regex, names)
        single_ms = (time.perf_counter() - start) / args.rounds * 1000
        matched = len(set().union(*resolved.values()))
        print(f"{count:>8} {set_ms:>14.2f} {single_ms:>16.2f} {matched:>8}")
    group = ConsumerGroup("g")
    resolver.maybe_refresh(group, {"^orders-.*"}, topics, 0)
    beats = 10000
    start = time.perf_counter()
    for _ in range(beats):
        resolver.maybe_refresh(group, {"^orders-.*"}, topics, 0)
    per_us = (time.perf_counter() - start) / beats * 1e6
    print(f"a heartbeat with the topics image unchanged: {per_us:.2f} us")


if __name__ == "__main__":
    main()
