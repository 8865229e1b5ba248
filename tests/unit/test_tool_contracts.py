"""simulation and whatif may use the project's clients (`kafka_tools.client`) but no tool:
their import-linter contracts name every other `kafka_tools` module, so a new tool module
must be added there (this test says which)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_every_tool_module_is_forbidden_to_simulation_and_whatif() -> None:
    tools = {
        f"kafka_tools.{p.stem}" for p in (ROOT / "kafka_tools").glob("*.py") if p.stem != "__init__"
    }
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    for source in ("simulation", "whatif"):
        (contract,) = [c for c in contracts if c.get("source_modules") == [source]]
        missing = tools - set(contract["forbidden_modules"])
        assert not missing, f"{source}'s contract must forbid {sorted(missing)}"
