"""One SparkSession (``local[2]``) for every Spark test, and the broker targets.

Skips the whole directory when pyspark is not installed (the ``spark`` extra) and the
session when no Java is on PATH.

Iggy: the harness's server when it reports one (``.brokers/iggy.env``); otherwise the
conformance double (``tests/iggy_double``), started once per session on a loopback
ephemeral port by a background thread with its own event loop. Spark's Python workers are
other processes: they reach it over TCP like a real server.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the Spark tests need the 'spark' extra (pyspark)")
pytest.importorskip("pyarrow", reason="the Spark tests need the 'spark' extra (pyarrow)")

from tests.iggy_double import ThreadedIggyDouble
from tests.spark._support import Target, iggy_from_harness, iggy_target, target

#: JVM flags that halve SparkSession start on a small machine (docs/spark.md).
JVM_FLAGS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17+ on PATH")
    # executors must run this interpreter (it has streamwire and pyarrow)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("streamwire-tests")
        .config("spark.driver.extraJavaOptions", JVM_FLAGS)
        .config("spark.driver.memory", "1g")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def iggy_url() -> Iterator[str]:
    """The URL of an Iggy server: the harness's, or a conformance double for the session."""
    real = iggy_from_harness()
    if real is not None:
        yield real.url
        return
    with ThreadedIggyDouble() as server:
        yield server.url


@pytest.fixture
def iggy(iggy_url: str) -> Target:
    return iggy_target(iggy_url)


@pytest.fixture(params=["rabbitmq", "liftbridge", "iggy"])
def any_broker(request: pytest.FixtureRequest) -> Target:
    """Each broker in turn; skips (saying why) where it is missing or unsupported."""
    if request.param == "iggy":
        found: Target = request.getfixturevalue("iggy")
        return found
    return target(request.param)


@pytest.fixture(params=["liftbridge", "iggy"])
def at_least_once_broker(request: pytest.FixtureRequest) -> Target:
    """Each broker without deduplication of re-sent messages."""
    if request.param == "iggy":
        found: Target = request.getfixturevalue("iggy")
        return found
    return target(request.param)


@pytest.fixture
def rabbitmq() -> Target:
    return target("rabbitmq")
