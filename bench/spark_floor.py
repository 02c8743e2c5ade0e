"""The floor of a Python data source in Spark: what Spark's own per-row work costs when the
source does nothing, for ``python -m bench --spark-jvm``'s third side.

``format("streamwire_floor")`` has streamwire's source schema (value, key, headers, stream,
partition, offset, timestamp) and no broker:

* reading, it yields prebuilt Arrow batches of ``rowsPerBatch`` rows (10,000, the source's
  batch size) of ``size``-byte values, ``rows`` rows in ``partitions`` Spark partitions,
  batch and streaming (one micro-batch of all of them, ``Trigger.AvailableNow``);
* writing, it takes every Arrow batch Spark hands it and drops it.

A figure next to streamwire's and the JVM connector's says how much of a job is Spark's
(the JVM's plan, the Python worker, the Arrow crossing) and how much is the source's own.
The module is pickled by value (``register``), so the workers need no copy of ``bench``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)

from streamwire.spark._arrow import SCHEMA
from streamwire.spark._schema import SOURCE_SCHEMA_DDL

__all__ = ("FloorDataSource", "register")

BATCH_ROWS = 10_000


@dataclass(frozen=True)
class _Share(InputPartition):
    """One Spark partition's rows: offsets ``[start, end)``."""

    start: int
    end: int


def _batch(start: int, count: int, size: int) -> pa.RecordBatch:
    value = pa.array([b"x" * size] * count, pa.binary())
    nulls = pa.nulls(count)
    return pa.RecordBatch.from_arrays(
        [
            value,
            nulls.cast(pa.binary()),
            nulls.cast(SCHEMA.field("headers").type),
            pa.array(["floor"] * count, pa.string()),
            pa.array([0] * count, pa.int32()),
            pa.array(range(start, start + count), pa.int64()),
            pa.array([0] * count, SCHEMA.field("timestamp").type),
        ],
        schema=SCHEMA,
    )


def _read(share: _Share, size: int) -> Iterator[pa.RecordBatch]:
    """The share's rows in batches of :data:`BATCH_ROWS`, built once and handed out again
    (only the offsets differ, and Spark reads them as they are)."""
    full = _batch(share.start, BATCH_ROWS, size)
    at = share.start
    while at < share.end:
        n = min(BATCH_ROWS, share.end - at)
        yield full if n == BATCH_ROWS else full.slice(0, n)
        at += n


def _shares(rows: int, partitions: int, first: int = 0) -> list[_Share]:
    per = -(-rows // partitions)
    return [_Share(first + s, first + min(rows, s + per)) for s in range(0, rows, per) if s < rows]


class _Reader(DataSourceReader):
    def __init__(self, rows: int, size: int, partitions: int) -> None:
        self.rows, self.size, self.partitions_ = rows, size, partitions

    def partitions(self) -> Sequence[InputPartition]:
        return _shares(self.rows, self.partitions_)

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.size)


class _StreamReader(DataSourceStreamReader):
    """One micro-batch of all the rows, then nothing new."""

    def __init__(self, rows: int, size: int, partitions: int) -> None:
        self.rows, self.size, self.partitions_ = rows, size, partitions

    def initialOffset(self) -> dict[str, int]:
        return {"offset": 0}

    def latestOffset(self, *_: Any) -> dict[str, int]:
        return {"offset": self.rows}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        count = end["offset"] - start["offset"]
        return _shares(count, self.partitions_, start["offset"]) if count > 0 else []

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.size)


class _Commit(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


def _drop(iterator: Iterator[pa.RecordBatch]) -> _Commit:
    return _Commit(sum(batch.num_rows for batch in iterator))


class _Writer(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Commit:
        return _drop(iterator)


class _StreamWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Commit:
        return _drop(iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass


class FloorDataSource(DataSource):
    """``format("streamwire_floor")``: options ``rows``, ``size``, ``partitions`` (reads)."""

    @classmethod
    def name(cls) -> str:
        return "streamwire_floor"

    def schema(self) -> str:
        return SOURCE_SCHEMA_DDL

    def _shape(self) -> tuple[int, int, int]:
        o = self.options
        return int(o.get("rows", 0)), int(o.get("size", 100)), int(o.get("partitions", 2))

    def reader(self, schema: Any) -> _Reader:
        return _Reader(*self._shape())

    def streamReader(self, schema: Any) -> _StreamReader:
        return _StreamReader(*self._shape())

    def writer(self, schema: Any, overwrite: bool) -> _Writer:
        return _Writer()

    def streamWriter(self, schema: Any, overwrite: bool) -> _StreamWriter:
        return _StreamWriter()


def register(spark: Any) -> None:
    """Register ``streamwire_floor`` in ``spark``, this module pickled by value."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    spark.dataSource.register(FloorDataSource)
