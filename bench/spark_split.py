"""Where the Spark read's CPU goes, and what Spark itself costs per row:
``python -m bench.spark_split``.

Each round publishes ``count`` messages of ``size`` bytes to a fresh RabbitMQ stream and
runs, on one ``local[1]`` session, order alternating from round to round, each job once
over one row and once over ``count`` rows, all written to Spark's ``noop`` sink:

* **streamwire**: ``spark.read.format("streamwire")`` of the stream (what
  ``python -m bench --spark`` times), through :class:`TimedSource`, the same reader with a
  stopwatch around every ``next()`` of its iterator;
* **floor**: :class:`FloorSource`, a data source of the same schema whose reader yields
  one pre-built Arrow batch (built by the same ``_arrow.columns_batch`` from ``batch``
  rows of ``size`` bytes) over and over, ``count`` rows in all: what Spark costs per row
  for this schema when the reader costs nothing;
* **floor value,offset**: the same with only ``value binary, offset long``: what the five
  other columns cost Spark;
* optionally a job that does not write every column (``--sinks``): ``count()`` and
  ``sum(length(value))`` over the streamwire read;

and the plain client's ``next_batch(2000)`` read of the stream in this process.

CPU per row is read from ``/proc`` per process over each job (user + system, with the
children each process reaped): the **JVM**, its **Python workers** (every descendant of the
JVM: the daemon, the task's worker, the planners) and the **driver** (this process, Py4J),
net of the same job over one row. Inside the worker the reader's iterator records its own
time: the main thread's CPU inside ``next()`` (building the batches, waiting on the event
loop) and the whole process's CPU inside ``next()`` (the same plus the event-loop thread's
reading); the rest of the worker is PySpark (Arrow IPC to the JVM). Medians over rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

import streamwire.rabbitmq as rmq
from bench._common import markdown_table, median
from bench.spark import JVM_FLAGS, _create, _drop, plain_read, plain_write, session
from streamwire.codec.columns import Columns
from streamwire.spark import _arrow
from streamwire.spark._options import SourceOptions
from streamwire.spark._schema import SOURCE_SCHEMA_DDL
from streamwire.spark.datasource import StreamwireBatchReader, StreamwireDataSource

__all__ = ("FloorSource", "TimedSource", "floor_batch", "main", "run")

#: where the timed reader appends one JSON line per task (inherited by Spark's workers)
TIMING_ENV = "STREAMWIRE_BENCH_TIMING"

# --- CPU per process --------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int, float] | None:
    """(name, parent, CPU seconds incl. reaped children) of a live process."""
    return _stat_path(f"/proc/{pid}/stat")


def _stat_path(path: str) -> tuple[str, int, float] | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text.rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return name, int(fields[1]), ticks / os.sysconf("SC_CLK_TCK")


def tree_cpu() -> dict[str, float]:
    """CPU seconds so far of this process (``driver``), its JVM (``jvm``) and every
    descendant of the JVM (``worker``). A process's CPU includes the children it reaped, so
    a Python worker that exited during a job is counted in its parent's."""
    stats = {int(e): s for e in os.listdir("/proc") if e.isdigit() and (s := _stat(int(e)))}
    children: dict[int, list[int]] = {}
    for pid, (_, parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    out = {"driver": 0.0, "jvm": 0.0, "worker": 0.0}

    def walk(pid: int, role: str) -> None:
        name, _, cpu = stats[pid]
        if role == "driver" and name == "java":
            role = "jvm"
        elif role == "jvm":
            role = "worker"
        out[role] += cpu
        for child in children.get(pid, ()):
            walk(child, "worker" if role == "worker" else role)

    walk(os.getpid(), "driver")
    return out


# --- the timed reader -------------------------------------------------------------------


def _threads_cpu() -> dict[int, float]:
    """CPU seconds so far of each thread of this process."""
    out: dict[int, float] = {}
    for tid in os.listdir("/proc/self/task"):
        stat = _stat_path(f"/proc/self/task/{tid}/stat")
        if stat is not None:
            out[int(tid)] = stat[2]
    return out


def _timed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches``, recording the CPU spent inside ``next()`` to the timing file."""
    main_cpu = proc_cpu = 0.0
    rows = count = 0
    start_proc = time.process_time()
    start_threads = _threads_cpu()
    while True:
        t, p = time.thread_time(), time.process_time()
        try:
            batch = next(batches)
        except StopIteration:
            break
        finally:
            main_cpu += time.thread_time() - t
            proc_cpu += time.process_time() - p
        rows += batch.num_rows
        count += 1
        yield batch
    record = {
        "rows": rows,
        "batches": count,
        "main_in_next": main_cpu,
        "process_in_next": proc_cpu,
        "process_in_read": time.process_time() - start_proc,
    }
    main_tid = threading.get_native_id()
    for tid, cpu in _threads_cpu().items():
        key = "main_thread" if tid == main_tid else "other_threads"
        record[key] = record.get(key, 0.0) + cpu - start_threads.get(tid, 0.0)
    path = os.environ.get(TIMING_ENV)
    if path:
        with open(path, "a", encoding="ascii") as f:
            f.write(json.dumps(record) + "\n")


def _merged(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """``batches`` concatenated into batches of at least ``rows`` rows (the last fewer)."""
    held: list[pa.RecordBatch] = []
    n = 0
    for batch in batches:
        held.append(batch)
        n += batch.num_rows
        if n >= rows:
            yield pa.concat_batches(held)
            held, n = [], 0
    if held:
        yield pa.concat_batches(held)


class _TimedReader(StreamwireBatchReader):
    merge_rows = 0

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        batches = super().read(partition)
        if self.merge_rows:
            batches = _merged(batches, self.merge_rows)
        return _timed(batches)


class TimedSource(StreamwireDataSource):
    """The streamwire data source with a stopwatch around its reader's iterator."""

    @classmethod
    def name(cls) -> str:
        return "streamwire_timed"

    def reader(self, schema: Any) -> StreamwireBatchReader:
        options = dict(self.options)
        merge_rows = int(options.pop("mergerows", 0))
        reader = _TimedReader(SourceOptions.parse(options, streaming=False))
        reader.merge_rows = merge_rows
        return reader


# --- Spark's floor ----------------------------------------------------------------------


def floor_batch(rows: int, size: int, stream: str) -> pa.RecordBatch:
    """A batch of ``rows`` messages of ``size`` bytes as the reader builds it from a chunk
    (``_arrow.columns_batch``): values and offsets wrap buffers, the rest constants."""
    ends = memoryview(bytearray(4 * (rows + 1))).cast("i")
    for i in range(rows + 1):
        ends[i] = i * size
    offsets = memoryview(bytearray(8 * rows)).cast("q")
    for i in range(rows):
        offsets[i] = i
    cols = Columns(rows, ends.tobytes(), b"x" * (rows * size), offsets.tobytes(), 1_700_000_000)
    batch, _ = _arrow.columns_batch(cols, stream, 0, 0, rows)
    return batch


class _FloorReader(DataSourceReader):
    def __init__(self, rows: int, batch_rows: int, size: int, stream: str, names: list[str]):
        self.rows, self.batch_rows, self.size = rows, batch_rows, size
        self.stream, self.names = stream, names

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        batch = floor_batch(self.batch_rows, self.size, self.stream).select(self.names)
        left = self.rows
        while left >= batch.num_rows:
            yield batch
            left -= batch.num_rows
        if left:
            yield batch.slice(0, left)


_DDL_TYPES = {"value": "binary", "offset": "long", "key": "binary", "partition": "int"}


class FloorSource(DataSource):
    """``rows`` rows (option), the same pre-built batch of ``batchRows`` over and over, in
    the source schema or, with ``columns=value,offset``, in those columns only."""

    @classmethod
    def name(cls) -> str:
        return "streamwire_floor"

    def _names(self) -> list[str]:
        columns = str(self.options.get("columns", "")).strip()
        return columns.split(",") if columns else list(_arrow.SCHEMA.names)

    def schema(self) -> str:
        names = self._names()
        if names == list(_arrow.SCHEMA.names):
            return SOURCE_SCHEMA_DDL
        return ", ".join(f"{n} {_DDL_TYPES[n]}" for n in names)

    def reader(self, schema: Any) -> DataSourceReader:
        o = self.options
        return _FloorReader(
            int(o["rows"]), int(o["batchRows"]), int(o["size"]), str(o["stream"]), self._names()
        )


async def small_chunks(url: str, stream: str, count: int, size: int, per_chunk: int) -> None:
    """Publish ``count`` messages in confirmed runs of ``per_chunk``: the broker stores
    chunks of at most that many (a producer that trickles, not one that floods)."""
    async with await rmq.connect(url) as client, client.producer(stream) as producer:
        body = b"x" * size
        for _ in range(0, count, per_chunk):
            await asyncio.wait_for(await producer.send_many([body] * per_chunk), 30)


# --- the jobs ---------------------------------------------------------------------------


def _job(df: Any, sink: str) -> Callable[[], object]:
    if sink == "noop":
        return lambda: df.write.format("noop").mode("overwrite").save()
    if sink == "count":
        return lambda: df.count()
    if sink == "sumlen":
        return lambda: df.selectExpr("sum(length(value))").collect()
    raise ValueError(sink)


def measure(job: Callable[[], object]) -> tuple[float, dict[str, float]]:
    before = tree_cpu()
    started = time.perf_counter()
    job()
    elapsed = time.perf_counter() - started
    after = tree_cpu()
    return elapsed, {k: after[k] - before[k] for k in before}


def run(
    url: str,
    rounds: int,
    count: int,
    size: int,
    batch_rows: list[int],
    sinks: list[str],
    jvm_flags: str = JVM_FLAGS,
    floor_columns: bool = True,
    merge_rows: tuple[int, ...] = (),
    chunk_messages: int = 0,
) -> dict[str, Any]:
    fd, timing_path = tempfile.mkstemp(prefix="sw-spark-timing-", suffix=".jsonl")
    os.close(fd)
    os.environ[TIMING_ENV] = timing_path
    samples: dict[str, dict[str, list[float]]] = {}

    def add(label: str, key: str, value: float) -> None:
        samples.setdefault(label, {}).setdefault(key, []).append(value)

    def last_timing() -> dict[str, Any]:
        with open(timing_path, encoding="ascii") as f:
            lines = f.read().splitlines()
        return dict(json.loads(lines[-1])) if lines else {}

    with session(jvm_flags) as spark:
        spark.dataSource.register(TimedSource)
        spark.dataSource.register(FloorSource)

        def streamwire_df(stream: str, rows: int, merge: int = 0) -> Any:
            return (
                spark.read.format("streamwire_timed")
                .option("mergeRows", merge)
                .option("url", url)
                .option("stream", stream)
                .option("startingOffsets", "earliest")
                .option("endingOffsets", f'{{"0": {rows}}}')
                .load()
            )

        def floor_df(stream: str, rows: int, batch: int, columns: str = "") -> Any:
            reader = spark.read.format("streamwire_floor").option("rows", rows)
            reader = reader.option("batchRows", batch).option("size", size)
            return reader.option("stream", stream).option("columns", columns).load()

        def net(label: str, make: Callable[[int], Any], sink: str, timed: bool) -> None:
            one_s, one = measure(_job(make(1), sink))
            one_t = last_timing() if timed else {}
            full_s, full = measure(_job(make(count), sink))
            for role in full:
                add(label, role, (full[role] - one[role]) * 1e6 / count)
            add(label, "total", sum(full[r] - one[r] for r in full) * 1e6 / count)
            add(label, "rows/s net", count / max(full_s - one_s, 1e-9))
            if timed:
                t = last_timing()
                for key in ("main_in_next", "process_in_next", "main_thread", "other_threads"):
                    add(label, key, (t.get(key, 0.0) - one_t.get(key, 0.0)) * 1e6 / count)
                add(label, "rows/batch", t["rows"] / max(t["batches"], 1))

        warm = asyncio.run(_create(url))  # JVM warm-up (C2 compiles the hot loops)
        asyncio.run(plain_write(url, warm, 100_000, size))
        for _ in range(3):
            for sink in ["noop", *sinks]:
                _job(streamwire_df(warm, 100_000), sink)()
            _job(floor_df(warm, 100_000, batch_rows[0]), "noop")()
        asyncio.run(_drop(url, warm))
        for r in range(rounds):
            stream = asyncio.run(_create(url))
            try:
                if chunk_messages:
                    asyncio.run(small_chunks(url, stream, count, size, chunk_messages))
                else:
                    asyncio.run(plain_write(url, stream, count, size))
                parts: list[Callable[[], None]] = []

                def sw(sink: str, stream: str = stream) -> None:
                    net(f"streamwire {sink}", lambda n: streamwire_df(stream, n), sink, True)

                parts.append(lambda: sw("noop"))
                for m in merge_rows:

                    def merged(m: int = m, stream: str = stream) -> None:
                        net(
                            f"streamwire noop merged {m}",
                            lambda n: streamwire_df(stream, n, m),
                            "noop",
                            True,
                        )

                    parts.append(merged)
                for b in batch_rows:

                    def fl(b: int = b, stream: str = stream) -> None:
                        net(f"floor batch {b}", lambda n: floor_df(stream, n, b), "noop", False)
                        if not floor_columns:
                            return
                        net(
                            f"floor value,offset batch {b}",
                            lambda n: floor_df(stream, n, b, "value,offset"),
                            "noop",
                            False,
                        )

                    parts.append(fl)
                for sink in sinks:

                    def extra(sink: str = sink) -> None:
                        sw(sink)

                    parts.append(extra)

                def plain(stream: str = stream) -> None:
                    from bench.spark import last_cpu

                    seconds = asyncio.run(plain_read(url, stream, count))
                    add("plain next_batch", "total", last_cpu[0] * 1e6 / count)
                    add("plain next_batch", "rows/s net", count / seconds)

                parts.append(plain)
                for part in parts if r % 2 == 0 else parts[::-1]:
                    part()
                print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
            finally:
                asyncio.run(_drop(url, stream))
    os.unlink(timing_path)
    return {
        "count": count,
        "size": size,
        "rounds": {
            k: {m: [round(x, 3) for x in v] for m, v in d.items()} for k, d in samples.items()
        },
        "medians": {k: {m: median(v) for m, v in d.items()} for k, d in samples.items()},
    }


COLUMNS = [
    "total",
    "jvm",
    "worker",
    "driver",
    "main_in_next",
    "process_in_next",
    "main_thread",
    "other_threads",
    "rows/batch",
    "rows/s net",
]


def table(result: dict[str, Any]) -> str:
    rows = []
    for label, m in result["medians"].items():
        cells = [label]
        for c in COLUMNS:
            v = m.get(c)
            cells.append("–" if v is None else f"{v:,.0f}" if c.startswith("row") else f"{v:.3f}")
        rows.append(cells)
    return markdown_table(["job", *COLUMNS], rows, right=range(1, len(COLUMNS) + 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rabbitmq", default=os.environ.get("STREAMWIRE_BENCH_RABBITMQ"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=400_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--batch-rows", default="10000", help="floor batch sizes, comma list")
    parser.add_argument("--sinks", default="", help="extra jobs: count,sumlen")
    parser.add_argument("--jvm-flags", default=JVM_FLAGS, help="the driver JVM's options")
    parser.add_argument("--merge-rows", default="", help="streamwire batches merged to N rows")
    parser.add_argument("--chunk-messages", type=int, default=0, help="publish in runs of N")
    parser.add_argument("--no-floor-columns", action="store_true", help="skip value,offset")
    parser.add_argument("--output", help="JSON result file")
    args = parser.parse_args(argv)
    if not args.rabbitmq:
        parser.error("--rabbitmq URL (or STREAMWIRE_BENCH_RABBITMQ)")
    batch_rows = [int(b) for b in args.batch_rows.split(",")]
    sinks = [s for s in args.sinks.split(",") if s]
    result = run(
        args.rabbitmq,
        args.rounds,
        args.count,
        args.size,
        batch_rows,
        sinks,
        args.jvm_flags,
        not args.no_floor_columns,
        tuple(int(m) for m in args.merge_rows.split(",") if m),
        args.chunk_messages,
    )
    result["jvm_flags"] = args.jvm_flags
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    print(table(result))
    return 0


if __name__ == "__main__":  # run as bench.spark_split, so Spark's workers import its sources
    from bench.spark_split import main as _main

    raise SystemExit(_main())
