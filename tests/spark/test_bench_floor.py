"""The benchmark's floor on the wire (``bench/spark_floor.py`` with ``stream``): receiving, it
must take the stream's records off the wire before it hands out the rows they stand for;
sending, it must store a message per row it was handed, every one confirmed; both in Spark's
Python workers too (the module and ``bench/raw_rabbitmq.py`` pickled by value). What it
measures is on the benchmarks page (docs/benchmarks.md)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import streamwire
from bench import raw_rabbitmq, spark_floor
from tests.spark._support import Target, publish, read_back

pytestmark = pytest.mark.integration

ROWS = 25_001  # two whole batches of the floor's 10,000 rows and part of a third


def _wire(t: Target, stream: str) -> Any:
    parts = streamwire.parse_url(t.url)
    return spark_floor._Wire(parts.host, parts.port, stream)


def test_a_receiving_read_hands_out_each_batch_once_its_records_came(rabbitmq: Target) -> None:
    stream = rabbitmq.new_stream("floor")
    try:
        publish(rabbitmq, stream, [streamwire.Message(b"v" * 10) for _ in range(20_000)])
        batches = spark_floor._read(spark_floor._Share(0, ROWS), 10, _wire(rabbitmq, stream))
        assert [next(batches).num_rows for _ in range(2)] == [10_000, 10_000]
        third: list[int] = []
        waiting = threading.Thread(target=lambda: third.append(next(batches).num_rows))
        waiting.start()
        waiting.join(1.0)
        assert waiting.is_alive(), "the third batch came before the stream held its records"
        publish(rabbitmq, stream, [streamwire.Message(b"v" * 10) for _ in range(ROWS - 20_000)])
        waiting.join(60.0)
        assert third == [ROWS - 20_000]
        assert list(batches) == []
    finally:
        rabbitmq.delete_stream(stream)


def test_spark_reads_the_receiving_floor_in_its_workers(spark: Any, rabbitmq: Target) -> None:
    spark_floor.register(spark)
    stream = rabbitmq.new_stream("floor")
    try:
        publish(rabbitmq, stream, [streamwire.Message(b"v" * 10) for _ in range(ROWS)])
        parts = streamwire.parse_url(rabbitmq.url)
        df = (
            spark.read.format("streamwire_floor")
            .option("rows", str(ROWS))
            .option("size", "10")
            .option("stream", stream)
            .option("host", parts.host)
            .option("port", str(parts.port))
            .load()
        )
        assert df.rdd.getNumPartitions() == 1
        assert df.count() == ROWS
    finally:
        rabbitmq.delete_stream(stream)


def test_the_sending_floor_stores_a_message_per_row_each_confirmed(rabbitmq: Target) -> None:
    stream = rabbitmq.new_stream("floor")
    parts = streamwire.parse_url(rabbitmq.url)
    try:
        # batches that cut frames (500 messages) and a window (1,200) that holds two frames
        # and part of a third: the sender waits for confirms, and the rest goes last
        counts = [10_000, 777, 14_224]
        confirmed = raw_rabbitmq.send_counting(
            parts.host, parts.port, stream, 10, iter(counts), window=1_200
        )
        assert confirmed == ROWS
        # named, the broker deduplicates: a frame's ids written in place must still grow
        # (a repeated id would be confirmed and dropped)
        confirmed = raw_rabbitmq.send_counting(
            parts.host, parts.port, stream, 10, iter(counts), window=1_200, name="floor-t"
        )
        assert confirmed == ROWS
        stored = read_back(rabbitmq, stream, expect=2 * ROWS)
        assert len(stored) == 2 * ROWS
        assert {m.value for m in stored} == {b"x" * 10}
        with pytest.raises(ConnectionError, match="declaring a publisher"):
            raw_rabbitmq.send_counting(parts.host, parts.port, "no-such-stream", 10, [1])
    finally:
        rabbitmq.delete_stream(stream)


def test_spark_writes_through_the_sending_floor_in_its_workers(
    spark: Any, rabbitmq: Target
) -> None:
    spark_floor.register(spark)
    stream = rabbitmq.new_stream("floor")
    try:
        parts = streamwire.parse_url(rabbitmq.url)
        rows = spark.range(0, ROWS, 1, 2).selectExpr("cast('v' as binary) as value")
        # no stream (the bench's floor names an empty one): the rows are dropped
        rows.write.format("streamwire_floor").mode("append").option("stream", "").save()
        (
            rows.write.format("streamwire_floor")
            .mode("append")
            .option("size", "10")
            .option("stream", stream)
            .option("host", parts.host)
            .option("port", str(parts.port))
            .save()
        )
        assert len(read_back(rabbitmq, stream, expect=ROWS)) == ROWS
    finally:
        rabbitmq.delete_stream(stream)


def test_the_sending_floor_raises_what_its_sending_thread_raised() -> None:
    def send(counts: Iterator[int]) -> int:
        total = 0
        for n in counts:
            total += n
            if total > 10:
                raise ConnectionError("the broker refused messages")
        return total

    assert spark_floor._behind(iter([1, 2, 3]), send) == 6
    with pytest.raises(ConnectionError, match="refused"):
        spark_floor._behind(iter(range(100)), send)

    def late(counts: Iterator[int]) -> int:
        sum(counts)  # every count taken, then the confirms fail
        raise ConnectionError("no confirm")

    with pytest.raises(ConnectionError, match="no confirm"):
        spark_floor._behind(iter([1, 2]), late)
