"""Fixtures every test directory shares."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# What a test may take before pytest-timeout calls it hung: the ini's 120 s for most, more
# for the Spark tests. Those run a JVM, a replay in real time and Spark jobs on the same
# two cores as the brokers: the replay end to end took 80 s with other work on the
# machine and went past 120 s with both cores kept busy (then the interrupted py4j
# gateway failed the Spark tests after it). A timeout detects a hang; it is not a figure.
SPARK_TIMEOUT_S = 600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("spark") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SPARK_TIMEOUT_S))


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
