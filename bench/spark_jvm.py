"""streamwire's Spark data source against the JVM connector a user could pick instead, in
the same Spark session: ``python -m bench --spark-jvm``.

The peer is **Sparkling Rabbit** (a DataSource V2 connector in Java over RabbitMQ's Java
stream client; format ``rabbitmq_streams``). Nothing of it is in this repository: build its
``spark41`` artifact from a snapshot of its sources with Maven
(``mvn -pl spark41 -am -DskipTests package``) and name the shaded jar in
``STREAMWIRE_SPARKLING_RABBIT_JAR``, as ``IGGY_SERVER_BIN`` names an Iggy server. It loads in
PySpark 4.3.0.

One ``local[2]`` session (``--spark-jvm-master`` for another) carries both: the connector's
jar on its class path, streamwire registered. Per message size, one RabbitMQ stream holds
``rows`` messages, written once by streamwire's plain producer; both sides read that stream.
Every round runs each shape on both sides, one after the other, the side that goes first
alternating from round to round:

* **batch read, count**: ``count()`` of the whole stream;
* **batch read, aggregate**: ``sum(length(value))`` and ``max(offset)``: every value read;
* **streaming read**: ``readStream`` with ``Trigger.AvailableNow`` into Spark's ``noop``
  sink (every column of every row materialised);
* **batch write**: ``rows`` rows of one ``value`` column from ``spark.range`` in two
  partitions, ``write ... save()`` into a fresh stream;
* **streaming write**: the same rows read from Parquet files with ``Trigger.AvailableNow``
  into a fresh stream, each side with its deduplication on (streamwire: its query identity;
  the connector: ``producerName``).

Each job is checked (the count, the aggregate, the rows the stream received) before its time
counts. Rates are rows over the job's wall time; CPU per row is that of this process and all
its descendants (the JVM and the Python workers: ``bench.spark._cpu_since``) over the job,
the broker's excluded. Every shape runs once on each side before the timed rounds (the
JIT's warm-up). Ratios are streamwire ÷ the connector per round (rates) and the connector ÷
streamwire (CPU), medians over the rounds with the lowest and highest round.

A third side, **Spark's floor**, runs every job in the same rounds through a Python source
and sink that do nothing (``bench/spark_floor.py``: prebuilt Arrow batches of the source's
schema, in one Spark partition as a one-partition stream is read; a writer that drops its
batches): what Spark's own per-row work costs a Python data source, and streamwire's rate
as a share of it.

A fourth, **the broker's ceiling**, asks RabbitMQ for the same rows with no Spark and no
client work per message (``bench/raw_rabbitmq.py``), in the same rounds: a read job reads the
stream from its first offset on one connection, counting records from chunk headers; a write
job publishes the rows over two connections at once (as the two Spark tasks do), frames
encoded before the clock starts, at most ``DEFAULT_MAX_IN_FLIGHT`` unconfirmed on each (the
sink's default per task). On a machine where the broker shares the cores with Spark, it is
the most any connector could get from this broker, and each side's rate is shown as a share
of it.

A fifth, **the floor receiving the stream**, runs the read jobs through the floor's source
with the stream to receive (``bench/spark_floor.py``): the broker's ceiling's raw reader in
the Python worker, the floor's prebuilt batches handed to Spark as the records come. No
decoding, no columns built: what any Python data source pays for Spark's per-row work and
for taking its bytes off the wire, on the same cores as the broker and the JVM. Its ratio to
the connector is the most a Python source could lead the connector by here. The write jobs'
counterpart is **the floor sending the rows**: the floor's sink, each Spark task publishing
as many messages of the row size as it was handed rows, on one raw connection (frames
encoded once, at most the sink's 10,000 unconfirmed, a publisher with no name), checked as
the others are: what a Python sink pays for Spark and for putting its bytes on the wire,
before it encodes a row.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import streamwire
import streamwire.rabbitmq as rmq
from bench import raw_rabbitmq
from bench._common import fmt_rate, fmt_ratio, markdown_table, settle_heap
from bench.spark import JVM_FLAGS, _cpu_since, _drop, _tree_cpu_each
from bench.spark import _create as spark_create
from bench.spark import session as spark_session

__all__ = ("JAR_ENV", "SHAPES", "SIDES", "guarantee", "run", "table")

JAR_ENV = "STREAMWIRE_SPARKLING_RABBIT_JAR"
SIDES = ("streamwire", "sparkling-rabbit")
#: Spark's own floor: the same jobs through a Python source and sink that do nothing
#: (``bench/spark_floor.py``), timed in the same rounds.
FLOOR = "floor"
#: The broker's ceiling: the same reads and writes over raw sockets (``bench/raw_rabbitmq.py``),
#: timed in the same rounds.
BROKER = "broker"
#: Spark's floor receiving the stream (reads only): the floor's batches, handed out as the
#: broker's ceiling's raw reader receives the rows in the Python worker.
RECEIVING = "floor, receiving"
#: Spark's floor sending the rows (writes only): the floor's sink, each task publishing as
#: many messages as it was handed rows on one raw connection (the broker's ceiling's frames).
SENDING = "floor, sending"
#: Unconfirmed messages per publishing connection of the broker's ceiling: the sink's default
#: ``maxInFlight`` per task (``streamwire.spark._options.DEFAULT_MAX_IN_FLIGHT``).
SINK_IN_FLIGHT = 10_000
SHAPES = (
    "batch read, count",
    "batch read, aggregate",
    "streaming read",
    "batch write",
    "streaming write",
)
TIMEOUT = 600.0


def guarantee(side: str, shape: str) -> str:
    """What a side's job guarantees about the rows it stores (``–`` for a read)."""
    if "write" not in shape:
        return "–"
    if side == "streamwire":
        if shape == "batch write":
            return "exactly-once per write (RabbitMQ dedup, a writeId per write)"
        return "exactly-once (RabbitMQ dedup, the query's identity)"
    if shape == "batch write":
        return "at-least-once (its batch writes have no dedup)"
    return "dedup of a retried epoch (producerName)"


def jar_path() -> Path:
    """The connector's shaded jar, from :data:`JAR_ENV`; a clear error without one."""
    value = os.environ.get(JAR_ENV)
    if not value or not Path(value).is_file():
        raise SystemExit(
            f"{JAR_ENV} must name Sparkling Rabbit's shaded spark41 jar (build it from a "
            "snapshot of lukaszsamson/spark-rabbitmq-streams-connector, outside this "
            "repository: mvn -pl spark41 -am -DskipTests package; the jar is "
            "spark41/target/spark-rabbitmq-streams-connector-spark41-*-SNAPSHOT.jar)"
            + (f"; {value!r} is not a file" if value else "")
        )
    return Path(value)


@contextmanager
def session(jar: Path, master: str, jvm_flags: str = JVM_FLAGS) -> Iterator[Any]:
    """``bench.spark.session`` on ``master`` with the connector's jar."""
    with spark_session(
        jvm_flags,
        master=master,
        memory="2g",
        extra={"spark.jars": str(jar), "spark.sql.shuffle.partitions": "2"},
    ) as spark:
        yield spark


async def _create(url: str) -> str:
    return await spark_create(url, "bench-jvm")


async def _fill(url: str, stream: str, rows: int, size: int) -> None:
    async with await rmq.connect(url) as client, client.producer(stream) as producer:
        futures = [
            await producer.send_many([b"x" * size] * min(10_000, rows - start))
            for start in range(0, rows, 10_000)
        ]
        await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)


async def _stored(url: str, stream: str) -> int:
    """How many messages ``stream`` holds, read to its tail and counted (an offset is not a
    message: RabbitMQ writes its deduplication state into chunks of their own, which take
    offsets, whenever a segment of a stream with named producers rolls over)."""
    async with streamwire.connect(url) as client:
        assert isinstance(client, streamwire.Bounded)
        bounds = (await client.offset_bounds(stream))[0]
        count, last = 0, bounds.first - 1
        if bounds.next > bounds.first:
            async with client.consumer(stream, offset="first") as consumer:
                quiet = time.monotonic() + 30.0  # a broker busy with what it just took
                while last < bounds.next - 1 and time.monotonic() < quiet:
                    batch = await consumer.next_batch(10_000, timeout=2.0)
                    if batch:
                        count, last = count + len(batch), batch[-1].offset or 0
                        quiet = time.monotonic() + 30.0
    return count


class Job:
    """One side's job of one shape, on one session; :meth:`__call__` runs it and returns
    ``(seconds, cpu_seconds)`` once it checked what it did."""

    def __init__(self, spark: Any, url: str, side: str, shape: str, size: int, rows: int) -> None:
        self.spark, self.url, self.side, self.shape = spark, url, side, shape
        self.size, self.rows = size, rows
        parts = streamwire.parse_url(url)
        self.endpoint = f"{parts.host}:{parts.port}"
        self.username, self.password = parts.username or "guest", parts.password or "guest"

    def _batch_reader(self, stream: str) -> Any:
        if self.side in (FLOOR, RECEIVING):
            return self._floor(self.spark.read, stream).load()
        if self.side == "streamwire":
            reader = self.spark.read.format("streamwire").option("url", self.url)
        else:
            reader = self._jvm(self.spark.read.format("rabbitmq_streams"))
        return reader.option("stream", stream).option("startingOffsets", "earliest").load()

    def _floor(self, builder: Any, stream: str = "") -> Any:
        """The floor's reader or writer: as many rows, of the same size, in one Spark
        partition as streamwire reads a one-partition stream in; :data:`RECEIVING`'s reader
        receives ``stream`` too, :data:`SENDING`'s writer publishes into it."""
        builder = (
            builder.format("streamwire_floor")
            .option("rows", str(self.rows))
            .option("size", str(self.size))
            .option("partitions", "1")
        )
        if self.side in (RECEIVING, SENDING):
            parts = streamwire.parse_url(self.url)
            builder = (
                builder.option("stream", stream)
                .option("host", parts.host)
                .option("port", str(parts.port))
            )
        return builder

    def _jvm(self, builder: Any) -> Any:
        return (
            builder.option("endpoints", self.endpoint)
            .option("username", self.username)
            .option("password", self.password)
        )

    def __call__(self, source: str, parquet: Path, work: Path) -> tuple[float, float]:
        from pyspark.sql import functions as F

        shape, rows = self.shape, self.rows
        if self.side == BROKER:
            return self._raw(source)
        if shape == "batch read, count":
            df = self._batch_reader(source)
            got, seconds, cpu = _timed(df.count)
            assert got == rows, (self.side, shape, got)
        elif shape == "batch read, aggregate":
            df = self._batch_reader(source).agg(
                F.sum(F.length("value")).alias("n"), F.max("offset").alias("last")
            )
            got, seconds, cpu = _timed(df.collect)
            assert got[0]["n"] == rows * self.size, (self.side, shape, got)
        elif shape == "streaming read":
            seconds, cpu = self._streaming_read(source, work)
        elif self.side == FLOOR:  # nothing is stored: the rows are dropped
            if shape == "batch write":
                seconds, cpu = self._batch_write("")
            else:
                seconds, cpu = self._streaming_write("", parquet, work)
        else:
            target = asyncio.run(_create(self.url))
            try:
                if shape == "batch write":
                    seconds, cpu = self._batch_write(target)
                else:
                    seconds, cpu = self._streaming_write(target, parquet, work)
                stored = asyncio.run(_stored(self.url, target))
                assert stored == rows, (self.side, shape, stored)
            finally:
                asyncio.run(_drop(self.url, target))
        return seconds, cpu

    def _raw(self, source: str) -> tuple[float, float]:
        """The broker's ceiling for this job: ``source`` read on one raw connection, or the
        rows published into a fresh stream on two at once (checked as the others are)."""
        parts = streamwire.parse_url(self.url)
        host, port, rows = parts.host, parts.port, self.rows
        if "read" in self.shape:
            # it returns once the chunk headers counted every row
            _, seconds, cpu = _timed(
                lambda: asyncio.run(raw_rabbitmq.consume(host, port, source, rows))
            )
            return seconds, cpu
        target = asyncio.run(_create(self.url))
        try:
            half = rows // 2

            async def both() -> None:
                await asyncio.gather(
                    *(
                        raw_rabbitmq.publish(
                            host, port, target, n, self.size, window=SINK_IN_FLIGHT
                        )
                        for n in (half, rows - half)
                    )
                )

            _, seconds, cpu = _timed(lambda: asyncio.run(both()))
            stored = asyncio.run(_stored(self.url, target))
            assert stored == rows, (self.side, self.shape, stored)
        finally:
            asyncio.run(_drop(self.url, target))
        return seconds, cpu

    def _streaming_read(self, source: str, work: Path) -> tuple[float, float]:
        if self.side in (FLOOR, RECEIVING):
            df = self._floor(self.spark.readStream, source).load()
            return self._noop(df, work)
        if self.side == "streamwire":
            reader = self.spark.readStream.format("streamwire").option("url", self.url)
        else:
            reader = self._jvm(self.spark.readStream.format("rabbitmq_streams"))
        df = reader.option("stream", source).option("startingOffsets", "earliest").load()
        return self._noop(df, work)

    def _noop(self, df: Any, work: Path) -> tuple[float, float]:
        """``df`` streamed into Spark's ``noop`` sink with ``Trigger.AvailableNow``."""
        checkpoint = work / f"read-{uuid.uuid4().hex[:8]}"
        query_box: list[Any] = []

        def run() -> None:
            query = (
                df.writeStream.format("noop")
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination(TIMEOUT)
            query_box.append(query)

        _, seconds, cpu = _timed(run)
        query = query_box[0]
        if query.exception() is not None:
            raise RuntimeError(f"{self.side} streaming read failed: {query.exception()}")
        got = sum(p["numInputRows"] for p in query.recentProgress)
        assert got == self.rows, (self.side, "streaming read", got)
        return seconds, cpu

    def _rows(self) -> Any:
        from pyspark.sql import functions as F

        df = self.spark.range(0, self.rows, 1, 2).select(F.lit(b"x" * self.size).alias("value"))
        df.cache().count()  # built before the clock starts
        return df

    def _batch_write(self, target: str) -> tuple[float, float]:
        df = self._rows()
        try:
            if self.side in (FLOOR, SENDING):
                writer = self._floor(df.write, target).mode("append")
            elif self.side == "streamwire":
                writer = df.write.format("streamwire").mode("append").option("url", self.url)
            else:
                writer = self._jvm(df.write.format("rabbitmq_streams").mode("append"))
            _, seconds, cpu = _timed(writer.option("stream", target).save)
        finally:
            df.unpersist()
        return seconds, cpu

    def _streaming_write(self, target: str, parquet: Path, work: Path) -> tuple[float, float]:
        df = self.spark.readStream.schema("value binary").parquet(str(parquet))
        checkpoint = work / f"write-{uuid.uuid4().hex[:8]}"
        if self.side in (FLOOR, SENDING):
            writer = self._floor(df.writeStream, target)
        elif self.side == "streamwire":
            writer = df.writeStream.format("streamwire").option("url", self.url)
        else:
            writer = self._jvm(df.writeStream.format("rabbitmq_streams")).option(
                "producerName", f"bench-{uuid.uuid4().hex[:8]}"
            )
        writer = (
            writer.option("stream", target)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
        )
        query_box: list[Any] = []

        def run() -> None:
            query = writer.start()
            query.awaitTermination(TIMEOUT)
            query_box.append(query)

        _, seconds, cpu = _timed(run)
        if query_box[0].exception() is not None:
            raise RuntimeError(f"{self.side} streaming write failed: {query_box[0].exception()}")
        return seconds, cpu


def _timed(job: Callable[[], Any]) -> tuple[Any, float, float]:
    settle_heap()
    cpu = _tree_cpu_each()
    started = time.perf_counter()
    result = job()
    return result, time.perf_counter() - started, _cpu_since(cpu)


def run(
    url: str,
    *,
    rounds: int,
    rows: int,
    sizes: list[int],
    master: str = "local[2]",
    jvm_flags: str = JVM_FLAGS,
) -> dict[str, Any]:
    """Every shape on both sides, ``rounds`` times per message size (see the module notes);
    the report: per size and shape, each side's rates and CPU per row per round."""
    jar = jar_path()
    work = Path(tempfile.mkdtemp(prefix="bench-jvm-"))
    report: dict[str, Any] = {"rows": rows, "master": master, "jar": jar.name, "sizes": {}}
    try:
        with session(jar, master, jvm_flags) as spark:
            from bench import spark_floor  # pyarrow and pyspark: only where Spark runs

            spark_floor.register(spark)
            for size in sizes:
                source = asyncio.run(_create(url))
                parquet = work / f"rows-{size}"
                try:
                    asyncio.run(_fill(url, source, rows, size))
                    from pyspark.sql import functions as F

                    spark.range(0, rows, 1, 2).select(
                        F.lit(b"x" * size).alias("value")
                    ).write.parquet(str(parquet))
                    report["sizes"][str(size)] = _rounds(
                        spark, url, size, rows, rounds, source, parquet, work
                    )
                finally:
                    asyncio.run(_drop(url, source))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


def _rounds(
    spark: Any,
    url: str,
    size: int,
    rows: int,
    rounds: int,
    source: str,
    parquet: Path,
    work: Path,
) -> dict[str, Any]:
    jobs = {
        (side, shape): Job(spark, url, side, shape, size, rows)
        for shape in SHAPES
        for side in _sides(shape)
    }
    for job in jobs.values():  # warm-up: the JIT, the workers, the connections
        job(source, parquet, work)
    out: dict[str, Any] = {}
    for shape in SHAPES:
        every = _sides(shape)
        rates: dict[str, list[float]] = {side: [] for side in every}
        cpu: dict[str, list[float]] = {side: [] for side in every}
        for r in range(rounds):
            for side in every if r % 2 == 0 else tuple(reversed(every)):
                seconds, cpu_s = jobs[(side, shape)](source, parquet, work)
                rates[side].append(rows / seconds)
                cpu[side].append(cpu_s * 1e6 / rows)
                print(
                    f"[spark-jvm] {size} B {shape} round {r + 1}: {side} "
                    f"{rows / seconds:,.0f} rows/s, {cpu_s * 1e6 / rows:.2f} µs/row",
                    flush=True,
                )
        out[shape] = {"rows_per_s": rates, "cpu_us_per_row": cpu}
    return out


def _sides(shape: str) -> tuple[str, ...]:
    """The sides that run ``shape``: :data:`RECEIVING` only reads, :data:`SENDING` only
    writes."""
    return (*SIDES, FLOOR, SENDING if "write" in shape else RECEIVING, BROKER)


def _paired(mine: list[float], theirs: list[float]) -> tuple[float, float, float]:
    ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
    return statistics.median(ratios), min(ratios), max(ratios)


def _shares(rate: dict[str, list[float]], ceiling: list[float]) -> str:
    """The broker's ceiling (median) and each side's rate as a share of it (medians of the
    rounds' shares)."""
    mine = _paired(rate["streamwire"], ceiling)[0]
    theirs = _paired(rate["sparkling-rabbit"], ceiling)[0]
    return f"{fmt_rate(statistics.median(ceiling))} ({mine:.0%}; {theirs:.0%})"


def _on_the_wire(rate: dict[str, list[float]], floor: list[float]) -> str:
    """The floor receiving the stream or sending the rows (median), streamwire's rate as a
    share of it and its rate over the connector's (medians of the rounds')."""
    mine = _paired(rate["streamwire"], floor)[0]
    lead = _paired(floor, rate["sparkling-rabbit"])[0]
    return f"{fmt_rate(statistics.median(floor))} ({mine:.0%}; {fmt_ratio(lead)})"


def table(report: dict[str, Any]) -> str:
    """Per size and shape: both sides' median rows/s and CPU µs per row, the rate ratio
    (streamwire ÷ the connector, median of the rounds, lowest–highest) and the CPU ratio
    (the connector ÷ streamwire), Spark's floor and the broker's ceiling where the report has
    them, and what each side's write guarantees."""
    body = []
    for size, shapes in report["sizes"].items():
        for shape, found in shapes.items():
            rate, cpu = found["rows_per_s"], found["cpu_us_per_row"]
            ratio, low, high = _paired(rate["streamwire"], rate["sparkling-rabbit"])
            cpu_ratio = _paired(cpu["sparkling-rabbit"], cpu["streamwire"])[0]
            floor = rate.get(FLOOR) or []
            of_floor = _paired(rate["streamwire"], floor)[0] if floor else None
            ceiling = rate.get(BROKER) or []
            wire = rate.get(RECEIVING) or rate.get(SENDING) or []
            body.append(
                [
                    f"{shape}, {int(size):,} B",
                    fmt_rate(statistics.median(rate["streamwire"])),
                    fmt_rate(statistics.median(rate["sparkling-rabbit"])),
                    f"{fmt_ratio(ratio)} ({low:.2f}–{high:.2f})",
                    f"{statistics.median(cpu['streamwire']):.2f} / "
                    f"{statistics.median(cpu['sparkling-rabbit']):.2f} ({fmt_ratio(cpu_ratio)})",
                    "–" if not floor else f"{fmt_rate(statistics.median(floor))} ({of_floor:.0%})",
                    "–" if not wire else _on_the_wire(rate, wire),
                    "–" if not ceiling else _shares(rate, ceiling),
                    f"{guarantee('streamwire', shape)}; {guarantee('sparkling-rabbit', shape)}"
                    if "write" in shape
                    else "–",
                ]
            )
    header = [
        "job",
        "streamwire rows/s",
        "Sparkling Rabbit rows/s",
        "rate ratio (rounds min–max)",
        "CPU µs/row, streamwire / Sparkling Rabbit (ratio)",
        "Spark's floor rows/s (streamwire's share of it)",
        "the floor on the wire, receiving the stream or sending the rows, rows/s "
        "(streamwire's share; its ratio to Sparkling Rabbit)",
        "the broker's ceiling rows/s (streamwire's share; Sparkling Rabbit's)",
        "guarantees (streamwire; Sparkling Rabbit)",
    ]
    return markdown_table(header, body, right=(1, 2, 3, 5, 6, 7))
