"""The driver of a streaming query is SIGKILLed while a micro-batch is being published, then
the query restarts from its checkpoint in a new process: every row is stored exactly once,
on each broker (RabbitMQ by its dedup; Liftbridge and Iggy by reading back what the killed
attempt stored). The job runs in ``kill_driver.py``; everything of it (the driver's Python,
its JVM, the Python workers) is in one process group, which the test kills at once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import streamwire
from tests.spark._support import Target, read_back

pytestmark = [pytest.mark.spark, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
FILES, ROWS_PER_FILE = 6, 2000
ROWS_PER_BATCH = 2 * ROWS_PER_FILE  # two files per micro-batch, one Spark partition each
TOTAL = FILES * ROWS_PER_FILE
PACE = 0.001  # seconds per row in the UDF: a task takes ~2 s to publish its partition


def _stored(t: Target, stream: str) -> int:
    """Messages in ``stream`` now (its offsets: a fresh stream has one message per offset)."""

    async def count() -> int:
        async with streamwire.connect(t.url, timeout=10.0) as client:
            assert isinstance(client, streamwire.Bounded)
            bounds = await client.offset_bounds(stream)
        return sum(b.next - b.first for b in bounds.values())

    return asyncio.run(count())


def _driver(t: Target, stream: str, tmp_path: Path, log: Path) -> subprocess.Popen[bytes]:
    """The job in a process group of its own (the JVM and the workers too), its output
    in ``log``."""
    args = [str(tmp_path / "in"), str(tmp_path / "ckpt"), "--pace", str(PACE)]
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.spark.kill_driver", t.url, stream, *args],
            cwd=ROOT,
            env={
                **os.environ,
                "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            },
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _kill_mid_batch(t: Target, stream: str, driver: subprocess.Popen[bytes], log: Path) -> int:
    """SIGKILL the driver's process group once a micro-batch after the first is partly
    stored (not at a batch boundary); the count seen then."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if driver.poll() is not None:
            out = log.read_text(errors="replace")[-3000:]
            pytest.fail(f"the job ended before it could be killed mid-batch:\n{out}")
        seen = _stored(t, stream)
        into = seen % ROWS_PER_BATCH
        if (
            ROWS_PER_BATCH <= seen < TOTAL
            and ROWS_PER_BATCH // 20 <= into <= ROWS_PER_BATCH * 3 // 4
        ):
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)
            return seen
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)
    pytest.fail("no micro-batch was caught part-way through in 180 s")


def test_a_driver_killed_mid_batch_restarts_and_stores_every_row_once(
    any_broker: Target, tmp_path: Path
) -> None:
    t = any_broker
    stream = t.new_stream("kill")
    source = tmp_path / "in"
    source.mkdir()
    for f in range(FILES):
        ids = range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE)
        (source / f"{f}.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    try:
        killed, restarted = tmp_path / "killed.log", tmp_path / "restarted.log"
        seen = _kill_mid_batch(t, stream, _driver(t, stream, tmp_path, killed), killed)
        time.sleep(1.0)  # whatever the dead workers had handed over lands
        before = _stored(t, stream)
        assert seen <= before < TOTAL

        driver = _driver(t, stream, tmp_path, restarted)
        try:
            driver.wait(300)
        finally:
            if driver.returncode is None:
                os.killpg(driver.pid, signal.SIGKILL)
        out = restarted.read_text(errors="replace")
        assert driver.returncode == 0, out[-3000:]
        batches = [line.split()[1:] for line in out.splitlines() if line.startswith("batch ")]
        published = sum(int(b[2]) for b in batches)
        skipped = sum(int(b[3]) for b in batches)

        stored = read_back(t, stream, expect=TOTAL)
        values = [int(m.value) for m in stored]
        assert len(values) == TOTAL, f"{len(values) - len(set(values))} duplicates"
        assert sorted(values) == list(range(TOTAL))
        assert all(m.key == m.value for m in stored)
        # the restart sent exactly what was missing; the killed batch's stored rows were
        # found (skipped), not sent again
        assert published == TOTAL - before
        assert skipped == before % ROWS_PER_BATCH
        assert skipped > 0
    finally:
        t.delete_stream(stream)
