"""The sink and the data source on a real standalone cluster (the harness's ``spark`` target:
a master and two workers, so executors are JVMs of their own with their own Python workers).
One job (``kill_driver.py``) runs a query per broker lane at once; an executor is SIGKILLed,
with its Python workers, while a micro-batch is being published. Spark retries its tasks on
another executor, and every row is stored exactly once, on each broker. The job then reads
each stream back through the data source on the cluster."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from tests.brokers import require
from tests.spark._jobs import TOTAL, batches, check_stored, finish, part_way, start_job, write_input
from tests.spark._support import Target

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]

PROC = Path("/proc")
EXECUTOR = b"org.apache.spark.executor.CoarseGrainedExecutorBackend"


def _executors(app: str) -> list[int]:
    """The executor JVMs of Spark application ``app`` on this machine."""
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if EXECUTOR in argv and app.encode() in argv:
            found.append(int(entry.name))
    return sorted(found)


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (an executor's Python workers)."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(children.get(current, []))
    return out


def test_an_executor_killed_mid_batch_is_retried_and_every_row_is_stored_once(
    every_broker: dict[str, Target], tmp_path: Path
) -> None:
    master = require("spark").url
    jobs = [(t, t.new_stream("cluster")) for t in every_broker.values()]
    write_input(tmp_path)
    log = tmp_path / "job.log"
    job = None
    try:
        job = start_job(jobs, tmp_path, log, "--master", master, "--read-back")
        part_way(jobs, job, log)
        app = next(
            line.split()[1] for line in log.read_text().splitlines() if line.startswith("app ")
        )
        executors = _executors(app)
        assert len(executors) == 2, f"expected two executors of {app}, found {executors}"
        # the workers first: a Python worker whose executor died may exit before its turn
        for pid in reversed(_descendants(executors[0])):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

        out = finish(job, log)
        assert "Lost executor" in out, out[-3000:]
        lines = out.splitlines()
        for n, (t, stream) in enumerate(jobs):
            check_stored(t, stream)
            assert f"read {n} {TOTAL} {TOTAL} 0 {TOTAL - 1}" in lines, (t.broker, out[-2000:])
        for n in range(len(jobs)):  # every query finished its three micro-batches
            assert [b[0] for b in batches(out, n)] == [0, 1, 2]
    finally:
        if job is not None and job.poll() is None:  # the test failed while it ran
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
        for t, stream in jobs:
            t.delete_stream(stream)
