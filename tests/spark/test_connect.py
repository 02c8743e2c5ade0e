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
from tests.spark._support import Target

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ("foreachBatch exactly-once", "data source read", "sink without query_id refused")


def test_the_sink_and_the_data_source_through_spark_connect(
    every_broker: dict[str, Target], tmp_path: Path
) -> None:
    remote = require("spark-connect").url
    argv = [sys.executable, "-m", "tests.spark.connect_job", remote, str(tmp_path)]
    argv += [f"{name}={t.url}@{t.partitions}" for name, t in every_broker.items()]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    lines = done.stdout.splitlines()
    passed = {line.removeprefix("ok ") for line in lines if line.startswith("ok ")}
    wanted = {f"{name} {check}" for name in every_broker for check in CHECKS}
    assert passed == wanted | {"rabbitmq data source writer exactly-once"}, output[-3000:]
