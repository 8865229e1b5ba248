"""`minikafka simulate`: the same seed gives the same run, in another process too.

Each run is the workload mix (idempotent and acks=1 producers, a consumer group whose third
member freezes, a transactional consume-transform-produce, a read_committed watcher) against 3
simulated brokers, with a broker restart and a partition from the nemesis; the command prints
the invariants and a digest of everything the clients saw.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

SCENARIO = ["--duration", "20", "--faults", "restart=1,partition=1"]


def _simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", "simulate", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _digest(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 0, run.stdout + run.stderr
    found = re.search(r"^digest ([0-9a-f]{16}) ", run.stdout, re.MULTILINE)
    assert found, run.stdout
    return found.group(1)


@pytest.mark.timeout(600)
def test_same_seed_same_digest_other_seed_other_digest_and_every_invariant_held() -> None:
    first = _simulate("--seed", "3", *SCENARIO)
    assert "restart broker" in first.stdout and "partition broker" in first.stdout
    assert re.findall(r"^  \S.*?  (yes|NO )  ", first.stdout, re.MULTILINE) == ["yes"] * 7
    assert _digest(_simulate("--seed", "3", *SCENARIO)) == _digest(first)
    assert _digest(_simulate("--seed", "4", *SCENARIO)) != _digest(first)


def test_bad_arguments_are_one_line_and_exit_2() -> None:
    run = _simulate("--faults", "meteor=1")
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0
    assert "--faults: expected KIND=COUNT" in run.stderr
