"""The ``streamwire`` Python data source in a local[2] SparkSession against real brokers:
batch write and read, streaming write, streaming read with admission control and
Trigger.AvailableNow, offsets, registration."""

from __future__ import annotations

import asyncio
import json
import pickle
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource
from pyspark.sql.types import BinaryType, MapType, StringType, StructField, StructType

import streamwire
from integration.harness.faultproxy import ThreadedFaultProxy
from streamwire.rabbitmq.superstream import hash_partition
from streamwire.spark import DataLossError, SparkConfigurationError, StreamwireDataSource, register
from streamwire.spark._options import SourceOptions
from streamwire.spark._resume import ROW_HEADER
from streamwire.spark._runtime import close_runtime
from streamwire.spark.datasource import (
    ADMISSION_CONTROL,
    LAG_KEY,
    READ_MAX_BYTES,
    SKIPPED_KEY,
    ReadAllAvailable,
    ReadMaxBytes,
    ReadMaxRows,
    StreamwireFilteringBatchReader,
    StreamwirePartition,
)
from tests.proxy import proxied
from tests.spark._support import Target, publish, read_back, target
from tests.spark._support import run_available_now as available_now

#: Admission control and Trigger.AvailableNow for Python sources came with pyspark 4.2.
needs_admission_control = pytest.mark.skipif(
    not ADMISSION_CONTROL, reason="maxRecordsPerTrigger and AvailableNow need pyspark >= 4.2"
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

SINK_SCHEMA = StructType(
    [
        StructField("value", BinaryType()),
        StructField("key", BinaryType()),
        StructField("headers", MapType(StringType(), BinaryType())),
    ]
)


def messages(n: int, *, start: int = 0) -> list[streamwire.Message]:
    return [
        streamwire.Message(
            f"m{i:04d}".encode(),
            key=f"k{i % 2}".encode(),
            headers={"n": str(i).encode()} if i % 2 else None,
        )
        for i in range(start, start + n)
    ]


def test_batch_write_then_batch_read(spark: Any, any_broker: Target) -> None:
    stream = any_broker.new_stream("dsbatch")
    try:
        data = [(f"b{i:03d}".encode(), b"key", {"h": b"v"} if i % 2 else None) for i in range(30)]
        df = spark.createDataFrame(spark.sparkContext.parallelize(data, 2), SINK_SCHEMA)
        df.write.format("streamwire").mode("append").option("url", any_broker.url).option(
            "stream", stream
        ).save()
        stored = read_back(any_broker, stream, expect=30)
        assert sorted(m.value for m in stored) == [v for v, _, _ in data]

        read = (
            spark.read.format("streamwire")
            .option("url", any_broker.url)
            .option("stream", stream)
            .load()
        )
        assert read.schema.simpleString() == (
            "struct<value:binary,key:binary,headers:map<string,binary>,stream:string,"
            "partition:int,offset:bigint,timestamp:timestamp>"
        )
        got = read.collect()
        assert sorted(r.value for r in got) == [v for v, _, _ in data]
        for r in got:
            assert (r.key, r.stream) == (b"key", stream)
            assert r.headers == ({"h": b"v"} if int(r.value[1:]) % 2 else None)
            assert r.timestamp is not None
            assert r.offset >= 0
    finally:
        any_broker.delete_stream(stream)


def test_sub_batch_entries_read_as_the_rows_they_hold(spark: Any, rabbitmq: Target) -> None:
    """A stream written with sub-batch entries (``sub_batch_size``, as the foreachBatch
    sink can write them), compressed ones and plain entries between them: the source
    reads every row once, at its offset, as a plain consumer does (uncompressed entries as
    chunk columns, the rest message by message)."""
    stream = rabbitmq.new_stream("subbatch")
    bodies = [bytes([i % 251]) * (i % 300) for i in range(1000)]

    async def write() -> None:
        async with streamwire.connect(rabbitmq.url, timeout=10.0) as client:
            for options, part in (
                ({"sub_batch_size": 7}, bodies[:600]),
                ({}, bodies[600:700]),
                ({"sub_batch_size": 9, "compression": "gzip"}, bodies[700:800]),
                ({"sub_batch_size": 50}, bodies[800:]),
            ):
                async with client.producer(stream, **options) as producer:
                    await producer.send_many(part)
                    await producer.flush(30.0)

    try:
        asyncio.run(write())
        stored = read_back(rabbitmq, stream, expect=len(bodies))
        assert [m.value for m in stored] == bodies
        read = spark.read.format("streamwire").option("url", rabbitmq.url)
        got = read.option("stream", stream).load().select("value", "offset").collect()
        assert sorted((r.offset, r.value) for r in got) == [(m.offset, m.value) for m in stored]
    finally:
        rabbitmq.delete_stream(stream)


def test_a_writeid_dedups_a_rerun_and_stores_other_rows_written_under_it(
    spark: Any, any_broker: Target
) -> None:
    """``writeId``: a rerun of the same write stores nothing twice; a later write that reuses
    the ``writeId`` for other rows stores every one of them (it used to lose those at the
    positions the first write had stored, on every broker, silently)."""
    stream = any_broker.new_stream("dswriteid")

    def write(values: list[bytes]) -> None:
        data = [(v, b"key", None) for v in values]
        df = spark.createDataFrame(spark.sparkContext.parallelize(data, 2), SINK_SCHEMA)
        df.write.format("streamwire").mode("append").option("url", any_broker.url).option(
            "stream", stream
        ).option("writeId", "orders-load").save()

    first = [f"a{i:03d}".encode() for i in range(30)]
    second = [f"b{i:03d}".encode() for i in range(30)]
    try:
        write(first)
        write(first)  # a rerun of the same write
        write(second)  # the same writeId, other rows
        stored = read_back(any_broker, stream, expect=60)
        assert sorted(m.value for m in stored) == first + second
    finally:
        any_broker.delete_stream(stream)


def test_a_user_schema_picks_the_columns_a_read_carries(spark: Any, any_broker: Target) -> None:
    """``spark.read.schema(...)`` with some of the source's columns, in another order (one
    declared NOT NULL, which the source allows for columns that are never null): the rows
    hold those columns only, with the values a full read gives."""
    stream = any_broker.new_stream("dsproj")
    try:
        publish(any_broker, stream, messages(12))
        reader = spark.read.format("streamwire").option("url", any_broker.url)
        full = reader.option("stream", stream).load().collect()
        picked = (
            reader.schema("offset long not null, headers map<string,binary>, value binary")
            .option("stream", stream)
            .load()
        )
        assert picked.schema.fieldNames() == ["offset", "headers", "value"]
        got = sorted((r.value, r.offset, r.headers) for r in picked.collect())  # values: unique
        assert got == sorted((r.value, r.offset, r.headers) for r in full)
        assert [v for v, _, _ in got] == [m.value for m in messages(12)]
        assert [r.headers for r in picked.where("value = 'm0003'").collect()] == [{"n": b"3"}]
        # the message properties and annotations are columns a user schema may pick too
        props = streamwire.MessageProperties(
            message_id="order-17",
            content_type="application/json",
            creation_time=datetime(2026, 11, 28, 10, 0, 0, 123_000, tzinfo=UTC),
        )
        assert props.creation_time is not None
        publish(
            any_broker,
            stream,
            [streamwire.Message(b"with", properties=props, annotations={"x-opt-a": "b"})],
        )
        with_props = (
            reader.schema(
                "value binary, message_id string, content_type string, "
                "creation_time timestamp, `to` string, annotations map<string,binary>"
            )
            .option("stream", stream)
            .load()
            .collect()
        )
        assert len(with_props) == 13
        assert [tuple(r) for r in with_props if r.value == b"with"] == [
            (
                b"with",
                "order-17",
                "application/json",
                props.creation_time.astimezone().replace(tzinfo=None),  # pyspark: local, naive
                None,
                {"x-opt-a": b"b"},
            )
        ]
        assert {r.message_id for r in with_props if r.value != b"with"} == {None}
    finally:
        any_broker.delete_stream(stream)


@pytest.mark.parametrize(
    ("ddl", "problem"),
    [
        ("value string", "column 'value' is binary, not string"),
        ("value binary, size int", "the source has no column 'size'"),
        ("key binary not null", "column 'key' can be null"),
    ],
)
def test_a_user_schema_that_is_not_a_choice_of_the_columns_is_refused(
    spark: Any, rabbitmq: Target, ddl: str, problem: str
) -> None:
    read = spark.read.format("streamwire").schema(ddl).option("url", rabbitmq.url)
    with pytest.raises(Exception, match=problem):
        read.option("stream", "never-created").load().collect()


def test_batch_write_refuses_a_wrong_schema_before_writing(spark: Any, rabbitmq: Target) -> None:
    df = spark.range(3).select(F.col("id").alias("value"))
    with pytest.raises(Exception, match="column 'value' must be binary"):
        df.write.format("streamwire").mode("append").option("url", rabbitmq.url).option(
            "stream", "never-created"
        ).save()


def test_streaming_write(spark: Any, any_broker: Target, tmp_path: Path) -> None:
    stream = any_broker.new_stream("dswrite")
    source = tmp_path / "in"
    source.mkdir()
    for f in range(2):
        lines = "".join(json.dumps({"id": f * 100 + i}) + "\n" for i in range(50))
        (source / f"{f}.json").write_text(lines)
    try:
        ids = spark.readStream.schema("id long").json(str(source))
        out = ids.select(
            F.concat(F.lit("s"), F.col("id").cast("string")).cast("binary").alias("value"),
            F.create_map(F.lit("id"), F.col("id").cast("string").cast("binary")).alias("headers"),
        )
        query = (
            out.writeStream.format("streamwire")
            .option("url", any_broker.url)
            .option("stream", stream)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        assert query.exception() is None
        stored = read_back(any_broker, stream, expect=100)
        expected = sorted(f"s{f * 100 + i}".encode() for f in range(2) for i in range(50))
        assert sorted(m.value for m in stored) == expected
        for m in stored:
            headers = dict(m.headers)
            tag = headers.pop(ROW_HEADER, None)
            assert headers == {"id": m.value[1:]}
            # Liftbridge and Iggy messages carry the row identity the sink resumes by
            assert (tag is None) == (any_broker.broker == "rabbitmq")
    finally:
        any_broker.delete_stream(stream)


def run_available_now(
    spark: Any, t: Target, stream: str, checkpoint: Path, schema: str | None = None
) -> list[list[Any]]:
    """One availableNow run of a streaming read with maxRecordsPerTrigger=4 (of the columns
    of ``schema``, if given); the rows of each micro-batch (foreachBatch runs in this process,
    so a list collects them)."""
    batches: list[list[Any]] = []

    def collect(df: Any, batch_id: int) -> None:
        batches.append(sorted(df.collect(), key=lambda r: (r.partition, r.offset)))

    options = {
        "url": t.url,
        "stream": stream,
        "startingOffsets": "earliest",
        "maxRecordsPerTrigger": 4,
    }
    available_now(spark, options, checkpoint, collect, schema)
    return batches


@needs_admission_control
def test_streaming_read_with_admission_control_and_available_now(
    spark: Any, any_broker: Target, tmp_path: Path
) -> None:
    stream = any_broker.new_stream("dsread")
    checkpoint = tmp_path / "ckpt"
    try:
        publish(any_broker, stream, messages(10))
        batches = run_available_now(spark, any_broker, stream, checkpoint)
        assert all(0 < len(b) <= 4 for b in batches)
        rows = [r for b in batches for r in b]
        assert sorted(r.value for r in rows) == [f"m{i:04d}".encode() for i in range(10)]
        for r in rows:
            i = int(r.value[1:])
            assert (r.key, r.stream) == (f"k{i % 2}".encode(), stream)
            assert r.headers == ({"n": str(i).encode()} if i % 2 else None)
            assert r.timestamp is not None
        for p in range(any_broker.partitions):  # each partition's offsets, gap-free, in order
            offsets = [r.offset for r in rows if r.partition == p]
            assert offsets == list(range(len(offsets)))
        if any_broker.partitions == 1:  # one partition: 4 + 4 + 2 in publishing order
            assert [len(b) for b in batches] == [4, 4, 2]
            assert [r.value for r in rows] == [f"m{i:04d}".encode() for i in range(10)]

        # the checkpoint holds our offsets JSON: {"<stream>": {"<partition>": next offset}}
        logged = [f for f in (checkpoint / "offsets").iterdir() if f.name.isdigit()]
        last = max(logged, key=lambda f: int(f.name))
        committed = json.loads(last.read_text().splitlines()[-1])
        assert list(committed) == [stream]
        assert sum(committed[stream].values()) == 10

        # a second run resumes from the checkpoint and reads only what is new
        publish(any_broker, stream, messages(3, start=10))
        again = [r for b in run_available_now(spark, any_broker, stream, checkpoint) for r in b]
        assert sorted(r.value for r in again) == [b"m0010", b"m0011", b"m0012"]
    finally:
        any_broker.delete_stream(stream)


def _streaming_query(
    spark: Any, t: Target, stream: str, checkpoint: Path, **options: str
) -> tuple[Any, list[list[Any]]]:
    """A running streaming read of ``stream`` from its start with ``options``, a trigger
    every 200 ms, and the rows of each non-empty micro-batch (collected in this process)."""
    batches: list[list[Any]] = []

    def collect(df: Any, batch_id: int) -> None:
        rows = df.collect()
        if rows:
            batches.append(sorted(rows, key=lambda r: (r.partition, r.offset)))

    reader = (
        spark.readStream.format("streamwire")
        .option("url", t.url)
        .option("stream", stream)
        .option("startingOffsets", "earliest")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    return query, batches


def _wait_for(batches: list[list[Any]], query: Any, timeout: float = 60.0) -> list[Any]:
    deadline = time.monotonic() + timeout
    while not batches and time.monotonic() < deadline:
        assert query.exception() is None, query.exception()
        time.sleep(0.1)
    assert batches, f"no micro-batch in {timeout} s"
    return batches[0]


@needs_admission_control
def test_min_offsets_per_trigger_waits_for_enough_offsets_or_its_delay(
    spark: Any, any_broker: Target, tmp_path: Path
) -> None:
    """``minOffsetsPerTrigger=5``: three messages make no micro-batch however many
    triggers pass; three more make one of at least five (all six unless a trigger came
    between their appends), and no second batch follows for what is left. With
    ``maxTriggerDelay=2s``, two messages make a batch once the delay passed."""
    stream = any_broker.new_stream("minoffsets")
    other = any_broker.new_stream("mindelay")
    try:
        publish(any_broker, stream, messages(3))
        query, batches = _streaming_query(
            spark,
            any_broker,
            stream,
            tmp_path / "a",
            minOffsetsPerTrigger="5",
            maxTriggerDelay="1h",
        )
        try:
            time.sleep(2.0)  # about ten triggers
            assert query.exception() is None, query.exception()
            assert batches == []  # three offsets of five: held back
            publish(any_broker, stream, messages(3, start=3))
            first = _wait_for(batches, query)
            # the three are not stored at one instant (a super stream's go to their
            # partitions one producer after another), so a trigger may see five of the six:
            # the batch is due then, and a sixth left over is one offset of five: held back
            six = [f"m{i:04d}".encode() for i in range(6)]
            values = sorted(r.value for r in first)
            assert len(values) >= 5, values
            assert set(values) <= set(six), values
            time.sleep(1.0)  # about five triggers
            assert query.exception() is None, query.exception()
            assert len(batches) == 1, batches
        finally:
            query.stop()

        publish(any_broker, other, messages(2))
        query, batches = _streaming_query(
            spark,
            any_broker,
            other,
            tmp_path / "b",
            minOffsetsPerTrigger="5",
            maxTriggerDelay="2s",
        )
        try:
            first = _wait_for(batches, query)
            assert sorted(r.value for r in first) == [b"m0000", b"m0001"]  # by the delay
        finally:
            query.stop()
    finally:
        any_broker.delete_stream(stream)
        any_broker.delete_stream(other)


def _values_read(spark: Any, t: Target, stream: str, **options: str) -> list[bytes]:
    reader = spark.read.format("streamwire").option("url", t.url).option("stream", stream)
    for name, value in options.items():
        reader = reader.option(name, value)
    return sorted(r.value for r in reader.load().select("value").collect())


def test_a_read_starts_and_ends_at_times(spark: Any, any_broker: Target) -> None:
    """``startingTimestamp`` / ``startingOffsetsByTimestamp`` and their ending twins, on a
    stream published in three groups a second apart: a read from the time between the
    first two groups gets the last two, one ending at the time between the last two gets the
    middle one; a start past the last message is an error naming the strategy, or (with
    ``startingOffsetsByTimestampStrategy=latest``) an empty read."""
    stream = any_broker.new_stream("bytime")
    try:
        publish(any_broker, stream, messages(3))
        time.sleep(1.0)
        middle = int(time.time() * 1000)
        time.sleep(1.0)
        publish(any_broker, stream, messages(3, start=3))
        time.sleep(1.0)
        last = int(time.time() * 1000)
        time.sleep(1.0)
        publish(any_broker, stream, messages(2, start=6))
        time.sleep(1.0)
        after = int(time.time() * 1000)
        expect = [f"m{i:04d}".encode() for i in range(8)]
        # several partitions: some hold nothing after the time (messages go by key), which
        # is an error by default, as in Kafka's source; their tail, with "latest"
        lenient = (
            {"startingOffsetsByTimestampStrategy": "latest"} if any_broker.partitions > 1 else {}
        )

        assert (
            _values_read(spark, any_broker, stream, startingTimestamp=str(middle), **lenient)
            == expect[3:]
        )
        by_partition = json.dumps({str(p): middle for p in range(any_broker.partitions)})
        assert (
            _values_read(
                spark, any_broker, stream, startingOffsetsByTimestamp=by_partition, **lenient
            )
            == expect[3:]
        )
        assert (
            _values_read(
                spark,
                any_broker,
                stream,
                startingTimestamp=str(middle),
                endingTimestamp=str(last),
                **lenient,
            )
            == expect[3:6]
        )
        ending = json.dumps({stream: {str(p): last for p in range(any_broker.partitions)}})
        assert (
            _values_read(spark, any_broker, stream, endingOffsetsByTimestamp=ending) == expect[:6]
        )
        with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy=latest"):
            _values_read(spark, any_broker, stream, startingTimestamp=str(after))
        late = {"startingTimestamp": str(after), "startingOffsetsByTimestampStrategy": "latest"}
        assert _values_read(spark, any_broker, stream, **late) == []
    finally:
        any_broker.delete_stream(stream)


def _without_lag(report: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (report or {}).items() if k != LAG_KEY}


@needs_admission_control
def test_a_streaming_read_reports_its_lag_behind_the_tails(any_broker: Target) -> None:
    """The query's progress (``sources[].latestOffset``) carries ``streamwire.lag``, as
    Kafka's source reports its offsets behind latest: after a batch of 4 of 10 messages, 6
    offsets behind in all and their bytes estimated from a sample (every message here is
    7 bytes of value and key); after the rest, nothing."""
    stream = any_broker.new_stream("lag")
    try:
        publish(any_broker, stream, messages(10))
        options = {"url": any_broker.url, "stream": stream, "startingOffsets": "earliest"}
        reader = StreamwireDataSource(options).streamReader(None)
        try:
            start = reader.initialOffset()
            end = reader.latestOffset(start, ReadMaxRows(4))
            lag = (reader.reportLatestOffset() or {})[LAG_KEY]
            behind = lag["offsetsBehindLatest"]
            assert sum(behind.values()) == 6, lag
            assert lag["maxOffsetsBehindLatest"] == max(behind.values())
            assert lag["minOffsetsBehindLatest"] == min(behind.values())
            assert lag["avgOffsetsBehindLatest"] == pytest.approx(6 / len(behind))
            assert lag["estimatedBytesBehindLatest"] == 6 * 7
            reader.latestOffset(end, ReadAllAvailable())
            lag = (reader.reportLatestOffset() or {})[LAG_KEY]
            assert lag["maxOffsetsBehindLatest"] == 0
            assert lag["estimatedBytesBehindLatest"] == 0
        finally:
            reader.stop()
    finally:
        any_broker.delete_stream(stream)


def test_connect_options_send_the_connections_through_a_load_balancer(
    spark: Any, rabbitmq: Target
) -> None:
    """``connectOptions={"load_balancer": true}`` reaches the readers' and writers' clients:
    against a RabbitMQ reached through a proxy (a load balancer's stand-in), a read with it
    opens more connections through the proxy than one without (whose consumer dials the
    node's advertised address directly), and both read the rows a write through the proxy
    with it stored."""
    stream = rabbitmq.new_stream("balanced")
    parts = streamwire.parse_url(rabbitmq.url)
    proxy = ThreadedFaultProxy(parts.host, parts.port).start()
    try:
        via = replace(rabbitmq, url=proxied(rabbitmq.url, proxy.port))
        balanced = json.dumps({"load_balancer": True})
        rows = sorted(f"v{i:02d}".encode() for i in range(20))
        (
            spark.createDataFrame([(r,) for r in rows], "value binary")
            .write.format("streamwire")
            .mode("append")
            .option("url", via.url)
            .option("stream", stream)
            .option("connectOptions", balanced)
            .save()
        )
        assert proxy.connections_made > 0
        before = proxy.connections_made
        assert _values_read(spark, via, stream) == rows
        plain = proxy.connections_made - before
        before = proxy.connections_made
        assert _values_read(spark, via, stream, connectOptions=balanced) == rows
        assert proxy.connections_made - before > plain
    finally:
        proxy.close()
        rabbitmq.delete_stream(stream)


@needs_admission_control
def test_max_bytes_per_trigger_bounds_each_micro_batch(
    spark: Any, any_broker: Target, tmp_path: Path
) -> None:
    """``maxBytesPerTrigger=350`` over messages of 102 bytes (a 100-byte value, a 2-byte key):
    no micro-batch holds more than 350 bytes, every partition moves, every message is read
    once."""
    stream = any_broker.new_stream("dsbytes")
    try:
        sent = [
            streamwire.Message(f"{i:03d}".encode() * 33 + b"!", key=f"k{i % 2}".encode())
            for i in range(12)
        ]
        publish(any_broker, stream, sent)
        batches: list[list[Any]] = []
        df = (
            spark.readStream.format("streamwire")
            .option("url", any_broker.url)
            .option("stream", stream)
            .option("startingOffsets", "earliest")
            .option("maxBytesPerTrigger", 350)
            .load()
        )
        query = (
            df.writeStream.foreachBatch(lambda batch, _: batches.append(batch.collect()))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        assert query.exception() is None
        sizes = [sum(len(r.value) + len(r.key) for r in b) for b in batches if b]
        assert all(0 < size <= 350 for size in sizes), sizes
        assert len(sizes) >= 4
        assert sorted(r.value for b in batches for r in b) == sorted(m.value for m in sent)
    finally:
        any_broker.delete_stream(stream)


def test_max_bytes_per_trigger_is_the_default_read_limit() -> None:
    options = {"url": "rabbitmq-stream://h", "stream": "s"}
    reader = StreamwireDataSource({**options, "maxBytesPerTrigger": "4096"}).streamReader(None)
    limit = reader.getDefaultReadLimit()
    if READ_MAX_BYTES:
        assert isinstance(limit, ReadMaxBytes)
        assert limit.max_bytes == 4096
    else:  # applied from the option
        assert isinstance(limit, ReadMaxRows)
    both = {**options, "maxBytesPerTrigger": "4096", "maxRecordsPerTrigger": "10"}
    assert StreamwireDataSource(both).streamReader(None).options.max_records == 10
    with pytest.raises(SparkConfigurationError, match="maxBytesPerTrigger"):
        StreamwireDataSource({**options, "maxBytesPerTrigger": "0"}).streamReader(None)


@needs_admission_control
def test_a_streaming_read_with_a_user_schema(spark: Any, rabbitmq: Target, tmp_path: Path) -> None:
    stream = rabbitmq.new_stream("dsprojstream")
    try:
        publish(rabbitmq, stream, messages(6))
        schema = "partition int, offset long, value binary"
        batches = run_available_now(spark, rabbitmq, stream, tmp_path / "ckpt", schema)
        assert [len(b) for b in batches] == [4, 2]
        rows = [r for b in batches for r in b]
        assert all(r.__fields__ == ["partition", "offset", "value"] for r in rows)
        assert [tuple(r) for r in rows] == [(0, i, f"m{i:04d}".encode()) for i in range(6)]
    finally:
        rabbitmq.delete_stream(stream)


def rows_of(batches: Iterator[Any]) -> list[tuple[Any, ...]]:
    """The rows of the reader's Arrow record batches as tuples in schema order (headers as a
    dict, the timestamp as a datetime)."""
    rows = []
    for batch in batches:
        for r in batch.to_pylist():
            headers = None if r["headers"] is None else dict(r["headers"])
            rows.append((r["value"], r["key"], headers, *list(r.values())[3:]))
    return rows


@needs_admission_control
def test_reader_offsets_and_partitions_without_a_query(rabbitmq: Target) -> None:
    """The stream reader's methods as the source runner calls them (in this process)."""
    stream = rabbitmq.new_stream("offsets")
    try:
        publish(rabbitmq, stream, messages(5))
        source = StreamwireDataSource(
            {"url": rabbitmq.url, "stream": stream, "startingOffsets": "earliest"}
        )
        reader = source.streamReader(None)
        try:
            initial = reader.initialOffset()
            assert json.dumps(initial) == json.dumps({stream: {"0": 0}})
            assert reader.getDefaultReadLimit() == ReadAllAvailable()
            # what Spark passes back is json.loads(json.dumps(offset))
            start = json.loads(json.dumps(initial))
            end = reader.latestOffset(start, ReadMaxRows(3))
            assert json.dumps(end) == json.dumps({stream: {"0": 3}})
            assert reader.latestOffset(start, ReadAllAvailable()) == {stream: {"0": 5}}
            assert _without_lag(reader.reportLatestOffset()) == {stream: {"0": 5}}
            # AvailableNow pins the target: later messages are not offered
            reader.prepareForTriggerAvailableNow()
            publish(rabbitmq, stream, messages(2, start=5))
            assert reader.latestOffset(end, ReadAllAvailable()) == {stream: {"0": 5}}

            planned = pickle.dumps(reader.partitions(start, end))
            (part,) = pickle.loads(planned)  # noqa: S301 (our own bytes)
            assert (part.partition, part.start, part.end) == (0, 0, 3)
            assert reader.partitions(end, end) == []
            rows = rows_of(reader.read(part))  # Arrow record batches, in the source schema
            assert [(r[0], r[3], r[4], r[5]) for r in rows] == [
                (b"m0000", stream, 0, 0),
                (b"m0001", stream, 0, 1),
                (b"m0002", stream, 0, 2),
            ]
        finally:
            reader.stop()
    finally:
        rabbitmq.delete_stream(stream)


def test_consumer_name_stores_the_committed_progress_on_the_broker(any_broker: Target) -> None:
    """With ``consumerName``, the stream reader's ``commit`` stores each partition's last
    offset read under that name, where ``client.committed_offset`` (and a consumer resuming
    with ``offset="next"``) finds it; partitions nothing was read from stay unset."""
    stream = any_broker.new_stream("dsprogress")
    try:
        publish(any_broker, stream, messages(9))
        source = StreamwireDataSource(
            {
                "url": any_broker.url,
                "stream": stream,
                "startingOffsets": "earliest",
                "consumerName": "spark-progress",
            }
        )
        reader = source.streamReader(None)
        try:
            end = json.loads(json.dumps(reader.latestOffset()))
            reader.commit(end)
        finally:
            reader.stop()
        tails = {int(p): n for p, n in end[stream].items()}
        assert sum(tails.values()) == 9

        async def stored() -> dict[int, int | None]:
            async with streamwire.connect(any_broker.url, timeout=10.0) as client:
                return {
                    p: await client.committed_offset(stream, "spark-progress", partition=p)
                    for p in tails
                }

        assert asyncio.run(stored()) == {p: (n - 1 if n else None) for p, n in tails.items()}
    finally:
        any_broker.delete_stream(stream)


def test_consumer_name_is_for_streaming_reads() -> None:
    source = StreamwireDataSource(
        {"url": "rabbitmq-stream://h", "stream": "s", "consumerName": "progress"}
    )
    with pytest.raises(SparkConfigurationError, match="consumerName applies to streaming"):
        source.reader(None)
    blank = StreamwireDataSource({"url": "rabbitmq-stream://h", "stream": "s", "consumerName": " "})
    with pytest.raises(SparkConfigurationError, match="consumerName must not be empty"):
        blank.streamReader(None)


def _truncated_stream(t: Target) -> tuple[str, int, int]:
    """A RabbitMQ stream whose retention (200 kB in 50 kB segments) already deleted its first
    messages: ``(name, first offset still there, tail)``."""
    stream = f"spark-loss-{uuid.uuid4().hex[:10]}"

    async def run() -> tuple[int, int]:
        async with streamwire.connect(t.url, timeout=10.0) as client:
            rmq: Any = client  # max_length_bytes and segment sizes are RabbitMQ's options
            await rmq.create_stream(stream, max_length_bytes=200_000, max_segment_size_bytes=50_000)
            async with client.producer(stream) as producer:
                for i in range(20):
                    await producer.send_batch(
                        [b"%05d" % (i * 100 + j) + b"x" * 995 for j in range(100)]
                    )
                    await producer.flush(10.0)
            assert isinstance(client, streamwire.Bounded)
            # the broker truncates in the background: wait until the first offset stays put
            seen = None
            for _ in range(50):
                (bounds,) = (await client.offset_bounds(stream)).values()
                if bounds == seen:
                    break
                seen = bounds
                await asyncio.sleep(0.5)
        return bounds.first, bounds.next

    first, tail = asyncio.run(run())
    assert 0 < first < tail == 2000, (first, tail)
    return stream, first, tail


def test_offsets_retention_deleted_fail_the_read_unless_it_may_skip_them(
    spark: Any, rabbitmq: Target, caplog: pytest.LogCaptureFixture
) -> None:
    """failOnDataLoss, as Kafka's source has it: a checkpoint (or startingOffsets) pointing at
    offsets retention deleted fails the read, naming them; with failOnDataLoss=false the
    read starts at the first offset still there and says what it skipped."""
    stream, first, tail = _truncated_stream(rabbitmq)
    try:
        options = {"url": rabbitmq.url, "stream": stream}
        from_zero = {stream: {"0": 0}}  # what a checkpoint written before the deletion holds
        reader = StreamwireDataSource(options).streamReader(None)
        try:
            end = reader.latestOffset(from_zero, ReadAllAvailable())
            assert end == {stream: {"0": tail}}
            with pytest.raises(DataLossError, match="failOnDataLoss=false") as lost:
                reader.partitions(from_zero, end)
            assert lost.value.lost == {0: (0, first)}
            assert f"partition 0: 0..{first - 1}" in str(lost.value)
        finally:
            reader.stop()

        assert SKIPPED_KEY not in (reader.reportLatestOffset() or {})  # only when it skips
        skipping = StreamwireDataSource({**options, "failOnDataLoss": "false"}).streamReader(None)
        try:
            with caplog.at_level("WARNING", logger="streamwire.spark.datasource"):
                assert skipping.latestOffset(from_zero, ReadAllAvailable()) == end
                # the count reaches the batch's progress (sources[].latestOffset)
                assert _without_lag(skipping.reportLatestOffset()) == {**end, SKIPPED_KEY: first}
                (part,) = skipping.partitions(from_zero, end)
            assert (part.start, part.end) == (first, tail)
            assert caplog.text.count(f"skipping {first} offsets") == 1
            assert _without_lag(skipping.reportLatestOffset()) == {**end, SKIPPED_KEY: first}
            offsets = [r[5] for r in rows_of(skipping.read(part))]
            assert offsets == list(range(first, tail))
        finally:
            skipping.stop()

        # through Spark: a batch read from offset 0 fails on the driver, saying why
        read = spark.read.format("streamwire").options(**options)
        with pytest.raises(Exception, match="failOnDataLoss"):
            read.option("startingOffsets", json.dumps({"0": 0})).load().collect()
        rows = (
            read.option("startingOffsets", json.dumps({"0": 0}))
            .option("failOnDataLoss", "false")
            .load()
            .select("offset")
            .collect()
        )
        assert sorted(r.offset for r in rows) == list(range(first, tail))
    finally:
        rabbitmq.delete_stream(stream)


def test_offsets_retention_deletes_after_planning_fail_the_read_unless_it_may_skip_them(
    rabbitmq: Target, caplog: pytest.LogCaptureFixture
) -> None:
    """failOnDataLoss at read time: a batch planned while its offsets were there, read after
    retention deleted them (here: planned before the truncation, as a slow query's next
    batch would be). The read fails naming them; with failOnDataLoss=false it reads what is
    left and says what it skipped. Before, the read silently started at the first offset
    still there."""
    stream, first, tail = _truncated_stream(rabbitmq)
    planned = StreamwirePartition(stream, 0, 0, tail)  # as planned before retention ran
    try:
        options = {"url": rabbitmq.url, "stream": stream}
        reader = StreamwireDataSource(options).streamReader(None)
        try:
            with pytest.raises(DataLossError, match="between planning this batch and") as lost:
                list(reader.read(planned))
            assert lost.value.lost == {0: (0, first)}
            assert f"partition 0: 0..{first - 1}" in str(lost.value)
            # a range that starts where the partition now starts reads without a question
            rest = StreamwirePartition(stream, 0, first, tail)
            assert [r[5] for r in rows_of(reader.read(rest))] == list(range(first, tail))
        finally:
            reader.stop()

        skipping = StreamwireDataSource({**options, "failOnDataLoss": "false"}).streamReader(None)
        try:
            with caplog.at_level("WARNING", logger="streamwire.spark.datasource"):
                offsets = [r[5] for r in rows_of(skipping.read(planned))]
            assert offsets == list(range(first, tail))
            assert f"skipping {first} offsets deleted between planning" in caplog.text
        finally:
            skipping.stop()
    finally:
        rabbitmq.delete_stream(stream)


@needs_admission_control
def test_a_stream_recreated_below_the_checkpoint_fails_the_query_unless_it_may_start_over(
    spark: Any, any_broker: Target, tmp_path: Path
) -> None:
    """A streaming query's stream deleted and created again (or reset) with fewer messages
    than the checkpoint had read: its offsets now name other messages. The query fails
    with DataLossError saying so; with failOnDataLoss=false it reads the new stream from
    its start. Before, the reader kept the checkpoint's offsets (offsets never move
    backwards) and waited there, silently, for the new stream to grow past them."""
    stream = any_broker.new_stream("recreated")
    checkpoint = tmp_path / "ckpt"
    try:
        publish(any_broker, stream, messages(10))
        assert (
            len([r for b in run_available_now(spark, any_broker, stream, checkpoint) for r in b])
            == 10
        )
        any_broker.recreate_stream(stream)
        publish(any_broker, stream, messages(3, start=100))

        progress: list[Any] = []  # the last run's StreamingQueryProgress

        def run(**options: str) -> tuple[Any, list[Any]]:
            rows: list[Any] = []
            df = (
                spark.readStream.format("streamwire")
                .option("url", any_broker.url)
                .option("stream", stream)
                .options(**options)
                .load()
            )
            query = (
                df.writeStream.foreachBatch(lambda batch, _: rows.extend(batch.collect()))
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
                .start()
            )
            try:
                query.awaitTermination()
            except Exception as exc:  # Spark's StreamingQueryException
                return exc, rows
            finally:
                progress[:] = query.recentProgress
            return None, rows

        failure, rows = run()
        assert failure is not None
        assert rows == []
        assert "DataLossError" in str(failure)
        assert "deleted and created again, or reset" in str(failure)
        failure, rows = run(failOnDataLoss="false")
        assert failure is None
        assert sorted(r.value for r in rows) == [m.value for m in messages(3, start=100)]
        # what the reader skipped is in the query's progress
        reported = [json.loads(p.sources[0].latestOffset or "{}") for p in progress]
        assert any(r.get(SKIPPED_KEY, 0) > 0 for r in reported), reported
    finally:
        any_broker.delete_stream(stream)


def test_min_partitions_reads_one_partition_in_several_tasks(spark: Any, rabbitmq: Target) -> None:
    """``minPartitions``: a RabbitMQ stream (one partition) read by four tasks, each a
    quarter of its offsets, every message once; the streaming reader plans the same."""
    stream = rabbitmq.new_stream("minp")
    try:
        publish(rabbitmq, stream, messages(40))
        options = {"url": rabbitmq.url, "stream": stream, "minPartitions": "4"}
        df = spark.read.format("streamwire").options(**options).load().select("offset", "value")
        assert df.rdd.getNumPartitions() == 4
        tasks = df.rdd.glom().map(lambda rows: [r.offset for r in rows]).collect()
        assert tasks == [list(range(i, i + 10)) for i in range(0, 40, 10)]
        assert [r.value for r in df.orderBy("offset").collect()] == [m.value for m in messages(40)]
        reader = StreamwireDataSource({**options, "startingOffsets": "earliest"}).streamReader(None)
        try:
            start = reader.initialOffset()
            end = reader.latestOffset(start, ReadAllAvailable())
            planned = [(p.start, p.end) for p in reader.partitions(start, end)]
            assert planned == [(0, 10), (10, 20), (20, 30), (30, 40)]
        finally:
            reader.stop()
    finally:
        rabbitmq.delete_stream(stream)


def publish_to(t: Target, stream: str, partition: int, values: list[bytes]) -> None:
    """Publish to one Iggy partition (``send`` with ``partition=`` is Iggy's)."""

    async def run() -> None:
        async with streamwire.connect(t.url, timeout=10.0) as client:
            iggy: Any = client
            batch = [
                streamwire.Message(
                    v, key=b"k" + v, headers={"h": streamwire.HeaderValue.string("x")}
                )
                for v in values
            ]
            await iggy.send(stream, batch, partition=partition, timeout=10.0)

    asyncio.run(run())


def test_iggy_reader_offsets_partitions_and_batch_ranges(iggy: Target) -> None:
    """The Iggy reader's methods as Spark's source runner and planner call them (in this
    process): per-partition offsets of a two-partition topic, admission control shared
    among partitions, AvailableNow pinning, the rows, starting offsets, batch ranges."""
    stream = iggy.new_stream("iggyoffsets")
    try:
        publish_to(iggy, stream, 0, [f"m{i:04d}".encode() for i in range(6)])
        publish_to(iggy, stream, 1, [b"m0100", b"m0101"])
        options = {"url": iggy.url, "stream": stream, "startingOffsets": "earliest"}
        reader = StreamwireDataSource(options).streamReader(None)
        try:
            initial = reader.initialOffset()
            assert json.dumps(initial) == json.dumps({stream: {"0": 0, "1": 0}})
            start = json.loads(json.dumps(initial))
            # 6 and 2 offsets available, 4 allowed: shared 3 + 1
            end = reader.latestOffset(start, ReadMaxRows(4))
            assert json.dumps(end) == json.dumps({stream: {"0": 3, "1": 1}})
            assert reader.latestOffset(start, ReadAllAvailable()) == {stream: {"0": 6, "1": 2}}
            assert _without_lag(reader.reportLatestOffset()) == {stream: {"0": 6, "1": 2}}
            reader.prepareForTriggerAvailableNow()
            publish_to(iggy, stream, 1, [b"m0102", b"m0103", b"m0104"])
            assert reader.latestOffset(end, ReadAllAvailable()) == {stream: {"0": 6, "1": 2}}

            planned = pickle.loads(pickle.dumps(reader.partitions(start, end)))  # noqa: S301
            assert [(p.partition, p.start, p.end) for p in planned] == [(0, 0, 3), (1, 0, 1)]
            assert reader.partitions(end, end) == []
            rows = [r for part in planned for r in rows_of(reader.read(part))]
            # (value, key, headers, stream, partition, offset, timestamp)
            assert [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows] == [
                (v, b"k" + v, {"h": b"x"}, stream, p, o)
                for v, p, o in [
                    (b"m0000", 0, 0),
                    (b"m0001", 0, 1),
                    (b"m0002", 0, 2),
                    (b"m0100", 1, 0),
                ]
            ]
            assert all(isinstance(r[6], datetime) for r in rows)
            # the next micro-batch starts where this one ended
            rest = reader.partitions(end, reader.latestOffset(end, ReadAllAvailable()))
            assert [(p.partition, p.start, p.end) for p in rest] == [(0, 3, 6), (1, 1, 2)]
        finally:
            reader.stop()

        # a new query starts at the tails, or where the JSON says (left out: earliest)
        latest = StreamwireDataSource({**options, "startingOffsets": "latest"}).streamReader(None)
        explicit = {**options, "startingOffsets": json.dumps({stream: {"1": 4}})}
        given = StreamwireDataSource(explicit).streamReader(None)
        try:
            assert latest.initialOffset() == {stream: {"0": 6, "1": 5}}
            assert given.initialOffset() == {stream: {"0": 0, "1": 4}}
        finally:
            latest.stop()
            given.stop()

        # batch reads: [startingOffsets, endingOffsets) per partition, -2 earliest, -1 latest
        ranges = {
            **options,
            "startingOffsets": '{"0": 2, "1": -2}',
            "endingOffsets": '{"0": 4, "1": -1}',
        }
        batch = StreamwireDataSource(ranges).reader(None)
        parts = batch.partitions()
        assert [(p.partition, p.start, p.end) for p in parts] == [(0, 2, 4), (1, 0, 5)]
        assert [r[0] for r in rows_of(batch.read(parts[0]))] == [b"m0002", b"m0003"]
        assert [r[5] for r in rows_of(batch.read(parts[1]))] == [0, 1, 2, 3, 4]
    finally:
        iggy.delete_stream(stream)


def test_iggy_streams_are_a_name_or_stream_slash_topic(iggy: Target) -> None:
    for bad in ("events/", "/t", "a/b/c"):
        reader = StreamwireDataSource({"url": iggy.url, "stream": bad}).reader(None)
        try:
            with pytest.raises(streamwire.ConfigurationError, match="topic"):
                reader.partitions()
        finally:
            close_runtime()
    for missing in ("no-such/t", "no-such"):  # a bare name is the stream's default topic
        reader = StreamwireDataSource({"url": iggy.url, "stream": missing}).reader(None)
        try:
            with pytest.raises(streamwire.ServerError):
                reader.partitions()
        finally:
            close_runtime()  # the reader connected through this process's runtime


def test_registration(spark: Any) -> None:
    import pyspark_streamwire

    # what PySpark's lookup does with every top-level pyspark_* module
    assert issubclass(pyspark_streamwire.DefaultSource, DataSource)
    assert pyspark_streamwire.DefaultSource.name() == "streamwire"
    # every test above used format("streamwire") without registering: auto-registration;
    # registering explicitly is possible too
    register(spark)
    # defining a DataFrame resolves the source and its schema without touching a broker
    df = spark.read.format("streamwire").option("url", "rabbitmq-stream://nowhere.invalid")
    assert df.option("stream", "s").load().schema.simpleString().startswith("struct<value:binary")


def test_a_super_stream_is_read_one_task_per_partition_stream(spark: Any) -> None:
    """A RabbitMQ super stream reads as a partitioned stream: partition *i* is its *i*-th
    partition stream, one input partition (task) each, in batch and streaming reads alike."""
    t = target("rabbitmq-super")
    stream = t.new_stream("dssuper")
    try:
        sent = [
            streamwire.Message(f"v{i:03d}".encode(), key=f"key-{i}".encode()) for i in range(60)
        ]
        publish(t, stream, sent)
        where = Counter(hash_partition(m.key or b"", t.partitions) for m in sent)
        assert len(where) == t.partitions  # every partition stream holds some

        options = {"url": t.url, "stream": stream}
        parts = StreamwireDataSource(options).reader(None).partitions()
        assert [(p.stream, p.partition, p.end - p.start) for p in parts] == [
            (stream, i, where[i]) for i in range(t.partitions)
        ]
        reader = StreamwireDataSource({**options, "startingOffsets": "earliest"}).streamReader(None)
        try:
            end = reader.latestOffset()
        finally:
            reader.stop()
        assert end == {stream: {str(i): where[i] for i in range(t.partitions)}}

        rows = spark.read.format("streamwire").options(**options).load().collect()
        assert sorted(r.value for r in rows) == sorted(m.value for m in sent)
        for r in rows:
            assert r.stream == stream
            assert r.partition == hash_partition(bytes(r.key), t.partitions)  # 4.0: bytearray
    finally:
        t.delete_stream(stream)


PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def _read(spark: Any, t: Target, stream: str, where: Any, *, push: bool) -> list[tuple[Any, ...]]:
    df = (
        spark.read.format("streamwire")
        .option("url", t.url)
        .option("stream", stream)
        .option("pushFilters", str(push).lower())
        .load()
        .where(where)
    )
    return sorted((r.partition, r.offset, r.value) for r in df.collect())


def _planned(t: Target, stream: str, filters: list[Any]) -> dict[int, tuple[int, int]]:
    """The ranges the filtering reader plans after ``filters`` were pushed into it."""
    options = SourceOptions.parse(
        {"url": t.url, "stream": stream, "pushFilters": "true"}, streaming=False
    )
    reader = StreamwireFilteringBatchReader(options)
    left = list(reader.pushFilters(filters))
    assert all(f in filters for f in left)
    return {p.partition: (p.start, p.end) for p in reader.partitions()}


def test_pushed_filters_narrow_the_read_and_give_the_same_answer(
    spark: Any, any_broker: Target
) -> None:
    """``pushFilters=true`` (with Spark's filter pushdown on): predicates on ``partition``
    and ``offset`` shrink the planned ranges to what they allow, one on ``timestamp`` moves
    each start to the first message at or after the time; every query returns the same rows
    as without pushdown. With Spark's pushdown off, the option is an error naming the
    setting to turn on."""
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan

    stream = any_broker.new_stream("pushdown")
    before = spark.conf.get(PUSHDOWN_CONF, "false")
    try:
        publish(any_broker, stream, messages(6))
        time.sleep(1.0)
        middle = datetime.fromtimestamp(time.time(), UTC)
        time.sleep(1.0)
        publish(any_broker, stream, messages(6, start=6))
        stored = read_back(any_broker, stream, expect=12)
        late = {m.value for m in stored if m.value >= b"m0006"}

        spark.conf.set(PUSHDOWN_CONF, "false")
        with pytest.raises(Exception, match=PUSHDOWN_CONF.replace(".", r"\.")):
            _read(spark, any_broker, stream, F.col("offset") >= 0, push=True)
        spark.conf.set(PUSHDOWN_CONF, "true")
        wheres = [
            (F.col("offset") >= 2) & (F.col("offset") < 5),
            F.col("partition") == 0,
            F.col("partition").isin(0, any_broker.partitions - 1) & (F.col("offset") == 3),
            F.col("offset").isin(1, 4, 100),
            F.col("timestamp") >= F.lit(middle),
            (F.col("timestamp") >= F.lit(middle)) & (F.col("key").isNotNull()),
            (F.col("offset") > 3) | (F.col("partition") == 0),  # OR: all Spark's
            (F.col("offset") >= 5) & (F.col("offset") < 5),  # nothing
        ]
        for where in wheres:
            pushed = _read(spark, any_broker, stream, where, push=True)
            assert pushed == _read(spark, any_broker, stream, where, push=False), where
        timed = _read(spark, any_broker, stream, F.col("timestamp") >= F.lit(middle), push=True)
        assert {value for _, _, value in timed} == late

        whole = _planned(any_broker, stream, [])
        busy = min(whole)  # a partition that holds messages (keys decide which)
        ranges = _planned(
            any_broker,
            stream,
            [
                GreaterThanOrEqual(("offset",), 2),
                LessThan(("offset",), 5),
                EqualTo(("partition",), busy),
            ],
        )
        assert set(ranges) == {busy}  # the other partitions: nothing planned
        assert 2 <= ranges[busy][0] < ranges[busy][1] <= 5
        contradiction = [In(("partition",), (busy,)), EqualTo(("partition",), busy + 1)]
        assert _planned(any_broker, stream, contradiction) == {}
        timed_plan = _planned(any_broker, stream, [GreaterThanOrEqual(("timestamp",), middle)])
        early = {p: s for p, (s, _) in whole.items()}
        for p, (s, e) in timed_plan.items():
            assert e == whole[p][1]
            first = min(
                (m.offset for m in stored if m.partition == p and m.value in late), default=e
            )
            assert early[p] <= s <= first  # moved towards the time, never past a late message
            if any_broker.broker != "rabbitmq":  # the message, not a chunk
                assert s == first
        for p in whole.keys() - timed_plan.keys():  # left out: nothing late in it
            assert not [m for m in stored if m.partition == p and m.value in late]
    finally:
        spark.conf.set(PUSHDOWN_CONF, before)
        any_broker.delete_stream(stream)
