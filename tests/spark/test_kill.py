"""The driver of streaming queries is SIGKILLed while a micro-batch is being published, then
the queries restart from their checkpoints in a new process: every row is stored exactly
once, on each broker (RabbitMQ by its dedup; Liftbridge and Iggy by reading back what the
killed attempt stored). One job (``kill_driver.py``, ``local[2]``) runs a query per broker
lane at once; everything of it (the driver's Python, its JVM, the Python workers) is in one
process group, which the test kills at once."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.spark._jobs import (
    ROWS_PER_BATCH,
    TOTAL,
    batches,
    check_stored,
    finish,
    part_way,
    start_job,
    stored,
    write_input,
)
from tests.spark._support import Target

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]


def test_a_driver_killed_mid_batch_restarts_and_stores_every_row_once(
    every_broker: dict[str, Target], tmp_path: Path
) -> None:
    jobs = [(t, t.new_stream("kill")) for t in every_broker.values()]
    write_input(tmp_path)
    job = None
    try:
        killed, restarted = tmp_path / "killed.log", tmp_path / "restarted.log"
        job = start_job(jobs, tmp_path, killed)
        seen = part_way(jobs, job, killed)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
        time.sleep(1.0)  # whatever the dead workers had handed over lands
        before = [stored(t, stream) for t, stream in jobs]
        assert all(s <= b < TOTAL for s, b in zip(seen, before, strict=True)), (seen, before)

        job = start_job(jobs, tmp_path, restarted)
        out = finish(job, restarted)
        replayed = []
        for n, (t, stream) in enumerate(jobs):
            check_stored(t, stream)
            done = batches(out, n)
            # the restart sent exactly what was missing; the killed batch's stored rows were
            # found (skipped), not sent again. The checkpoint had committed the batches the
            # restart did not run; the killed batch may be wholly stored yet uncommitted (a
            # kill between its last confirm and the commit), so it is not always a partial one
            committed = TOTAL - sum(b[1] for b in done)
            assert committed % ROWS_PER_BATCH == 0, (committed, before)
            assert committed <= before[n], (committed, before)
            assert sum(b[2] for b in done) == TOTAL - before[n], t.broker
            assert sum(b[3] for b in done) == before[n] - committed, t.broker
            replayed.append(before[n] - committed)
        assert any(r > 0 for r in replayed), ("no uncommitted batch was killed", replayed)
    finally:
        if job is not None and job.poll() is None:  # the test failed while it ran
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
        for t, stream in jobs:
            t.delete_stream(stream)
