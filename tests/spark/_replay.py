"""The replay scenario of the exactly-once tests, for a classic session (``test_sink.py``) and
a Spark Connect one (``connect_job.py``, in a process of its own):

1. micro-batch 0 (two files of 1 500 ids, one Spark partition each) fails once part-way
   through the second partition: a UDF upstream of the sink raises (``failure="udf"``), or
   yields a null ``value`` that the sink's own task refuses after publishing the runs before
   it (``failure="sink"``);
2. the query restarts from its checkpoint: batch 0 runs again, then batch 1 (500 more ids);
3. every id is stored exactly once, with its key.

``how`` is ``"foreachBatch"`` (``foreach_batch_sink``) or ``"datasource"`` (``writeStream``
with ``format("streamwire")``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from streamwire.spark import ForeachBatchSink, foreach_batch_sink
from tests.spark._support import Target, read_back

__all__ = ["FAIL_AT", "ROWS_PER_FILE", "check_metrics", "run_replay"]

# functions defined here run in executor processes: ship them by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

ROWS_PER_FILE = 1500
FAIL_AT = 2800  # an id near the end of the second file
MORE = 500  # ids of batch 1


def write_ids(directory: Path, name: str, ids: range) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"id": i}) + "\n" for i in ids)
    (directory / name).write_text(lines)


def failing_once(marker: str, fail_at: int, failure: str) -> Any:
    """A UDF passing ids through, except once, for ``fail_at``, the first time only (the
    marker file remembers it across processes): ``failure="udf"`` raises there (the plan
    upstream of the sink fails); ``failure="sink"`` returns null, a ``value`` the sink's
    task refuses after publishing the rows before it (the sink itself fails)."""

    def check(i: int) -> int | None:
        import os

        if i == fail_at and not os.path.exists(marker):
            with open(marker, "w"):
                pass
            if failure == "udf":
                raise RuntimeError(f"injected failure at id {i}")
            return None
        return i

    return F.udf(check, LongType(), useArrow=False)


def start_query(
    spark: Any,
    how: str,
    failure: str,
    tmp_path: Path,
    t: Target,
    stream: str,
    query_id: str | None = None,
    producer_options: dict[str, Any] | None = None,
) -> tuple[Any, ForeachBatchSink | None]:
    # Two small files per micro-batch: one Spark partition each, rows in file order, the
    # same on every run. The UDF runs while the sink consumes its partition, so the failure
    # hits the second partition part-way through.
    ids = spark.readStream.schema("id long").option("maxFilesPerTrigger", 2)
    udf = failing_once(str(tmp_path / "failed"), FAIL_AT, failure)
    out = ids.json(str(tmp_path / "in")).select(
        udf("id").cast("string").cast("binary").alias("value"),
        F.col("id").cast("string").cast("binary").alias("key"),
    )
    writer = out.writeStream.option("checkpointLocation", str(tmp_path / "ckpt")).trigger(
        availableNow=True
    )
    sink = None
    if how == "foreachBatch":
        sink = foreach_batch_sink(
            t.url,
            stream,
            name="eo",
            chunk_rows=100,
            query_id=query_id,
            **(producer_options or {}),
        )
        writer = writer.foreachBatch(sink)
    else:
        writer = writer.format("streamwire").option("url", t.url).option("stream", stream)
        # Small chunks: rows before the failing one are handed to the producer (and stored)
        # before Spark kills the task, whatever the lag between the UDF and the writer.
        writer = writer.option("name", "eo").option("chunkRows", "100")
    return writer.start(), sink


def run_replay(
    spark: Any,
    t: Target,
    tmp_path: Path,
    how: str,
    failure: str,
    *,
    query_id: str | None = None,
    producer_options: dict[str, Any] | None = None,
) -> tuple[ForeachBatchSink | None, int]:
    """The scenario on a new stream of ``t``, with its checks (``producer_options``: the
    foreachBatch sink's). Returns the restarted query's
    sink (foreachBatch; its metrics are kept in this process in classic mode, for
    :func:`check_metrics`) and how many rows the failed run was seen to store."""
    stream = t.new_stream("eo")
    source, marker = tmp_path / "in", tmp_path / "failed"
    write_ids(source, "0a.json", range(ROWS_PER_FILE))
    write_ids(source, "0b.json", range(ROWS_PER_FILE, 2 * ROWS_PER_FILE))
    # The data source writer gets its rows in Arrow batches (10 000 rows by default): make
    # them small so that rows before the failing one reach the writer, as they would in a
    # partition of realistic size.
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "200")
    try:
        # 1. batch 0 fails part-way through one partition
        query, _ = start_query(spark, how, failure, tmp_path, t, stream, query_id, producer_options)
        problem = "injected failure" if failure == "udf" else "null 'value'"
        with pytest.raises(Exception, match=problem):
            query.awaitTermination()
        assert marker.exists()
        # until it stays put; with a failing UDF, Spark may feed the writer its input in
        # size-bounded Arrow batches, so the task can die before any row reached the writer
        # (nothing was confirmed for those rows: not a loss). The failing sink publishes in
        # runs of at most 100 rows (chunk_rows / chunkRows), so runs of the failing partition
        # before the null went out.
        partial = read_back(t, stream, expect=1 if failure == "sink" else 0, settle=2.0)
        assert len(partial) < 2 * ROWS_PER_FILE, "the failure should stop batch 0"
        if failure == "sink":
            assert any(ROWS_PER_FILE <= int(m.value) < FAIL_AT for m in partial)

        # 2. restart from the checkpoint: batch 0 runs again, then batch 1 (a new file)
        write_ids(source, "1.json", range(2 * ROWS_PER_FILE, 2 * ROWS_PER_FILE + MORE))
        query, sink = start_query(
            spark, how, failure, tmp_path, t, stream, query_id, producer_options
        )
        query.awaitTermination()
        assert query.exception() is None

        total = 2 * ROWS_PER_FILE + MORE
        stored = read_back(t, stream, expect=total)
        values = [int(m.value) for m in stored]
        assert len(values) == total, f"{len(values) - len(set(values))} duplicates"
        assert sorted(values) == list(range(total))
        assert all(m.key == m.value for m in stored)
        return sink, len(partial)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
        t.delete_stream(stream)


def check_metrics(sink: ForeachBatchSink, partial: int) -> None:
    """The replay skipped at least what the failed run had stored when read back (more if
    the broker stored some of its in-flight rows later) and sent the rest of batch 0; batch
    1 went out whole; both exactly-once."""
    replay, fresh = sink.metrics.batches
    assert (replay.batch_id, fresh.batch_id) == (0, 1)
    assert replay.skipped is not None
    assert replay.skipped >= partial
    assert replay.published + replay.skipped == 2 * ROWS_PER_FILE  # type: ignore[operator]
    assert (fresh.published, fresh.skipped) == (MORE, 0)
    assert replay.exactly_once
    assert fresh.exactly_once
