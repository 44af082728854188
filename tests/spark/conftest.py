"""One SparkSession (``local[2]``) for every Spark test, and the generated metadata logs they share.

Spark starts once per test session (a few seconds); the logs are generated once and only read by
the tests (a test that damages a log copies it first).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import structlog
from _loggen import generate_log

BIG_RECORDS = 300_000  # "hundreds of thousands": every record type, every edge case, many times
SMALL_RECORDS = 20_000


@pytest.fixture(scope="session")
def spark():
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail(
            "the Spark tests need Java: `make test` installs a headless JRE (or apt-get install default-jre-headless)"
        )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kraftlog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _quiet_structlog():
    """Keep the job's info lines out of the test output (warnings still show)."""
    import logging

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="session")
def big_log(tmp_path_factory) -> object:
    d = tmp_path_factory.mktemp("big") / "__cluster_metadata-0"
    return generate_log(d, BIG_RECORDS, seed=11, segment_bytes=4 << 20)


@pytest.fixture(scope="session")
def small_log(tmp_path_factory) -> object:
    d = tmp_path_factory.mktemp("small") / "__cluster_metadata-0"
    return generate_log(d, SMALL_RECORDS, seed=5, segment_bytes=256 << 10, topic_names=40, max_live_partitions=300)


def copy_log(log_dir: Path, dest: Path) -> Path:
    shutil.copytree(log_dir, dest)
    return dest


@pytest.fixture
def log_copy(small_log, tmp_path: Path):
    """A private copy of the small log that a test may damage."""
    return copy_log(small_log.directory, tmp_path / "copy" / "__cluster_metadata-0")
