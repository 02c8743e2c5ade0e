"""Spark against the plain client, per executor core: ``python -m bench --spark``.

Each round publishes ``count`` messages of ``size`` bytes to a fresh RabbitMQ stream, then,
alternating the order from round to round:

* **plain read**: ``consumer.next_batch(2000)`` from the first offset until every message
  came (what the data source's task does, without Spark);
* **Spark read**: ``spark.read.format("streamwire")`` of the whole stream on a ``local[1]``
  session (one executor core, one partition: the stream's), written to Spark's ``noop``
  sink so every column of every row is materialised; and again with a user schema of two
  columns, ``value binary, offset long`` (:data:`PICKED`: Spark 4.3 does not prune a Python
  source's columns, a user schema does);
* **plain write**: ``producer.send_many`` of the same count and size, all confirmed;
* **Spark write**: ``df.write.format("streamwire")`` of a one-partition DataFrame of the
  same count and size (a ``value`` column), all confirmed.

A Spark job has a fixed cost (planning, a Python worker, connecting, the bounds lookup)
that does not depend on the row count; each round also times the same job over one row and
reports the rate both raw (rows / job time) and net of that fixed cost (rows / (job time -
one-row job time)). CPU per row: the plain client's process time; for Spark, the CPU of
this process and all its descendants (the JVM and its Python workers, read from ``/proc``)
over the job, net of the one-row job: what one executor core spends per row, whatever else
runs on the machine. Medians over the rounds; rate ratios are Spark ÷ plain client, the CPU
ratio plain ÷ Spark (above 1: Spark spends less per row).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import streamwire
import streamwire.rabbitmq as rmq
from bench._common import fmt_rate, fmt_ratio, markdown_table, median, ratio, settle_heap

__all__ = ("run", "table")

TIMEOUT = 120.0
PICKED = "value binary, offset long"
"""The user schema of the second Spark read: the columns a job that only wants the payloads
and their positions reads."""
WARM_JOBS = 6
"""Read and write jobs run before the timed rounds, each read over the rounds' row count."""
JVM_FLAGS = "-XX:+UseSerialGC"
"""The driver JVM's options: the JIT's full tiers, as a production executor runs (C2 compiles
Spark's per-row loops; stopping at C1, as the tests do to start quickly, doubles Spark's CPU
per row: docs/benchmarks/notes/2026-11.md, "the Spark read, split and floor"). The serial
collector keeps the JVM's own threads off the two cores."""


@contextmanager
def session(
    jvm_flags: str = JVM_FLAGS,
    *,
    master: str = "local[1]",
    memory: str = "1g",
    extra: dict[str, str] | None = None,
) -> Iterator[Any]:
    """A SparkSession on ``master`` (``local[1]``) whose Python workers run this interpreter,
    with streamwire registered; ``extra``: more settings (``spark.jars``...)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("streamwire-bench")
        .config("spark.driver.extraJavaOptions", jvm_flags)
        .config("spark.driver.memory", memory)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for name, value in (extra or {}).items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from streamwire.spark import register

    register(spark)
    try:
        yield spark
    finally:
        spark.stop()


async def _create(url: str, prefix: str = "bench-spark") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    async with await rmq.connect(url) as client:
        await client.create_stream(name)
    return name


async def _drop(url: str, stream: str) -> None:
    async with await rmq.connect(url) as client:
        await client.delete_stream(stream)


async def plain_write(url: str, stream: str, count: int, size: int) -> float:
    """Seconds to publish ``count`` messages with ``send_many``, all confirmed."""
    async with await rmq.connect(url) as client, client.producer(stream) as producer:
        body = b"x" * size
        settle_heap()
        started, cpu = time.perf_counter(), time.process_time()
        futures = [
            await producer.send_many([body] * min(10_000, count - start))
            for start in range(0, count, 10_000)
        ]
        await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)
        last_cpu[0] = time.process_time() - cpu
        return time.perf_counter() - started


async def plain_read(url: str, stream: str, count: int) -> float:
    """Seconds to read ``count`` messages with ``next_batch(2000)`` from the first offset."""
    async with await streamwire.connect(url) as client:
        settle_heap()
        started, cpu = time.perf_counter(), time.process_time()
        seen = 0
        async with client.consumer(stream, offset="first") as consumer:
            while seen < count:
                batch = await consumer.next_batch(2000, timeout=10)
                if not batch:
                    raise RuntimeError(f"plain read stalled after {seen} messages")
                seen += len(batch)
        last_cpu[0] = time.process_time() - cpu
        return time.perf_counter() - started


#: What a standalone cluster's executor JVM runs (its worker starts it, not this process).
_EXECUTOR = b"org.apache.spark.executor.CoarseGrainedExecutorBackend"


def _executors() -> list[int]:
    """The live Spark executor JVMs of a standalone cluster on this machine."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if _EXECUTOR in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _tree_cpu_each() -> dict[int, float]:
    """CPU seconds (user + system) used so far by this process and every live descendant
    (the JVM Spark runs in and its Python workers), and by every executor of a standalone
    cluster on this machine and its Python workers (none with a ``local`` master), per
    process, each with its reaped children's (``cutime`` and ``cstime``)."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        # utime, stime, and cutime, cstime: the reaped children's
        cpu[int(entry)] = sum(int(f) for f in fields[11:15]) / tick
    roots = [os.getpid(), *_executors()]
    mine, out, frontier = set(roots), {}, list(roots)
    while frontier:
        pid = frontier.pop()
        out[pid] = cpu.get(pid, 0.0)
        children = [c for c, p in parents.items() if p == pid and c not in mine]
        mine.update(children)
        frontier += children
    return out


def _tree_cpu() -> float:
    """:func:`_tree_cpu_each`, summed."""
    return sum(_tree_cpu_each().values())


def _cpu_since(before: dict[int, float]) -> float:
    """CPU seconds the tree used since the snapshot ``before`` (:func:`_tree_cpu_each`):
    each live process's growth since then, all of it for one started since. A process that
    ended meanwhile counts for what its parent reaped of it, or for nothing: PySpark's daemon
    ignores SIGCHLD, so a Python worker it stops (an idle one, after a minute) leaves no
    time behind, and taking the difference of two sums would subtract its whole life."""
    return sum(max(0.0, cpu - before.get(pid, 0.0)) for pid, cpu in _tree_cpu_each().items())


#: CPU seconds of the last timed job, this process and its descendants
last_cpu: list[float] = [0.0]


def _timed(job: Callable[[], object]) -> float:
    cpu = _tree_cpu_each()
    started = time.perf_counter()
    job()
    elapsed = time.perf_counter() - started
    last_cpu[0] = _cpu_since(cpu)
    return elapsed


def spark_read(spark: Any, url: str, stream: str, rows: int, schema: str | None = None) -> float:
    """Seconds for a Spark job reading offsets ``[0, rows)`` of ``stream`` into ``noop`` (the
    source's columns, or those of ``schema``)."""
    reader = spark.read.format("streamwire")
    if schema is not None:
        reader = reader.schema(schema)
    df = (
        reader.option("url", url)
        .option("stream", stream)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", f'{{"0": {rows}}}')
        .load()
    )
    return _timed(lambda: df.write.format("noop").mode("overwrite").save())


def spark_write(spark: Any, url: str, stream: str, rows: int, size: int) -> float:
    """Seconds for a Spark job publishing ``rows`` rows of ``size`` bytes from one partition."""
    from pyspark.sql import functions as F

    df = spark.range(0, rows, 1, 1).select(F.lit(b"x" * size).alias("value"))
    df.count()  # plan the source before the clock starts
    writer = df.write.format("streamwire").mode("append").option("url", url)
    return _timed(lambda: writer.option("stream", stream).save())


def run(url: str, rounds: int, count: int, size: int, jvm_flags: str = JVM_FLAGS) -> dict[str, Any]:
    """Medians over ``rounds`` of rows/s: plain read and write, Spark read and write (raw and
    net of the one-row job), and the ratios."""
    samples: dict[str, list[float]] = {
        k: [] for k in ("plain read", "spark read", "spark read net", "plain write")
    }
    samples.update({"spark write": [], "spark write net": []})
    samples.update({"spark read picked": [], "spark read picked net": []})
    cpu_us: dict[str, list[float]] = {
        k: []
        for k in (
            "plain read",
            "spark read net",
            "spark read picked net",
            "plain write",
            "spark write net",
        )
    }
    with session(jvm_flags) as spark:
        # the first jobs pay for the JVM's warm-up (C2 compiling Spark's per-row loops takes
        # a few million rows) and the worker's start
        warm = asyncio.run(_create(url))
        asyncio.run(plain_write(url, warm, count, size))
        for _ in range(WARM_JOBS):
            spark_read(spark, url, warm, count)
            spark_read(spark, url, warm, count, PICKED)
            spark_write(spark, url, warm, 100_000, size)
        asyncio.run(_drop(url, warm))
        for r in range(rounds):
            stream = asyncio.run(_create(url))
            target = asyncio.run(_create(url))
            try:
                write_s = asyncio.run(plain_write(url, stream, count, size))
                samples["plain write"].append(count / write_s)
                cpu_us["plain write"].append(last_cpu[0] * 1e6 / count)

                def spark_part(stream: str = stream, target: str = target) -> None:
                    def net(key: str, job: Callable[[int], float]) -> None:
                        """The job over one row, then over ``count``: the rate raw and net
                        of the one-row job, and the CPU per row net of it."""
                        one = job(1)
                        one_cpu = last_cpu[0]
                        full = job(count)
                        samples[key].append(count / full)
                        samples[f"{key} net"].append(count / max(full - one, 1e-9))
                        cpu_us[f"{key} net"].append((last_cpu[0] - one_cpu) * 1e6 / count)

                    net("spark read", lambda n: spark_read(spark, url, stream, n))
                    net("spark read picked", lambda n: spark_read(spark, url, stream, n, PICKED))
                    net("spark write", lambda n: spark_write(spark, url, target, n, size))

                def plain_part(stream: str = stream) -> None:
                    seconds = asyncio.run(plain_read(url, stream, count))
                    samples["plain read"].append(count / seconds)
                    cpu_us["plain read"].append(last_cpu[0] * 1e6 / count)

                for part in (plain_part, spark_part) if r % 2 == 0 else (spark_part, plain_part):
                    part()
            finally:
                asyncio.run(_drop(url, stream))
                asyncio.run(_drop(url, target))
    medians = {k: median(v) for k, v in samples.items()}
    return {
        "count": count,
        "size": size,
        "rounds": {k: [round(x) for x in v] for k, v in samples.items()},
        "msg_per_s": medians,
        "cpu_us_per_msg": {k: median(v) for k, v in cpu_us.items()},
        "cpu_rounds": {k: [round(x, 2) for x in v] for k, v in cpu_us.items()},
        "jvm_flags": jvm_flags,
        "read_ratio": ratio(medians["spark read"], medians["plain read"]),
        "read_ratio_net": ratio(medians["spark read net"], medians["plain read"]),
        "picked_read_ratio": ratio(medians["spark read picked"], medians["plain read"]),
        "picked_read_ratio_net": ratio(medians["spark read picked net"], medians["plain read"]),
        "write_ratio": ratio(medians["spark write"], medians["plain write"]),
        "write_ratio_net": ratio(medians["spark write net"], medians["plain write"]),
    }


def _us(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def table(result: dict[str, Any]) -> str:
    rates = result["msg_per_s"]
    rows = [
        [
            "read",
            fmt_rate(rates["plain read"]),
            fmt_rate(rates["spark read"]),
            fmt_ratio(result["read_ratio"]),
            fmt_rate(rates["spark read net"]),
            fmt_ratio(result["read_ratio_net"]),
        ],
        [
            f"read, `{PICKED}`",
            fmt_rate(rates["plain read"]),
            fmt_rate(rates["spark read picked"]),
            fmt_ratio(result["picked_read_ratio"]),
            fmt_rate(rates["spark read picked net"]),
            fmt_ratio(result["picked_read_ratio_net"]),
        ],
        [
            "write",
            fmt_rate(rates["plain write"]),
            fmt_rate(rates["spark write"]),
            fmt_ratio(result["write_ratio"]),
            fmt_rate(rates["spark write net"]),
            fmt_ratio(result["write_ratio_net"]),
        ],
    ]
    cpu = result["cpu_us_per_msg"]
    pairs = [
        ("plain read", "spark read net"),
        ("plain read", "spark read picked net"),
        ("plain write", "spark write net"),
    ]
    for r, (plain_key, spark_key) in zip(rows, pairs, strict=True):
        plain, spark = cpu[plain_key], cpu[spark_key]
        r += [_us(plain), _us(spark), fmt_ratio(ratio(plain, spark))]
    header = ["", "plain client", "Spark (local[1])", "ratio", "Spark net of fixed", "ratio"]
    header += ["plain CPU µs/row", "Spark CPU µs/row (net)", "CPU ratio"]
    return markdown_table(header, rows, right=range(1, 9))
