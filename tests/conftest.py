"""Fixtures every test directory shares."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
