"""A replay's run metadata: ``_replay.json`` beside its Parquet results.

What a reader of a report or a comparison needs to know of a replay and cannot get from
its rows: the capture, the speed, the Spark master, the target cluster (size, the
configs that are not Kafka's defaults, whether the replay started it, where it
captured), the warnings, the date and the versions. The file name starts with ``_``:
Spark's and pyarrow's Parquet readers pass over it (and over ``_target_capture/``).
"""

from __future__ import annotations

import importlib.metadata
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from pydantic import BaseModel, Field

from spark_jobs.replay_result import REAL_TIME

__all__ = ["RUN_FILE", "TARGET_CAPTURE_DIR", "TARGET_DATA_DIR", "ReplayRun", "read_run", "versions"]

RUN_FILE: Final = "_replay.json"
#: Where a target the replay starts itself captures, inside the results directory.
TARGET_CAPTURE_DIR: Final = "_target_capture"
#: The started target's ``--data-dir`` under OUT, with ``--target-quotas`` only.
TARGET_DATA_DIR: Final = "_target_data"


def versions() -> dict[str, str]:
    """Versions of what a replay's figures depend on."""
    out = {"python": platform.python_version()}
    for package in ("minikafka", "pyspark", "kio"):
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = "?"
    return out


class ReplayRun(BaseModel):
    """What ``minikafka replay`` did (see module doc)."""

    label: str
    #: Which kind of run wrote the results (the rows' ``run_kind``): real or virtual time.
    run_kind: str = REAL_TIME
    started_utc: str = Field(
        default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds")
    )
    elapsed_s: float = 0.0
    capture: str
    capture_brokers: int = 0
    capture_span_s: float = 0.0
    speed: float = 1.0
    speed_scales: str = ""
    master: str = "local[*]"
    tasks: int = 0
    requests: int = 0
    client_requests: int = 0
    skipped: dict[str, int] = Field(default_factory=dict)
    errors: dict[str, int] = Field(default_factory=dict)
    connections: int = 0
    target_bootstrap: str = ""
    target_brokers: int = 0
    target_started: bool = False
    target_overrides: list[str] = Field(default_factory=list)
    #: The target's configs that are not Kafka's defaults (DescribeConfigs).
    target_config: dict[str, str] = Field(default_factory=dict)
    #: The target's capture, when there is one (absolute path).
    target_capture: str | None = None
    warnings: list[str] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=versions)

    def write(self, results: str | Path) -> Path:
        path = Path(results) / RUN_FILE
        path.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return path

    def config_text(self) -> str:
        """The label's long form: every non-default config, or "Kafka's defaults"."""
        if not self.target_config:
            return "Kafka's defaults"
        return ", ".join(f"{k}={v}" for k, v in sorted(self.target_config.items()))


def read_run(results: str | Path) -> ReplayRun | None:
    """The run metadata of a results directory, None when it has none (older replays)."""
    path = Path(results) / RUN_FILE
    if not path.is_file():
        return None
    return ReplayRun.model_validate_json(path.read_text(encoding="utf-8"))


def default_label(overrides: dict[str, str]) -> str:
    """A short label for a variant: its non-default configs, or "default"."""
    if not overrides:
        return "default"
    return ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))
