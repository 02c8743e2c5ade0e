"""One SparkSession (``local[2]``) for every Spark test, and the broker targets.

Skips the whole directory when pyspark is not installed (the ``spark`` extra) and the
session when no Java is on PATH.

Iggy: the conformance double (``tests/iggy_double``), started once per session on a loopback
ephemeral port by a background thread with its own event loop, and the harness's real
server when it reports one (``.brokers/iggy.env``). Spark's Python workers are
other processes: they reach it over TCP like a real server.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokers import skip_missing

pytest.importorskip("pyspark", reason="the Spark tests need the 'spark' extra (pyspark)")
pytest.importorskip("pyarrow", reason="the Spark tests need the 'spark' extra (pyarrow)")

from tests.iggy_double import ThreadedIggyDouble
from tests.iggy_lanes import real_server_reason
from tests.spark._support import Target, iggy_from_harness, iggy_target, spark_session, target


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None:
        skip_missing("Spark needs Java 17+ on PATH")
    session = spark_session("streamwire-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def iggy_double_url() -> Iterator[str]:
    """The URL of the conformance double, one for the session."""
    with ThreadedIggyDouble() as server:
        yield server.url


IGGY_LANES = ("iggy", "iggy-server")


def iggy_lane(request: pytest.FixtureRequest, lane: str) -> Target:
    """``iggy``: the double; ``iggy-server``: the harness's real server, or a skip saying why
    there is none."""
    if lane == "iggy-server":
        real = iggy_from_harness()
        if real is None:
            pytest.skip(real_server_reason())
        return iggy_target(real.url)
    return iggy_target(request.getfixturevalue("iggy_double_url"))


@pytest.fixture(params=IGGY_LANES)
def iggy(request: pytest.FixtureRequest) -> Target:
    return iggy_lane(request, request.param)


@pytest.fixture(params=["rabbitmq", "rabbitmq-super", "liftbridge", *IGGY_LANES])
def any_broker(request: pytest.FixtureRequest) -> Target:
    """Each broker in turn (RabbitMQ twice: plain streams, and super streams read and written
    as partitioned streams); skips (saying why) where it is missing or unsupported."""
    if request.param in IGGY_LANES:
        return iggy_lane(request, request.param)
    return target(request.param)


@pytest.fixture
def rabbitmq() -> Target:
    return target("rabbitmq")


@pytest.fixture
def every_broker(request: pytest.FixtureRequest) -> dict[str, Target]:
    """Every broker lane at once, for the tests that run one Spark job for all of them
    (jobs of their own are slow to start): RabbitMQ, Liftbridge, the Iggy double, and the
    real Iggy server when the harness has one. Skips when a broker is missing."""
    lanes = {
        "rabbitmq": target("rabbitmq"),
        "liftbridge": target("liftbridge"),
        "iggy": iggy_target(request.getfixturevalue("iggy_double_url")),
    }
    real = iggy_from_harness()
    if real is not None:
        lanes["iggy-server"] = iggy_target(real.url)
    return lanes
