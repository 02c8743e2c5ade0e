"""A Spark batch job publishing a DataFrame through the foreachBatch sink (exactly-once on
RabbitMQ Streams), then reading it back with the ``streamwire`` data source.

    python examples/spark_sink.py [URL] [STREAM]

Defaults: RabbitMQ on localhost and the stream "spark-orders". Needs the spark extra and Java 17+.
"""

from __future__ import annotations

import asyncio
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import streamwire
from streamwire.spark import foreach_batch_sink, register


async def create(url: str, stream: str) -> None:
    async with streamwire.connect(url, timeout=10) as client:
        await client.create_stream(stream, exist_ok=True)


def main(url: str, stream: str) -> None:
    asyncio.run(create(url, stream))
    # Python workers must run the interpreter that has streamwire installed
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("streamwire-example")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        rows = spark.range(100).select(
            F.format_string("order %d", "id").cast("binary").alias("value"),
            (F.col("id") % 4).cast("string").cast("binary").alias("key"),
        )
        sink = foreach_batch_sink(url, stream, name="example-sink", query_id="example")
        sink(rows, 0)  # what writeStream.foreachBatch(sink) calls for each micro-batch
        print("batch 0:", sink.metrics.last)
        sink(rows, 0)  # a replayed batch: deduplicated, nothing stored twice
        register(spark)
        back = spark.read.format("streamwire").option("url", url).option("stream", stream).load()
        print("rows in the stream:", back.count())
    finally:
        spark.stop()


if __name__ == "__main__":
    defaults = ("rabbitmq-stream://localhost:5552", "spark-orders")
    url, stream = [*sys.argv[1:3], *defaults[len(sys.argv[1:3]) :]]
    main(url, stream)
