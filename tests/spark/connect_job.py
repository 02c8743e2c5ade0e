"""The Spark tests through Spark Connect, in a process of its own (a Connect session turns
PySpark's functions to Connect for the whole process, so it cannot share the test process
with the classic session)::

    python -m tests.spark.connect_job REMOTE WORKDIR BROKER=URL@PARTITIONS...

For each broker it runs the replay scenario (``_replay``) with the foreachBatch sink (given
``query_id``), reads a stream back through the data source, and checks that the sink without
``query_id`` refuses to run; on RabbitMQ also the replay scenario with the data source
writer. Prints ``ok <check>`` per
check that passed; a failed check prints its traceback and the process exits with 1.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    remote, workdir, *targets = argv
    import pytest
    from pyspark.sql import SparkSession

    import streamwire
    from streamwire.spark import SparkConfigurationError, foreach_batch_sink, register
    from tests.spark._replay import run_replay
    from tests.spark._support import Target, publish

    spark = SparkSession.builder.remote(remote).getOrCreate()
    register(spark)
    failed = 0

    def check(name: str, run: object) -> None:
        nonlocal failed
        try:
            run()  # type: ignore[operator]
        except Exception:
            failed += 1
            print(f"FAILED {name}", flush=True)
            traceback.print_exc()
            sys.stdout.flush()
        else:
            print(f"ok {name}", flush=True)

    for spec in targets:
        broker, rest = spec.split("=", 1)
        url, _, partitions = rest.rpartition("@")
        t = Target(broker, url, partitions=int(partitions))
        base = Path(workdir) / broker

        def sink_replay(t: Target = t, base: Path = base) -> None:
            query_id = f"connect-{base / 'sink'}"
            run_replay(spark, t, base / "sink", "foreachBatch", "sink", query_id=query_id)

        def source_replay(t: Target = t, base: Path = base) -> None:
            run_replay(spark, t, base / "datasource", "datasource", "sink")

        def read(t: Target = t) -> None:
            stream = t.new_stream("read")
            try:
                values = [f"r{i:03d}".encode() for i in range(25)]
                publish(t, stream, [streamwire.Message(v) for v in values])
                reader = spark.read.format("streamwire").option("url", t.url)
                got = reader.option("stream", stream).load().select("value").collect()
                assert sorted(r.value for r in got) == values, got
            finally:
                t.delete_stream(stream)

        def needs_query_id(t: Target = t) -> None:
            stream = t.new_stream("noid")
            try:
                df = spark.createDataFrame([(b"x",)], "value binary")
                sink = foreach_batch_sink(t.url, stream)
                with pytest.raises(SparkConfigurationError, match="query_id"):
                    sink(df, 0)
            finally:
                t.delete_stream(stream)

        check(f"{broker} foreachBatch exactly-once", sink_replay)
        if broker == "rabbitmq":
            # what Connect changes for the writer (the query id its tasks see) is the same
            # for every broker; each broker's resume runs in classic mode (test_sink.py)
            check(f"{broker} data source writer exactly-once", source_replay)
        check(f"{broker} data source read", read)
        check(f"{broker} sink without query_id refused", needs_query_id)
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
