"""The broker process's collector policy and its GC log (``broker/observability/gc_policy.py``).

The policy is process-wide: each test that applies it puts the interpreter's state back.
Nothing here depends on the policy being in force; the log is driven by calling it as
``gc.callbacks`` would, so no collection has to happen.
"""

from __future__ import annotations

import gc
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.observability.gc_policy import (
    DEFAULT_GC_THRESHOLDS,
    GC_LOG_ENV,
    GcLog,
    apply_gc_policy,
    install_gc_log_from_env,
    parse_gc_thresholds,
)
from minikafka.cli import build_parser


@pytest.fixture
def restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    callbacks = list(gc.callbacks)
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()
    gc.callbacks[:] = callbacks


def test_thresholds_parse_three_positive_integers_or_python() -> None:
    assert parse_gc_thresholds("700,5,2000") == (700, 5, 2000)
    assert parse_gc_thresholds(" Python ") is None
    for bad in ("700,5", "700,0,10", "a,b,c", "", "1,2,3,4", "-1,10,10"):
        with pytest.raises(ValueError, match="T0,T1,T2"):
            parse_gc_thresholds(bad)


def test_serve_takes_the_policy_from_its_flags() -> None:
    parser = build_parser()
    args = parser.parse_args(["serve"])
    assert args.gc_threshold == DEFAULT_GC_THRESHOLDS and args.gc_freeze is True
    args = parser.parse_args(["serve", "--gc-threshold", "python", "--no-gc-freeze"])
    assert args.gc_threshold is None and args.gc_freeze is False
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--gc-threshold", "10,10"])


@pytest.mark.usefixtures("restore_gc")
def test_apply_sets_the_thresholds_and_freezes_what_lives_now() -> None:
    apply_gc_policy((1234, 7, 99), freeze=False)
    assert gc.get_threshold() == (1234, 7, 99) and gc.get_freeze_count() == 0
    apply_gc_policy(None, freeze=True)
    assert gc.get_threshold() == (1234, 7, 99)  # None keeps them
    assert gc.get_freeze_count() > 0


def test_the_log_writes_full_collections_slow_pauses_and_running_totals() -> None:
    out = io.StringIO()
    log = GcLog(out, slow_ms=1e9, every_s=1e9)  # only full collections write here
    log("start", {"generation": 0})
    log("stop", {"generation": 0, "collected": 0, "uncollectable": 0})
    log("start", {"generation": 1})
    log("stop", {"generation": 1, "collected": 3, "uncollectable": 0})
    assert out.getvalue() == ""
    log("start", {"generation": 2})
    log("stop", {"generation": 2, "collected": 42, "uncollectable": 0})
    (line,) = out.getvalue().splitlines()
    fields = line.split()
    assert len(fields) == 9
    assert fields[1] == "2" and fields[3] == "42"
    assert fields[4:7] == ["1", "1", "1"]  # collections so far, per generation
    assert float(fields[7]) >= float(fields[2]) >= 0 and float(fields[8]) >= 0


def test_the_log_writes_a_slow_pause_of_any_generation() -> None:
    out = io.StringIO()
    log = GcLog(out, slow_ms=0.0, every_s=1e9)
    log("start", {"generation": 0})
    log("stop", {"generation": 0, "collected": 0, "uncollectable": 0})
    assert out.getvalue().split()[1] == "0"


@pytest.mark.usefixtures("restore_gc")
def test_the_log_is_installed_only_when_the_environment_names_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(GC_LOG_ENV, raising=False)
    assert install_gc_log_from_env() is None
    path = tmp_path / "gc.log"
    monkeypatch.setenv(GC_LOG_ENV, str(path))
    log = install_gc_log_from_env()
    assert log is not None and log in gc.callbacks
    gc.collect()  # a full collection: one line
    log.close()
    assert log not in gc.callbacks
    assert path.read_text().split()[1] == "2"
