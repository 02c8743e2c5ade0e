"""The floor of a Python data source in Spark: what Spark's own per-row work costs when the
source does nothing, for ``python -m bench --spark-jvm``'s third side.

``format("streamwire_floor")`` has streamwire's source schema (value, key, headers, stream,
partition, offset, timestamp) and no broker:

* reading, it yields prebuilt Arrow batches of ``rowsPerBatch`` rows (10,000, the source's
  batch size) of ``size``-byte values, ``rows`` rows in ``partitions`` Spark partitions,
  batch and streaming (one micro-batch of all of them, ``Trigger.AvailableNow``);
* writing, it takes every Arrow batch Spark hands it and drops it.

With ``stream`` (and ``host``, ``port``), a read also **receives** that RabbitMQ stream from its
first offset, as the broker's ceiling does (``bench/raw_rabbitmq.py``: one raw connection,
one reused buffer, records counted from the chunk headers), in a thread of its own as a
source's receiving thread would, and hands out each prebuilt batch once as many records
came: what a Python source pays before any decoding, for the bytes it must take off the
wire.

With ``stream`` (and ``host``, ``port``), a write also **sends**: each task publishes into that
stream as many messages of ``size`` bytes as Spark handed it rows, on one raw connection
(``bench/raw_rabbitmq.py``'s :func:`send_counting`: frames encoded once, confirms read in a
thread of their own, at most the sink's 10,000 unconfirmed), in a thread of its own as a
sink's sending thread would, under a publisher name of its
own so that the broker deduplicates as for streamwire's exactly-once sink: what a Python
sink pays for Spark and for putting its bytes on the wire, before it encodes anything.

A figure next to streamwire's and the JVM connector's says how much of a job is Spark's
(the JVM's plan, the Python worker, the Arrow crossing) and how much is the source's own.
The module and ``bench/raw_rabbitmq.py`` are pickled by value (``register``), so the
workers need no copy of ``bench``.
"""

from __future__ import annotations

import queue
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
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

from bench import raw_rabbitmq
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


@dataclass(frozen=True)
class _Wire:
    """Where a receiving read takes its bytes from: a RabbitMQ stream."""

    host: str
    port: int
    stream: str


def _read(share: _Share, size: int, wire: _Wire | None = None) -> Iterator[pa.RecordBatch]:
    """The share's rows in batches of :data:`BATCH_ROWS`, built once and handed out again
    (only the offsets differ, and Spark reads them as they are); with ``wire``, each batch
    once the stream's records received (in a thread: :func:`_ahead`) reach its end."""
    full = _batch(share.start, BATCH_ROWS, size)
    rows = share.end - share.start
    counts = (
        _ahead(raw_rabbitmq.receive_counting(wire.host, wire.port, wire.stream, rows))
        if wire is not None
        else iter((rows,))
    )
    out = 0
    for received in counts:
        while out < min(received, rows):
            n = min(BATCH_ROWS, rows - out)
            if received < rows and out + n > received:
                break  # the rest of this batch has not come yet
            yield full if n == BATCH_ROWS else full.slice(0, n)
            out += n


def _ahead(counts: Iterator[int]) -> Iterator[int]:
    """``counts`` taken in a thread of their own, as a source's receiving thread would (the
    receive releases the GIL): the receive overlaps the batches' way to the JVM, and the
    floor is the most such a source can reach, not the sum of the two."""
    found: queue.SimpleQueue[int | BaseException | None] = queue.SimpleQueue()

    def run() -> None:
        try:
            for count in counts:
                found.put(count)
            found.put(None)
        except BaseException as exc:  # handed to the reading side
            found.put(exc)

    threading.Thread(target=run, name="floor-receive", daemon=True).start()
    while (item := found.get(timeout=120.0)) is not None:
        if isinstance(item, BaseException):
            raise item
        yield item


def _shares(rows: int, partitions: int, first: int = 0) -> list[_Share]:
    per = -(-rows // partitions)
    return [_Share(first + s, first + min(rows, s + per)) for s in range(0, rows, per) if s < rows]


class _Reader(DataSourceReader):
    def __init__(self, rows: int, size: int, partitions: int, wire: _Wire | None) -> None:
        self.rows, self.size, self.partitions_, self.wire = rows, size, partitions, wire

    def partitions(self) -> Sequence[InputPartition]:
        return _shares(self.rows, self.partitions_)

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.size, self.wire)


class _StreamReader(DataSourceStreamReader):
    """One micro-batch of all the rows, then nothing new."""

    def __init__(self, rows: int, size: int, partitions: int, wire: _Wire | None) -> None:
        self.rows, self.size, self.partitions_, self.wire = rows, size, partitions, wire

    def initialOffset(self) -> dict[str, int]:
        return {"offset": 0}

    def latestOffset(self, *_: Any) -> dict[str, int]:
        return {"offset": self.rows}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        count = end["offset"] - start["offset"]
        return _shares(count, self.partitions_, start["offset"]) if count > 0 else []

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.size, self.wire)


class _Commit(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


def _write(iterator: Iterator[pa.RecordBatch], size: int, wire: _Wire | None) -> _Commit:
    """Every batch Spark hands over, dropped; with ``wire``, as many messages of ``size``
    bytes published (:func:`raw_rabbitmq.send_counting`) as the batches hold rows."""
    rows = (batch.num_rows for batch in iterator)
    if wire is None:
        return _Commit(sum(rows))
    name = f"floor-{uuid.uuid4().hex}"  # deduplicating, as streamwire's exactly-once sink
    return _Commit(
        _behind(
            rows,
            lambda counts: raw_rabbitmq.send_counting(
                wire.host, wire.port, wire.stream, size, counts, name=name
            ),
        )
    )


def _behind(counts: Iterator[int], send: Callable[[Iterator[int]], int]) -> int:
    """``send(counts)`` in a thread of its own, as a sink's sending thread would (the send
    releases the GIL), while this one takes ``counts`` (Spark's batches) as they come: the
    floor is the most such a sink can reach, not the sum of the two."""
    handed: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    outcome: list[int | BaseException] = []

    ended = threading.Event()

    def taken() -> Iterator[int]:
        while (count := handed.get()) is not None:
            yield count
        ended.set()

    def run() -> None:
        try:
            outcome.append(send(taken()))
        except BaseException as exc:  # handed to the taking side
            outcome.append(exc)
            while not ended.is_set() and handed.get() is not None:
                pass  # what is still handed, dropped

    sender = threading.Thread(target=run, name="floor-send", daemon=True)
    sender.start()
    try:
        for count in counts:
            if outcome:
                break  # the send failed: its failure is raised below
            handed.put(count)
    finally:
        handed.put(None)
    sender.join(300.0)
    if not outcome:
        raise TimeoutError("the floor's send did not end in 300 s")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


class _Writer(DataSourceArrowWriter):
    def __init__(self, size: int, wire: _Wire | None) -> None:
        self.size, self.wire = size, wire

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Commit:
        return _write(iterator, self.size, self.wire)


class _StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, size: int, wire: _Wire | None) -> None:
        self.size, self.wire = size, wire

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Commit:
        return _write(iterator, self.size, self.wire)

    def commit(self, messages: list[Any], batchId: int) -> None:
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass


class FloorDataSource(DataSource):
    """``format("streamwire_floor")``: options ``rows``, ``size``, ``partitions`` (reads), and
    ``stream``, ``host``, ``port`` for a read that receives (one partition: the receive starts
    at the stream's first offset) or a write that sends (``size`` bytes a row)."""

    @classmethod
    def name(cls) -> str:
        return "streamwire_floor"

    def schema(self) -> str:
        return SOURCE_SCHEMA_DDL

    def _shape(self) -> tuple[int, int, int, _Wire | None]:
        o = self.options
        wire = None
        if o.get("stream"):  # an empty one: nothing to receive or send
            wire = _Wire(o.get("host", "127.0.0.1"), int(o.get("port", 5552)), o["stream"])
        partitions = 1 if wire is not None else int(o.get("partitions", 2))
        return int(o.get("rows", 0)), int(o.get("size", 100)), partitions, wire

    def reader(self, schema: Any) -> _Reader:
        return _Reader(*self._shape())

    def streamReader(self, schema: Any) -> _StreamReader:
        return _StreamReader(*self._shape())

    def writer(self, schema: Any, overwrite: bool) -> _Writer:
        _, size, _, wire = self._shape()
        return _Writer(size, wire)

    def streamWriter(self, schema: Any, overwrite: bool) -> _StreamWriter:
        _, size, _, wire = self._shape()
        return _StreamWriter(size, wire)


def register(spark: Any) -> None:
    """Register ``streamwire_floor`` in ``spark``, this module pickled by value."""
    from pyspark import cloudpickle

    for module in (sys.modules[__name__], raw_rabbitmq):
        cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]
    spark.dataSource.register(FloorDataSource)
