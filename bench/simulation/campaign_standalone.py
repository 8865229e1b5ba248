"""A campaign's seeds again on a Spark standalone cluster: the same digests as local mode?

    .venv/bin/python -m bench.simulation.campaign_standalone LOCAL_OUT [--seeds A..B]
        [--command "minikafka simulate ..."] [--check-determinism]
        [--workers 2] [--cores 1] [--out DIR]

``LOCAL_OUT`` is the ``--out`` of a campaign already run in local mode
(``minikafka simulate --seeds A..B --master 'local[2]' ... --out LOCAL_OUT``), or the lines
its driver printed (then ``--command`` gives the command). This starts a
master and ``--workers`` workers (`testkit.spark_standalone`, PySpark's own daemon script, on
127.0.0.1), runs the very command recorded in ``LOCAL_OUT/campaign.json`` with the cluster's
URL as ``--master`` (over ``--seeds`` if given: a subset of the local seeds), and prints, per
seed, whether the two digests match; the exit status is 1 if any differs or any seed is
missing. With ``--check-determinism`` the cluster runs each seed twice, in two tasks, and a
seed whose two runs differ shows as two digests. The claim: a seed's digest does not
depend on where it runs; a Python worker forked by an executor on another JVM still runs
``python -m minikafka simulate`` in a pinned child (`whatif.seed_runs`).

Figures, not assertions: the wall time of each side is printed for the record.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testkit.spark_standalone import driver_env, standalone_cluster

_LINE = re.compile(r"^run \d+/\d+\s+seed\s+(\d+)(?: \(again\))?\s+digest ([0-9a-f]+)", re.M)


def _digests(out: Path) -> dict[int, set[str]]:
    """Each seed's digests: from a campaign's ``rows.jsonl`` (its ``--out``), or from the
    lines its driver printed (a campaign stopped before it wrote its rows)."""
    found: dict[int, set[str]] = {}
    if out.is_dir():
        rows = (json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines() if line)
        pairs = [(int(row["seed"]), str(row["digest"])) for row in rows if row.get("digest")]
    else:
        pairs = [(int(m.group(1)), m.group(2)) for m in _LINE.finditer(out.read_text())]
    for seed, digest in pairs:
        found.setdefault(seed, set()).add(digest)
    return found


def _cluster_command(
    recorded: str, master: str, out: Path, seeds: str | None, twice: bool
) -> list[str]:
    """The local campaign's own arguments with this cluster's master, output and seeds
    (and ``--check-determinism`` when ``twice``)."""
    words = shlex.split(recorded)
    args = words[words.index("simulate") + 1 :]
    kept: list[str] = []
    skip = False
    for word in args:
        if skip:
            skip = False
            continue
        if word in ("--master", "--out") or (seeds is not None and word == "--seeds"):
            skip = True
            continue
        if word != "--check-determinism":
            kept.append(word)
    kept += ["--master", master, "--out", str(out)]
    if seeds is not None:
        kept += ["--seeds", seeds]
    if twice:
        kept.append("--check-determinism")
    return [sys.executable, "-m", "minikafka", "simulate", *kept]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "local_out", type=Path, help="a local-mode campaign's --out, or its printed lines"
    )
    parser.add_argument("--command", default=None, help="the campaign's command (else its --out's)")
    parser.add_argument("--seeds", default=None, help="A..B, a subset of the local seeds")
    parser.add_argument(
        "--check-determinism", action="store_true", help="run each seed twice on the cluster"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    local = _digests(args.local_out)
    recorded = args.command or json.loads((args.local_out / "campaign.json").read_text())["command"]
    out = args.out or Path(tempfile.mkdtemp(prefix="campaign-standalone-"))
    with (
        tempfile.TemporaryDirectory() as base,
        standalone_cluster(Path(base), args.workers, args.cores) as cluster,
    ):
        command = _cluster_command(recorded, cluster.url, out, args.seeds, args.check_determinism)
        print("running:", shlex.join(command[2:]), flush=True)
        started = time.monotonic()
        done = subprocess.run(command, env=driver_env(), check=False)
        wall = time.monotonic() - started
    remote = _digests(out)
    differ = sorted(s for s in remote if s in local and local[s] != remote[s])
    missing = sorted(s for s in remote if s not in local)
    twice = sorted(s for s, digests in remote.items() if len(digests) > 1)
    print(
        f"standalone ({args.workers} workers x {args.cores} core): {len(remote)} seeds in "
        f"{wall:.0f} s, exit {done.returncode}; {len(remote) - len(differ) - len(missing)} "
        f"digests as in local mode, {len(differ)} differ, {len(missing)} not in the local "
        f"run; {len(twice)} seeds with two digests on the cluster"
    )
    for seed in differ:
        print(f"  seed {seed}: local {sorted(local[seed])}  standalone {sorted(remote[seed])}")
    return 1 if differ or missing or done.returncode not in (0, 1) else 0


if __name__ == "__main__":
    sys.exit(main())
