"""Spark jobs in driver processes of their own. The sink's (``kill_driver.py``), for the
tests that kill part of Spark while a micro-batch is being published (``test_kill.py``,
``test_cluster.py``): its input files, starting it, and waiting until a batch is part-way.
The source's (``read_driver.py``), for the tests that break its reads: the messages
published, the job started, and what its queries handed to their sinks."""

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
from tests.spark._support import Target, publish, read_back

__all__ = [
    "BUDGET",
    "MID_BATCH_ROWS",
    "PACE",
    "ROWS_PER_BATCH",
    "SOURCE_TOTAL",
    "TOTAL",
    "batches",
    "check_read",
    "check_stored",
    "finish",
    "part_way",
    "read_so_far",
    "start_job",
    "start_read",
    "stored",
    "write_input",
]

ROOT = Path(__file__).resolve().parents[2]
#: ``STREAMWIRE_SPARK_ROWS`` and ``STREAMWIRE_SPARK_PACE`` scale the jobs up for a measured
#: run (docs/spark.md's table: 600,000 rows, no pace); the suite runs with the defaults.
FILES, ROWS_PER_FILE = 6, int(os.environ.get("STREAMWIRE_SPARK_ROWS", "12000")) // 6
ROWS_PER_BATCH = 2 * ROWS_PER_FILE  # two files per micro-batch, one Spark partition each
TOTAL = FILES * ROWS_PER_FILE
#: Rows stored half-way through the second micro-batch.
MID_BATCH_ROWS = ROWS_PER_BATCH * 3 // 2
#: Seconds per row in the UDF: a task takes ~2 s to publish its partition.
PACE = float(os.environ.get("STREAMWIRE_SPARK_PACE", "0.001"))
#: How long a job may take: 10 minutes, and more for a scaled-up run.
BUDGET = 600.0 + TOTAL / 500
#: The source's jobs (``read_driver``): messages read (three micro-batches), rows per
#: micro-batch, and seconds of work per row after the read.
SOURCE_TOTAL, SOURCE_BATCH, SOURCE_PACE = TOTAL // 2, 2000, 0.0005


def write_input(tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    for f in range(FILES):
        ids = range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE)
        (source / f"{f}.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))


def stored(t: Target, stream: str) -> int:
    """Messages in ``stream`` now (its offsets: a fresh stream has one message per offset)."""

    async def count() -> int:
        async with streamwire.connect(t.url, timeout=10.0) as client:
            assert isinstance(client, streamwire.Bounded)
            bounds = await client.offset_bounds(stream)
        return sum(b.next - b.first for b in bounds.values())

    return asyncio.run(count())


def start_job(
    jobs: list[tuple[Target, str]], tmp_path: Path, log: Path, *extra: str
) -> subprocess.Popen[bytes]:
    """One driver process running a query per ``(target, stream)``, in a process group of its
    own (the driver's JVM and, in local mode, the Python workers too), its output in
    ``log``."""
    args = [str(tmp_path / "in"), str(tmp_path / "ckpt")]
    args += [f"{t.url}={stream}" for t, stream in jobs]
    args += ["--pace", str(PACE), *extra]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.spark.kill_driver", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def part_way(jobs: list[tuple[Target, str]], job: subprocess.Popen[bytes], log: Path) -> list[int]:
    """Wait until a micro-batch after the first is partly stored (not at a batch boundary) in
    one of the streams; the counts of every stream seen then. Fails the test (killing the
    job) when none is caught."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if job.poll() is not None:
            out = log.read_text(errors="replace")[-3000:]
            pytest.fail(f"the job ended before a batch was caught part-way:\n{out}")
        seen = [stored(t, stream) for t, stream in jobs]
        for count in seen:
            into = count % ROWS_PER_BATCH
            middle = ROWS_PER_BATCH // 20 <= into <= ROWS_PER_BATCH * 3 // 4
            if ROWS_PER_BATCH <= count < TOTAL and middle:
                return seen
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGKILL)
    pytest.fail("no micro-batch was caught part-way through in 240 s")


def finish(job: subprocess.Popen[bytes], log: Path, timeout: float = 300) -> str:
    """Wait for the job (killing it after ``timeout`` s); its output, checked to succeed."""
    try:
        job.wait(timeout)
    finally:
        if job.returncode is None:
            os.killpg(job.pid, signal.SIGKILL)
    out = log.read_text(errors="replace")
    assert job.returncode == 0, out[-3000:]
    return out


def batches(out: str, n: int) -> list[tuple[int, int, int, int]]:
    """``(batch id, rows, published, skipped)`` per micro-batch the sink of the job's query
    ``n`` finished."""
    lines = (line.split() for line in out.splitlines() if line.startswith(f"batch {n} "))
    return [(int(b[2]), int(b[3]), int(b[4]), int(b[5])) for b in lines]


def check_stored(t: Target, stream: str, lane: str | None = None, fault: str = "") -> None:
    """Every id once in ``stream``, with its key (streamwire's markers left out:
    ``read_back``). With ``STREAMWIRE_FAULT_RESULTS=DIR``, what was found is written there
    first (``python -m tests.spark.table DIR``)."""
    back = read_back(t, stream, expect=TOTAL, timeout=30.0 + TOTAL / 10_000)
    values = [int(m.value) for m in back]
    lost = TOTAL - len(set(values) & set(range(TOTAL)))
    duplicated = len(values) - len(set(values))
    _report("sink", lane or t.broker, fault, stream, values)
    assert len(values) == TOTAL, f"{t.broker}: {lost} ids lost, {duplicated} stored twice"
    assert sorted(values) == list(range(TOTAL)), t.broker
    assert all(m.key == m.value for m in back), t.broker


def read_so_far(out: Path, n: int) -> list[int]:
    """The ids query ``n`` of a ``read_driver`` job handed to its sink so far, in order: the
    complete lines only, since the job may be halfway through writing the last one (its
    append of a batch's lines can take more than one write)."""
    path = out / str(n)
    if not path.exists():
        return []
    text = path.read_text(encoding="ascii")
    complete = text[: text.rfind("\n") + 1]
    return [int(line.split()[1]) for line in complete.splitlines()]


def start_read(
    lanes: dict[str, Target],
    streams: dict[str, str],
    tmp_path: Path,
    via: dict[str, tuple[Target, dict[str, object] | None]],
    *extra: str,
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """Publish :data:`SOURCE_TOTAL` messages (ids) to each lane's stream, then start
    ``read_driver`` on them: one streaming query per lane, through ``via`` (the lane's target
    as the source reaches it, and its ``connectOptions``). A lane's "stream" may be several,
    comma-separated: the ids are dealt out among them in turn, and its query reads them
    all (the source's ``streams`` option). The job, its output directory and its log."""
    out, log = tmp_path / "out", tmp_path / "read.log"
    out.mkdir()
    args = [str(out), str(tmp_path / "ckpt")]
    options = ["--max", str(SOURCE_BATCH), "--pace", str(SOURCE_PACE), *extra]
    for n, (name, t) in enumerate(lanes.items()):
        names = streams[name].split(",")
        for k, each in enumerate(names):
            ids = range(k, SOURCE_TOTAL, len(names))
            publish(t, each, [streamwire.Message(str(i).encode()) for i in ids])
        target, connect = via.get(name, (t, None))
        args.append(f"{target.url}={streams[name]}")
        if connect:
            options += ["--connect", f"{n}={json.dumps(connect)}"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with log.open("wb") as sink:
        job = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.read_driver", *args, *options],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return job, out, log


def _report(
    side: str, lane: str, fault: str, stream: str, values: list[int], total: int = TOTAL
) -> None:
    """With ``STREAMWIRE_FAULT_RESULTS=DIR``, what a run of the sink (the ids stored) or the
    source (the ids its query was handed) found, as a JSON report in ``DIR``
    (``python -m tests.spark.table DIR``)."""
    results = os.environ.get("STREAMWIRE_FAULT_RESULTS")
    if not results:
        return
    report = {
        "side": side,
        "lane": lane,
        "fault": fault,
        "rows": total,
        "stored": len(values),
        "lost": total - len(set(values) & set(range(total))),
        "duplicated": len(values) - len(set(values)),
    }
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in stream)
    out = Path(results) / f"spark-{side}-{fault}-{lane}-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report), encoding="utf-8")


def check_read(
    lanes: dict[str, Target], out: Path, text: str, fault: str, streams: dict[str, str]
) -> None:
    """Every lane's query handed every id to its sink exactly once (reported first, as
    :func:`check_stored` does)."""
    for n, name in enumerate(lanes):
        ids = read_so_far(out, n)
        _report("source", name, fault, streams[name], ids, SOURCE_TOTAL)
        lost = SOURCE_TOTAL - len(set(ids) & set(range(SOURCE_TOTAL)))
        said = f"{name}: {lost} lost, {len(ids) - len(set(ids))} read twice; {text[-2000:]}"
        assert len(ids) == SOURCE_TOTAL, said
        assert sorted(ids) == list(range(SOURCE_TOTAL)), said
