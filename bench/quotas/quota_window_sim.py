"""What Kafka's quota algorithm itself allows a greedy client: figures, no broker, no clock.

A client that always has data to send (aiokafka's or librdkafka's producer under load)
meets ``QuotaSensor`` (``broker/quota/sampled_rate.py``, Kafka's ``Rate`` over
``quota.window.num`` + 1 windows and ``QuotaUtils.throttleTime``) on virtual time: it
sends a request of ``--request-bytes`` every ``--service-ms`` unless muted, and a
throttled response mutes it for the throttle time (KIP-219), as the broker does. So the
rates printed are the algorithm's, not the event loop's: what Kafka itself would let the
client do, to hold ``bench/quotas/quota_bench.py``'s measured rates against.

Printed: the rate over the whole run, over the run after the burst (``--burst-s``), and
the highest and lowest rate over any ``--span-s`` interval starting after the burst
(sampled every 100 ms), each as a ratio of the quota.

    .venv/bin/python -m bench.quotas.quota_window_sim [--quota 1000000] [--seconds 60]
        [--request-bytes 16500] [--service-ms 2] [--span-s 10] [--burst-s 11] [--fetch]
"""

from __future__ import annotations

import argparse
import bisect

from broker.quota.sampled_rate import MetricConfig, QuotaSensor


def simulate(
    quota: float, seconds: float, request_bytes: int, service_ms: int, fetch: bool = False
) -> list[tuple[int, int]]:
    """The (time ms, bytes) of every request the broker records (a throttled fetch's
    bytes are taken back out and not sent, as Kafka's ``unrecordQuotaSensor``)."""
    sensor = QuotaSensor(MetricConfig(samples=11, window_ms=1000, quota=quota), 0)
    events: list[tuple[int, int]] = []
    now = 0
    end = int(seconds * 1000)
    while now < end:
        measured = sensor.record(request_bytes, now)
        throttle = sensor.throttle_time_ms(measured, now)
        if fetch and throttle:
            sensor.rate.record(sensor.config, -request_bytes, now)
        else:
            events.append((now, request_bytes))
        # Muted for the throttle time (+1: the reaper's whole-millisecond tick), then
        # the next request takes the client's service time to arrive and be handled.
        now += (throttle + 1 if throttle else 0) + service_ms
    return events


def span_rates(
    events: list[tuple[int, int]], start_ms: int, end_ms: int, span_ms: int
) -> list[float]:
    times = [t for t, _ in events]
    cumulative = [0]
    for _, n in events:
        cumulative.append(cumulative[-1] + n)
    rates = []
    for begin in range(start_ms, end_ms - span_ms + 1, 100):
        lo = bisect.bisect_left(times, begin)
        hi = bisect.bisect_left(times, begin + span_ms)
        rates.append((cumulative[hi] - cumulative[lo]) / (span_ms / 1000))
    return rates


def main(args: argparse.Namespace) -> None:
    events = simulate(args.quota, args.seconds, args.request_bytes, args.service_ms, args.fetch)
    end_ms = int(args.seconds * 1000)
    burst_ms = int(args.burst_s * 1000)
    total = sum(n for _, n in events)
    steady = sum(n for t, n in events if t >= burst_ms)
    spans = span_rates(events, burst_ms, end_ms, int(args.span_s * 1000))
    q = args.quota
    print(
        f"# quota {q:.0f} B/s, requests of {args.request_bytes} B every {args.service_ms} ms "
        f"unless muted, {args.seconds:.0f} s virtual"
    )
    print(f"all             {total / args.seconds / q:6.3f} x quota")
    steady_rate = steady / (args.seconds - args.burst_s)
    print(f"after {args.burst_s:>4.0f} s      {steady_rate / q:6.3f} x quota")
    print(f"any {args.span_s:.0f} s: max    {max(spans) / q:6.3f} x quota")
    print(f"any {args.span_s:.0f} s: min    {min(spans) / q:6.3f} x quota")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quota", type=float, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--request-bytes", type=int, default=16_500)
    parser.add_argument("--service-ms", type=int, default=2)
    parser.add_argument("--fetch", action="store_true", help="a consumer's fetches")
    parser.add_argument("--span-s", type=float, default=10.0)
    parser.add_argument("--burst-s", type=float, default=11.0)
    main(parser.parse_args())
