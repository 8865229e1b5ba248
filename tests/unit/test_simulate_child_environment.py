"""The pinned child of ``minikafka simulate``: its environment (issue 33, speed)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from simulation.command import child_environment


def test_the_child_runs_with_hash_seed_zero_and_knows_it_is_the_child() -> None:
    env = child_environment({"PATH": "/bin", "PYTHONHASHSEED": "random"})
    assert env["PYTHONHASHSEED"] == "0"
    assert env["MINIKAFKA_SIMULATE_CHILD"] == "1"
    assert env["PATH"] == "/bin"
    assert "PYTHONPYCACHEPREFIX" not in env  # bytecode is written as the parent would


def test_a_parent_without_bytecode_gets_a_child_that_caches_it_outside_the_sources() -> None:
    env = child_environment({"PYTHONDONTWRITEBYTECODE": "1"})
    assert "PYTHONDONTWRITEBYTECODE" not in env
    prefix = Path(env["PYTHONPYCACHEPREFIX"])
    assert prefix.parent == Path(tempfile.gettempdir())
    assert prefix.name.startswith("minikafka-pycache-")


def test_a_cache_prefix_the_parent_names_is_kept_as_it_is() -> None:
    env = child_environment({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/x"})
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PYTHONPYCACHEPREFIX"] == "/x"
