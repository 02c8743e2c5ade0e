"""Structured Streaming jobs in a driver process of its own, for the tests that kill part of
Spark while a micro-batch is being published (``test_kill.py``, ``test_cluster.py``)::

    python -m tests.spark.kill_driver SOURCE CHECKPOINTS URL=STREAM... [--pace S] [--master M]
        [--connect N=JSON]...

One query per ``URL=STREAM`` target, all running at once: files of ids (``{"id": n}`` per
line) from ``SOURCE``, two files per micro-batch, go through ``foreach_batch_sink`` to the
target's stream (value = the id, key = the id), ``Trigger.AvailableNow``, checkpointed in
``CHECKPOINTS/<n>``; ``--connect n=JSON`` gives the sink of target ``n`` those
``connect_options``. ``--pace`` seconds of sleep per row slow the batches down in a Python
UDF, so that a test can kill something while a batch is being published. Prints ``app <id>``
(Spark's application id) first, ``started`` once the queries run, then per target ``n``
one ``batch <n> <id> <rows> <published> <skipped>`` line per micro-batch its sink finished;
with ``--read-back``, ``read <n> <rows> <distinct> <min> <max>`` of the stream read through
the data source; ``done`` at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.spark.kill_driver")
    parser.add_argument("source")
    parser.add_argument("checkpoints")
    parser.add_argument("targets", nargs="+", metavar="URL=STREAM")
    parser.add_argument("--pace", type=float, default=0.0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--read-back", action="store_true", help="then read the streams through the data source"
    )
    parser.add_argument(
        "--connect", action="append", default=[], metavar="N=JSON", help="connect_options"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="the sink's timeout")
    parser.add_argument(
        "--pin",
        action="append",
        default=[],
        metavar="N=HOST:PORT",
        help="Liftbridge: every gRPC connection of query N goes to HOST:PORT (a proxy)",
    )
    args = parser.parse_args(argv)
    connect = {
        int(n): json.loads(options) for n, options in (c.split("=", 1) for c in args.connect)
    }
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from streamwire.spark import foreach_batch_sink
    from tests.spark._support import PinnedAddress, spark_session

    for n, address in (p.split("=", 1) for p in args.pin):
        host, _, port = address.rpartition(":")
        connect.setdefault(int(n), {})["address_resolver"] = PinnedAddress(host, int(port))

    spark = spark_session("streamwire-kill", args.master)
    print(f"app {spark.sparkContext.applicationId}", flush=True)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "200")
    pace = args.pace

    def paced(i: int) -> int:
        time.sleep(pace)
        return i

    udf = F.udf(paced, LongType(), useArrow=False)
    targets = [target.rsplit("=", 1) for target in args.targets]
    running = []
    for n, (url, stream) in enumerate(targets):
        ids = spark.readStream.schema("id long").option("maxFilesPerTrigger", 2).json(args.source)
        out = ids.select(
            udf("id").cast("string").cast("binary").alias("value"),
            F.col("id").cast("string").cast("binary").alias("key"),
        )
        sink = foreach_batch_sink(
            url,
            stream,
            name="kill",
            chunk_rows=100,
            connect_options=connect.get(n),
            timeout=args.timeout,
        )
        query = (
            out.writeStream.foreachBatch(sink)
            .option("checkpointLocation", f"{args.checkpoints}/{n}")
            .trigger(availableNow=True)
            .start()
        )
        running.append((query, sink))
    print("started", flush=True)
    for n, (query, sink) in enumerate(running):
        query.awaitTermination()
        for b in sink.metrics.batches:
            print(f"batch {n} {b.batch_id} {b.rows} {b.published} {b.skipped}", flush=True)
    if args.read_back:
        for n, (url, stream) in enumerate(targets):
            reader = spark.read.format("streamwire").option("url", url).option("stream", stream)
            values = [int(r.value) for r in reader.load().select("value").collect()]
            print(f"read {n} {len(values)} {len(set(values))} {min(values)} {max(values)}")
    print("done", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
