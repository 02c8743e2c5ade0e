"""The source's rows as Arrow record batches, in the schema Spark expects.

PySpark (>= 4.0) takes ``pyarrow.RecordBatch`` objects from a reader's ``read()`` as they
are; tuples go through a Python converter per value and column, which cost more than
reading the messages. Two ways in, one schema (:data:`SCHEMA`, what pyspark derives from
``SOURCE_SCHEMA_DDL``):

* :func:`columns_batch`: a :class:`~streamwire.codec.columns.Columns` (a RabbitMQ chunk of
  plain bodies): its buffers become the ``value`` and ``offset`` arrays as they are, the
  other columns are constants or nulls; no Python object per message.
* :func:`messages_batch`: any list of messages (every broker), one Python list per column.

Both give exactly the batch pyspark would build from the row tuples (the tests compare them
with pyspark's own conversion).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, Final

import pyarrow as pa

from streamwire.codec.columns import Columns
from streamwire.codec.message import Message

__all__ = ("SCHEMA", "columns_batch", "messages_batch")

_HEADERS: Final = pa.map_(pa.string(), pa.binary())
_TIMESTAMP: Final = pa.timestamp("us", tz="UTC")

SCHEMA: Final = pa.schema(
    [
        ("value", pa.binary()),
        ("key", pa.binary()),
        ("headers", _HEADERS),
        ("stream", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", _TIMESTAMP),
    ]
)


def _constants(n: int, stream: str, partition: int) -> tuple[pa.Array, pa.Array]:
    return (
        pa.repeat(pa.scalar(stream, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
    )


def columns_batch(
    cols: Columns, stream: str, partition: int, start: int, end: int
) -> tuple[pa.RecordBatch, bool]:
    """The messages of ``cols`` with offsets in ``[start, end)``, and whether a read of that
    range is done (a message of ``cols`` is at or past ``end - 1``)."""
    offsets = memoryview(cols.offsets).cast("q")
    lo = bisect_left(offsets, start)
    hi = bisect_left(offsets, end)
    done = hi < cols.count or (hi > 0 and offsets[hi - 1] >= end - 1)
    n = max(hi - lo, 0)
    buffers = [None, pa.py_buffer(cols.value_ends), pa.py_buffer(cols.values)]
    values = pa.Array.from_buffers(pa.binary(), n, buffers, 0, lo)
    offset = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols.offsets)], 0, lo)
    if cols.timestamp_us is None:
        timestamp = pa.nulls(n, _TIMESTAMP)
    else:
        timestamp = pa.repeat(pa.scalar(cols.timestamp_us, _TIMESTAMP), n)
    stream_col, partition_col = _constants(n, stream, partition)
    arrays = [
        values,
        pa.nulls(n, pa.binary()),
        pa.nulls(n, _HEADERS),
        stream_col,
        partition_col,
        offset,
        timestamp,
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA), done


def _headers(message: Message) -> dict[str, bytes] | None:
    return {k: v.to_bytes() for k, v in message.headers.items()} or None


def messages_batch(messages: Sequence[Message], stream: str, partition: int) -> pa.RecordBatch:
    """One row per message, in order."""
    n = len(messages)
    stream_col, partition_col = _constants(n, stream, partition)
    arrays: list[Any] = [
        pa.array([m.value for m in messages], pa.binary()),
        pa.array([m.key for m in messages], pa.binary()),
        pa.array([_headers(m) for m in messages], _HEADERS),
        stream_col,
        partition_col,
        pa.array([m.offset for m in messages], pa.int64()),
        pa.array([m.timestamp_us for m in messages], _TIMESTAMP),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)
