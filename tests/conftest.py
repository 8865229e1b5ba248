"""Fixtures every test directory shares."""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# What a test may take before pytest-timeout calls it hung: the ini's 120 s for most, more
# for the Spark tests. Those run a JVM, a replay in real time and Spark jobs on the same
# two cores as the brokers: the replay end to end took 80 s with other work on the
# machine and went past 120 s with both cores kept busy (then the interrupted py4j
# gateway failed the Spark tests after it). A timeout detects a hang; it is not a figure.
SPARK_TIMEOUT_S = 600


#: For every JVM the tests start (Spark: a session, a command's driver, a standalone
#: cluster's daemons and executors), unless the environment sets its own: the C1 compiler
#: only. They live seconds to a minute on small data, where C2's compiler threads cost
#: more than they return: a local session's small jobs took 14 s of JVM CPU instead of 23.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("JAVA_TOOL_OPTIONS", TEST_JVM_OPTIONS)


#: The modules whose tests use the session's ``spark`` fixture: under ``make test``'s
#: workers they are one unit of work, so one JVM serves them all (a module missing here
#: still passes, on a JVM of its own; collection warns).
SPARK_SESSION_MODULES = frozenset(
    f"tests/integration/{name}.py"
    for name in ("test_replay_e2e", "test_replay_quota", "test_report", "test_throttle_report")
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Spark tests' longer timeout, and the order: the modules whose tests declare the
    longest timeout first (the README walkthrough, Spark, the simulation commands). Under
    ``make test``'s two workers they are the longest units of work, and one started last
    would leave the other worker idle at the end. The sort is stable and by module, so a
    module's tests and the other modules keep their order."""
    longest: dict[str, float] = {}
    for item in items:
        if item.get_closest_marker("spark") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SPARK_TIMEOUT_S))
        module = _module(item)
        if "spark" in getattr(item, "fixturenames", ()) and module not in SPARK_SESSION_MODULES:
            note = f"{module} uses the spark fixture: add it to SPARK_SESSION_MODULES"
            warnings.warn(note, pytest.PytestWarning, stacklevel=1)
        longest[module] = max(longest.get(module, 0.0), _timeout(item, config))
    items.sort(key=lambda item: -longest[_module(item)])


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _timeout(item: pytest.Item, config: pytest.Config) -> float:
    """The timeout a test declares (its ``timeout`` mark), else the ini's (pytest-timeout's)."""
    mark = item.get_closest_marker("timeout")
    if mark is not None and mark.args:
        return float(mark.args[0])
    try:
        return float(config.getini("timeout") or 0)
    except ValueError:  # pytest-timeout not loaded (-p no:timeout): no ini key
        return 0.0


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (pyproject's addopts) with the Spark-session modules as one unit.

    A module is one unit of work, so a module-scoped cluster or browser starts once and
    tests that run in order on one stay in order. (xdist's ``loadgroup`` would say this
    with marks, but it groups by rewriting node ids, which pytest 9.2 ignores: xdist
    issue 1386.)
    """
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModuleScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "spark-session" if module in SPARK_SESSION_MODULES else module

    return ModuleScheduling(config, log)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession for the whole run: starting a JVM is the slow part."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("no Java runtime")
    from spark_jobs.session import build_spark_session

    session = build_spark_session(
        "minikafka-tests", "local[2]", {"spark.sql.shuffle.partitions": "2"}
    )
    yield session
    session.stop()
