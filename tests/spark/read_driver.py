"""Streaming reads in a driver process of their own, for the tests that cut the source's
connections while it reads (``test_faults.py``)::

    python -m tests.spark.read_driver OUT CHECKPOINTS URL=STREAM... [--master M] [--max N]
        [--pace S] [--connect N=JSON]...

One query per ``URL=STREAM`` target, all running at once: ``spark.readStream`` of the
``streamwire`` source (``STREAM`` a comma-separated list: its ``streams`` option) from the
earliest offset, ``maxRecordsPerTrigger`` ``--max``,
``Trigger.AvailableNow``, checkpointed in ``CHECKPOINTS/<n>``; ``--connect n=JSON`` gives
target ``n``'s source those ``connectOptions``. ``--pace`` seconds of sleep per row (a
Python UDF in the read's own tasks) keep a read going long enough for a test to cut it.
Each micro-batch's values (integers) are appended to ``OUT/<n>``, one ``<batch> <value>``
line each. Prints ``started``, then ``done <n> <rows>`` per query, ``done`` at the end.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.spark.read_driver")
    parser.add_argument("out")
    parser.add_argument("checkpoints")
    parser.add_argument("targets", nargs="+", metavar="URL=STREAM")
    parser.add_argument("--master", default="local[2,4]")
    parser.add_argument("--max", type=int, default=2000, help="maxRecordsPerTrigger")
    parser.add_argument("--pace", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=10.0, help="the source's timeout")
    parser.add_argument(
        "--connect", action="append", default=[], metavar="N=JSON", help="connectOptions"
    )
    args = parser.parse_args(argv)
    connect = dict(c.split("=", 1) for c in args.connect)
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from tests.spark._support import spark_session

    spark = spark_session("streamwire-read", args.master)
    pace = args.pace

    def paced(value: bytes) -> int:
        time.sleep(pace)
        return int(value)

    udf = F.udf(paced, LongType(), useArrow=False)
    out = Path(args.out)
    running = []
    for n, target in enumerate(args.targets):
        url, stream = target.rsplit("=", 1)
        reader = (
            spark.readStream.format("streamwire")
            .option("url", url)
            .option("streams" if "," in stream else "stream", stream)
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", args.max)
            .option("timeout", args.timeout)
        )
        if str(n) in connect:
            reader = reader.option("connectOptions", connect[str(n)])

        def collect(df: Any, batch_id: int, n: int = n) -> None:
            values = [r.id for r in df.select(udf("value").alias("id")).collect()]
            with (out / str(n)).open("a", encoding="ascii") as f:
                f.write("".join(f"{batch_id} {v}\n" for v in values))

        query = (
            reader.load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", f"{args.checkpoints}/{n}")
            .trigger(availableNow=True)
            .start()
        )
        running.append(query)
    print("started", flush=True)
    for n, query in enumerate(running):
        query.awaitTermination()
        rows = sum(1 for _ in (out / str(n)).open(encoding="ascii"))
        print(f"done {n} {rows}", flush=True)
    print("done", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
