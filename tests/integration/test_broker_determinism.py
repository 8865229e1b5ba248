"""The brokers' own determinism (issue 23): the same seed gives the same run whatever the
process' ``PYTHONHASHSEED`` and memory layout, when the clients are the project's own
(tests/helpers/hash_seed_scenario.py); another seed gives another run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _digest(seed: int, hash_seed: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "tests.helpers.hash_seed_scenario", str(seed)],
        env={**os.environ, "PYTHONHASHSEED": hash_seed},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout.strip().splitlines()[-1]


@pytest.mark.timeout(600)
def test_same_seed_same_digest_under_any_hash_seed_other_seed_other_digest() -> None:
    first = _digest(3, "0")
    assert len(first) == 16
    assert _digest(3, "1") == first
    assert _digest(3, "12345") == first
    assert _digest(4, "0") != first
