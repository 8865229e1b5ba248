"""Building the SparkSession: only entry points (``main`` of a job, a test fixture) call this.

Library functions take a ``SparkSession`` argument instead of building one, so a job's
work can run in a test's session and nothing starts a JVM as an import side effect.

Local mode is the default. For a local master the worker Python is pinned to the
driver's own interpreter (``PYSPARK_PYTHON``: otherwise Spark may start a different
``python3`` without our packages) and Spark binds to 127.0.0.1 (``SPARK_LOCAL_IP``: no
interface lookup, nothing listening beyond loopback). Against a cluster master the
driver must be reachable from the executors, so ``SPARK_LOCAL_IP`` is left to the
environment, and ``PYSPARK_PYTHON`` is only a default.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "build_spark_session", "is_local_master"]

DEFAULT_MASTER: Final = "local[*]"

_DEFAULT_CONF: Final[dict[str, str]] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Timestamps in tables and plots are UTC, whatever the machine's zone.
    "spark.sql.session.timeZone": "UTC",
    # Our data are small aggregates of captures; 200 shuffle partitions only cost time.
    "spark.sql.shuffle.partitions": "8",
}


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def build_spark_session(
    app_name: str,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Start (or join) a SparkSession; ``master`` defaults to ``local[*]``."""
    master = master or DEFAULT_MASTER
    if is_local_master(master):
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession  # a JVM comes with it: import only here

    builder = SparkSession.builder.appName(app_name).master(master)
    if is_local_master(master):
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    for key, value in {**_DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
