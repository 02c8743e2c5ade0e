"""The benchmark's floor receiving a stream (``bench/spark_floor.py`` with ``stream``): it must
take the stream's records off the wire before it hands out the rows they stand for, in
Spark's Python workers too (the module and ``bench/raw_rabbitmq.py`` pickled by value).
What it measures is on the benchmarks page (docs/benchmarks.md)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import streamwire
from bench import spark_floor
from tests.spark._support import Target, publish

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
