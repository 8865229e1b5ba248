"""The replay on a real Spark cluster: a standalone master and two workers, against local mode.

    .venv/bin/python -m bench.replay_whatif.replay_cluster_bench [--duration 15] [--workers 2]
        [--cores 2] [--keep DIR]

1. A capture: ``minikafka serve --brokers 3 --capture-dir`` and ``minikafka workload
   --duration`` against it (aiokafka producers acks=1 and acks=all, a consumer group, a
   member that dies), then the cluster stops.
2. A Spark standalone cluster from PySpark's own scripts, on 127.0.0.1: a master and
   ``--workers`` workers, each started by ``sbin/spark-daemon.sh`` of the pyspark
   package (the daemon script that Spark's ``start-master.sh``/``start-worker.sh``
   wrap; the pip package ships only it). ``SPARK_HOME`` is the pyspark package;
   ``SPARK_LOCAL_IP=127.0.0.1``; ``PYSPARK_PYTHON`` this interpreter; the work, log and
   pid directories under a temporary directory (the package directory may be
   read-only). The bench waits until the master's status page lists every worker.
3. The same capture replayed twice, each against a fresh 3-broker target the replay
   starts itself (``--target-brokers 3``): once in local mode, once with ``--master
   spark://127.0.0.1:PORT`` (the executors are the workers' JVMs and Python workers;
   the replay ships ``protocol`` and ``spark_jobs`` to them).
4. One table: per mode, the replay tasks, requests replayed and skipped, errors,
   schedule lag p50/p99, and client Produce and Fetch p50 both as each target broker
   served them (Kafka's TotalTimeMs, from the target's capture) and as the replay client
   saw them; the captured p50 beside them. Then the check that the cluster replay
   matches local mode: the same requests per API, the same skips, no errors, and every
   client request answered in both. The figures themselves differ by run; a timing is a
   figure, not a pass/fail.

Exit status 1 only when the check fails (the cluster replayed something else); the
Spark daemons are stopped whatever happens.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.lib.stats import median, percentile
from protocol.capture import CaptureRequest
from protocol.capture_files import read_capture
from testkit.spark_standalone import driver_env, standalone_cluster

ROOT = Path(__file__).resolve().parents[2]


def capture(directory: Path, duration_s: int, log: Path) -> None:
    minikafka = [sys.executable, "-m", "minikafka", "--log-level", "WARNING"]
    serve = [*minikafka, "serve", "--brokers", "3", "--port", "0"]
    with open(log, "w") as err:
        server = subprocess.Popen(
            [*serve, "--capture-dir", str(directory)], stdout=subprocess.PIPE, stderr=err, text=True
        )
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            bootstrap = line.split("bootstrap=", 1)[1].split()[0]
            workload = [*minikafka, "workload", "--bootstrap", bootstrap]
            subprocess.run(
                [*workload, "--duration", str(duration_s)],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=err,
                timeout=duration_s + 120,
            )
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)


def replay(capture_dir: Path, out: Path, master: str, log: Path) -> float:
    argv = [sys.executable, "-m", "spark_jobs.replay", "--capture", str(capture_dir)]
    argv += ["--target-brokers", "3", "--out", str(out), "--master", master]
    env = driver_env()
    began = time.monotonic()
    with open(log, "w") as err:
        subprocess.run(argv, check=True, stdout=err, stderr=err, env=env, timeout=900, cwd=ROOT)
    return time.monotonic() - began


def summarise(out: Path, elapsed_s: float) -> dict[str, Any]:
    import pyarrow.parquet as pq

    rows = pq.read_table(out).to_pylist()
    run = json.loads((out / "_replay.json").read_text())
    served: dict[tuple[int, str, int], CaptureRequest] = {}
    for record in read_capture(out / "_target_capture"):
        if isinstance(record, CaptureRequest):
            key = (record.broker_id, record.connection_id.rsplit("-", 1)[0], record.correlation_id)
            served[key] = record
    sent = [r for r in rows if r["traffic"] == "client" and r["actual_send_ms"] is not None]
    summary: dict[str, Any] = {
        "master": run["master"],
        "tasks": run["tasks"],
        "elapsed_s": elapsed_s,
        "per_api": collections.Counter(r["api_name"] for r in rows),
        "skipped": collections.Counter(r["api_name"] for r in rows if r["replay_skip"]),
        "errors": sum(1 for r in rows if r["replay_error"]),
        "sent": len(sent),
        "unanswered": sum(
            1 for r in sent if r["response_ms"] is None and r["api_name"] != "Produce"
        ),
        "lag": [r["actual_send_ms"] - r["planned_send_ms"] for r in sent],
    }
    for api in ("Produce", "Fetch"):
        mine = [r for r in sent if r["api_name"] == api]
        broker = [
            served[key].total_time_ms
            for r in mine
            if (key := (r["replay_broker_id"], r["replay_connection"], r["replay_correlation_id"]))
            in served
        ]
        summary[f"{api}_captured"] = median([r["captured_total_ms"] for r in mine])
        summary[f"{api}_broker"] = median(broker)
        summary[f"{api}_client"] = median([r["response_ms"] for r in mine if r["response_ms"]])
    return summary


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=int, default=15, help="workload seconds (15)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=2, help="cores per worker (2)")
    parser.add_argument("--keep", type=Path, default=None, help="keep everything in DIR")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="replay-cluster-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    capture_dir = base / "capture"
    print(f"capturing a {args.duration} s workload on 3 brokers ...", flush=True)
    capture(capture_dir, args.duration, base / "capture.log")
    summaries = []
    print("replay, local mode ...", flush=True)
    local_s = replay(capture_dir, base / "local", "local[*]", base / "replay-local.log")
    summaries.append(summarise(base / "local", local_s))
    print(f"starting a standalone master and {args.workers} workers on 127.0.0.1 ...")
    began = time.monotonic()
    with standalone_cluster(base / "spark", args.workers, args.cores, "2g") as cluster:
        took = time.monotonic() - began
        print(f"  {cluster.url}: {cluster.alive_workers()} workers in {took:.1f} s")
        print(f"replay, --master {cluster.url} ...", flush=True)
        cluster_s = replay(capture_dir, base / "cluster", cluster.url, base / "replay-cluster.log")
        summaries.append(summarise(base / "cluster", cluster_s))
    header = (
        f"{'master':28} {'tasks':>5} {'sent':>6} {'skipped':>7} {'errors':>6} {'lag p50':>8} "
        f"{'lag p99':>8} {'Produce p50 cap/broker/client':>30} {'Fetch p50 cap/broker/client':>28} "
        f"{'elapsed':>8}"
    )
    print(header)
    for s in summaries:
        produce = "/".join(fmt(s[f"Produce_{k}"]) for k in ("captured", "broker", "client"))
        fetch = "/".join(fmt(s[f"Fetch_{k}"]) for k in ("captured", "broker", "client"))
        print(
            f"{s['master']:28} {s['tasks']:>5} {s['sent']:>6} {sum(s['skipped'].values()):>7} "
            f"{s['errors']:>6} {fmt(median(s['lag'])):>8} {fmt(percentile(s['lag'], 99)):>8} "
            f"{produce:>30} {fetch:>28} {s['elapsed_s']:>7.1f}s"
        )
    local, remote = summaries
    problems = []
    if local["per_api"] != remote["per_api"]:
        problems.append(f"requests per API differ: {local['per_api']} vs {remote['per_api']}")
    if local["skipped"] != remote["skipped"]:
        problems.append("skips differ")
    if local["errors"] or remote["errors"]:
        problems.append(f"replay errors: local {local['errors']}, cluster {remote['errors']}")
    if local["sent"] != remote["sent"] or local["unanswered"] or remote["unanswered"]:
        problems.append("not every client request was sent and answered in both")
    for api in ("Produce", "Fetch"):
        a, b = local[f"{api}_broker"], remote[f"{api}_broker"]
        if a and b:
            print(f"{api} p50 (broker) cluster / local: {b / a:.2f}")
    if problems:
        print("the cluster replay does NOT match local mode: " + "; ".join(problems))
        return 1
    print("the cluster replay matches local mode: same requests per API, same skips, no errors")
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
