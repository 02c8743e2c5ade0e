"""A Structured Streaming job in a driver process of its own, for ``test_kill.py``:
``python -m tests.spark.kill_driver URL STREAM SOURCE CHECKPOINT [--pace S] [--master M]``.

Files of ids (``{"id": n}`` per line) from ``SOURCE``, two files per micro-batch, go through
``foreach_batch_sink`` to ``STREAM`` (value = the id, key = the id), ``Trigger.AvailableNow``,
checkpointed in ``CHECKPOINT``. ``--pace`` seconds of sleep per row slow the batch down in a
Python UDF so that a test can kill the job while a batch is being published. Prints
``started`` once the query runs, then one ``batch <id> <rows> <published> <skipped>`` line per
micro-batch the sink finished, and ``done`` at the end.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.spark.kill_driver")
    parser.add_argument("url")
    parser.add_argument("stream")
    parser.add_argument("source")
    parser.add_argument("checkpoint")
    parser.add_argument("--pace", type=float, default=0.0)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from streamwire.spark import foreach_batch_sink
    from tests.spark._support import spark_session

    spark = spark_session("streamwire-kill", args.master)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "200")
    pace = args.pace

    def paced(i: int) -> int:
        time.sleep(pace)
        return i

    udf = F.udf(paced, LongType(), useArrow=False)
    ids = spark.readStream.schema("id long").option("maxFilesPerTrigger", 2).json(args.source)
    out = ids.select(
        udf("id").cast("string").cast("binary").alias("value"),
        F.col("id").cast("string").cast("binary").alias("key"),
    )
    sink = foreach_batch_sink(args.url, args.stream, name="kill", chunk_rows=100)
    query = (
        out.writeStream.foreachBatch(sink)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    print("started", flush=True)
    query.awaitTermination()
    for batch in sink.metrics.batches:
        print(f"batch {batch.batch_id} {batch.rows} {batch.published} {batch.skipped}", flush=True)
    print("done", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
