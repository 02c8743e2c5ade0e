"""The sink and the data source through Spark Connect, on every broker: the harness's Connect
server (``integration/brokers.sh up spark-connect``, ``local[2]``) and a client session in a
process of its own (``connect_job.py``), since a Connect session turns PySpark's functions to
Connect for the whole process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.brokers import require
from tests.iggy_lanes import real_server_reason
from tests.spark._support import Target, iggy_from_harness, iggy_target, target

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
CHECKS = (
    "foreachBatch exactly-once",
    "data source writer exactly-once",
    "data source read",
    "sink without query_id refused",
)


def _spec(name: str, t: Target) -> str:
    return f"{name}={t.url}@{t.partitions}"


def test_the_sink_and_the_data_source_through_spark_connect(
    iggy_double_url: str, tmp_path: Path
) -> None:
    remote = require("spark-connect").url
    lanes = {
        "rabbitmq": target("rabbitmq"),
        "liftbridge": target("liftbridge"),
        "iggy": iggy_target(iggy_double_url),
    }
    real = iggy_from_harness()
    if real is not None:
        lanes["iggy-server"] = iggy_target(real.url)
    else:
        print(f"iggy-server lane not run: {real_server_reason()}")
    argv = [sys.executable, "-m", "tests.spark.connect_job", remote, str(tmp_path)]
    argv += [_spec(name, t) for name, t in lanes.items()]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    passed = {
        line.removeprefix("ok ") for line in done.stdout.splitlines() if line.startswith("ok ")
    }
    assert passed == {f"{name} {check}" for name in lanes for check in CHECKS}, output[-3000:]
