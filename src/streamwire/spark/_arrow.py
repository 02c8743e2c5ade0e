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
with pyspark's own conversion). A read may yield fewer columns: a user schema naming some of
the source's columns, in any order (``_schema.source_projection``), is the schema of every
batch, and the columns it leaves out are never built. The reader puts them together with a
:class:`Batcher`: the pieces of one partition's read (chunks, lists of messages) in order,
as batches of up to :data:`BATCH_ROWS` rows, since Spark's cost per batch is paid again for
every small chunk.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate
from typing import Any, Final

import pyarrow as pa

from streamwire.codec.columns import Columns
from streamwire.codec.message import Message, datetime_to_us
from streamwire.codec.properties import MessageId, MessageProperties
from streamwire.spark._property_columns import PROPERTY_COLUMNS
from streamwire.spark._resume import ROW_HEADER

__all__ = (
    "ALONE_BYTES",
    "BATCH_BYTES",
    "BATCH_ROWS",
    "SCHEMA",
    "Batcher",
    "columns_batch",
    "int64_array",
    "messages_batch",
)

#: Rows per batch the reader hands to Spark, at most, when it puts chunks together (Spark's
#: own Arrow batch size, ``spark.sql.execution.arrow.maxRecordsPerBatch``): a batch of a few
#: dozen rows costs Spark and the worker ten times more per row (docs/benchmarks/notes/2026-11.md).
BATCH_ROWS: Final = 10_000
#: ... and bytes of values, so that large messages make smaller batches. A single chunk or
#: list of messages bigger than either bound is a batch of its own.
BATCH_BYTES: Final = 8 << 20
#: A chunk with at least this many bytes of values is a batch of its own too: joining it to
#: others would copy its values once more for a batch cost already spread over a megabyte
#: (rows of 1 kB came in chunks of 4 MB, two to a batch, each copied by the join).
ALONE_BYTES: Final = 1 << 20

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


#: How to build each column, given its type in the batch's schema (a user schema may declare
#: the headers' values ``NOT NULL``, which is another Arrow type).
_Builders = Mapping[str, Callable[[pa.DataType], pa.Array]]


def _batch(schema: pa.Schema, build: _Builders) -> pa.RecordBatch:
    """The batch of ``schema``'s columns (the source's or a projection of it), building
    only those."""
    arrays = [build[field.name](field.type) for field in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _repeat(n: int, value: object) -> Callable[[pa.DataType], pa.Array]:
    return lambda t: pa.repeat(pa.scalar(value, t), n)


def _fixed(t: pa.DataType, values: array[int]) -> pa.Array:
    """An array of fixed-width ``t`` over ``values`` (native byte order, as Arrow's)."""
    assert values.itemsize * 8 == t.bit_width, (values.typecode, t)
    return pa.Array.from_buffers(t, len(values), [None, pa.py_buffer(values)])


def int64_array(values: Sequence[int]) -> pa.Array:
    """``values`` as an int64 array, from their bytes (no pandas, see :func:`_same`)."""
    return _fixed(pa.int64(), array("q", values))


def _column(values: list[Any], t: pa.DataType) -> pa.Array:
    """``values`` as an array of ``t``, built from their bytes where that is plain (every
    value null; binary values or 64-bit integers with none null), so that reading
    messages imports no pandas either (see :func:`_same`); else ``pa.array``."""
    if all(v is None for v in values):
        return pa.nulls(len(values), t)
    if None not in values:
        try:
            if pa.types.is_binary(t):
                ends = array("i", [0])
                ends.extend(accumulate(map(len, values)))
                buffers = [None, pa.py_buffer(ends), pa.py_buffer(b"".join(values))]
                return pa.Array.from_buffers(t, len(values), buffers)
            if pa.types.is_int64(t) or (pa.types.is_timestamp(t) and t.unit == "us"):
                return _fixed(t, array("q", values))
        except (OverflowError, TypeError):
            pass  # over 2 GiB of values, or not what the type says: pyarrow says why
    return pa.array(values, t)


def _same(n: int, value: int | str) -> Callable[[pa.DataType], pa.Array]:
    """``n`` times ``value`` (the ``stream`` or ``partition`` of a run of chunks), built from
    its bytes: ``pa.scalar`` of a Python value has pyarrow look for pandas, whose import
    costs a fresh Spark worker a third of a second on its first batch."""

    def build(t: pa.DataType) -> pa.Array:
        if pa.types.is_int32(t) and isinstance(value, int):
            return _fixed(t, array("i", [value]) * n)
        if pa.types.is_string(t) and isinstance(value, str):
            data = value.encode()
            size = len(data)
            ends = array("i", range(0, (n + 1) * size, size)) if size else array("i", [0]) * (n + 1)
            buffers = [None, pa.py_buffer(ends), pa.py_buffer(data * n)]
            return pa.Array.from_buffers(t, n, buffers)
        return _repeat(n, value)(t)  # another type a user schema declared

    return build


def _nulls(n: int) -> Callable[[pa.DataType], pa.Array]:
    return lambda t: pa.nulls(n, t)


def _concat(arrays: list[pa.Array]) -> pa.Array:
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


class _Piece:
    """The rows of one chunk's columns in a range: ``value`` and ``offset`` arrays over its
    buffers (no copy) and the chunk's timestamp."""

    __slots__ = ("offset", "rows", "timestamp_us", "value")

    def __init__(self, cols: Columns, start: int, end: int) -> None:
        offsets = memoryview(cols.offsets).cast("q")
        lo = bisect_left(offsets, start)
        n = max(bisect_left(offsets, end) - lo, 0)
        buffers = [None, pa.py_buffer(cols.value_ends), pa.py_buffer(cols.values)]
        self.rows = n
        self.value = pa.Array.from_buffers(pa.binary(), n, buffers, 0, lo)
        self.offset = pa.Array.from_buffers(
            pa.int64(), n, [None, pa.py_buffer(cols.offsets)], 0, lo
        )
        self.timestamp_us = cols.timestamp_us


def _done(cols: Columns, end: int) -> bool:
    """Whether a read of a range ending at ``end`` is done once it has ``cols``: a message of
    ``cols`` is at or past ``end - 1``."""
    offsets = memoryview(cols.offsets).cast("q")
    return cols.count > 0 and offsets[cols.count - 1] >= end - 1


def _timestamps(pieces: Sequence[_Piece], n: int) -> pa.Array:
    """Each piece's rows at its chunk's timestamp, built from the microseconds' bytes (see
    :func:`_same`); null where a chunk has none."""
    if all(p.timestamp_us is None for p in pieces):
        return pa.nulls(n, _TIMESTAMP)
    if any(p.timestamp_us is None for p in pieces):  # not from a broker: kept simple
        return pa.array([p.timestamp_us for p in pieces for _ in range(p.rows)], _TIMESTAMP)
    micros = array("q")
    for p in pieces:
        micros.extend(array("q", [p.timestamp_us or 0]) * p.rows)
    return _fixed(_TIMESTAMP, micros)


def _pieces_batch(
    pieces: Sequence[_Piece], stream: str, partition: int, schema: pa.Schema = SCHEMA
) -> pa.RecordBatch:
    n = sum(p.rows for p in pieces)
    build: _Builders = {
        "value": lambda _: _concat([p.value for p in pieces]),
        "key": _nulls(n),
        "headers": _nulls(n),
        "stream": _same(n, stream),
        "partition": _same(n, partition),
        "offset": lambda _: _concat([p.offset for p in pieces]),
        "timestamp": lambda _: _timestamps(pieces, n),
    }
    nulls = _nulls(n)  # plain bodies: no properties, no annotations
    return _batch(schema, {**build, "annotations": nulls, **dict.fromkeys(PROPERTY_COLUMNS, nulls)})


def columns_batch(
    cols: Columns,
    stream: str,
    partition: int,
    start: int,
    end: int,
    schema: pa.Schema = SCHEMA,
) -> tuple[pa.RecordBatch, bool]:
    """The messages of ``cols`` with offsets in ``[start, end)`` (the columns of
    ``schema``), and whether a read of that range is done (a message of ``cols`` is at or
    past ``end - 1``)."""
    return _pieces_batch([_Piece(cols, start, end)], stream, partition, schema), _done(cols, end)


class Batcher:
    """The rows of one partition's read, in order, as record batches of up to
    :data:`BATCH_ROWS` rows and :data:`BATCH_BYTES` of values: chunk columns
    (:meth:`columns`) and messages (:meth:`messages`) go in, :meth:`take` hands out what
    is ready (a full batch, or a run of one kind ended by the other) and, with
    ``everything``, what is pending too. The batches are exactly what :func:`columns_batch`
    and :func:`messages_batch` give for the same rows, concatenated, in ``schema`` (the
    source's, or the columns a user schema picks)."""

    def __init__(
        self,
        stream: str,
        partition: int,
        rows: int = BATCH_ROWS,
        nbytes: int = BATCH_BYTES,
        schema: pa.Schema = SCHEMA,
    ) -> None:
        self._stream, self._partition, self._schema = stream, partition, schema
        self._max_rows, self._max_bytes = rows, nbytes
        self._pieces: list[_Piece] = []
        self._messages: list[Message] = []
        self._rows = self._bytes = 0
        self._ready: list[pa.RecordBatch] = []
        self._alone = False  # what is pending is one piece of ALONE_BYTES or more

    def columns(self, cols: Columns, start: int, end: int) -> bool:
        """Add the messages of ``cols`` with offsets in ``[start, end)``; whether a read of
        that range is done (a message of ``cols`` is at or past ``end - 1``)."""
        piece = _Piece(cols, start, end)
        if piece.rows:
            if self._messages:
                self._seal()
            self._add(piece.rows, piece.value.nbytes)
            self._pieces.append(piece)
        return _done(cols, end)

    def messages(self, messages: Sequence[Message]) -> None:
        """Add messages, in order."""
        if messages:
            if self._pieces:
                self._seal()
            self._add(len(messages), sum(len(m.value) for m in messages))
            self._messages.extend(messages)

    def _add(self, rows: int, nbytes: int) -> None:
        alone = nbytes >= ALONE_BYTES  # a batch of its own: see ALONE_BYTES
        if self._rows and (
            self._rows + rows > self._max_rows
            or self._bytes + nbytes > self._max_bytes
            or alone
            or self._alone
        ):
            self._seal()
        self._rows += rows
        self._bytes += nbytes
        self._alone = alone

    def _seal(self) -> None:
        if self._pieces:
            self._ready.append(
                _pieces_batch(self._pieces, self._stream, self._partition, self._schema)
            )
        elif self._messages:
            self._ready.append(
                messages_batch(self._messages, self._stream, self._partition, self._schema)
            )
        self._pieces, self._messages = [], []
        self._rows = self._bytes = 0
        self._alone = False

    def take(self, everything: bool = False) -> list[pa.RecordBatch]:
        """The batches ready, and with ``everything`` the rows pending as well."""
        if everything or self._rows >= self._max_rows or self._bytes >= self._max_bytes:
            self._seal()
        ready, self._ready = self._ready, []
        return ready


def _headers(message: Message) -> dict[str, bytes] | None:
    """The message's headers as the ``headers`` column has them: the sink's own row identity
    (``_resume.ROW_HEADER``) left out, so that what a sink wrote reads back as it was."""
    headers = message.headers
    if not headers:
        return None
    return {k: v.to_bytes() for k, v in headers.items() if k != ROW_HEADER} or None


def _id_text(value: MessageId | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.hex()
    return str(value)  # an int in decimal, a uuid in its canonical form


def _property_column(
    props: Callable[[], list[MessageProperties | None]], name: str
) -> Callable[[pa.DataType], pa.Array]:
    def build(t: pa.DataType) -> pa.Array:
        values = [None if p is None else getattr(p, name) for p in props()]
        if name in ("message_id", "correlation_id"):
            values = [_id_text(v) for v in values]
        elif pa.types.is_timestamp(t):
            values = [None if v is None else datetime_to_us(v) for v in values]
        return _column(values, t)

    return build


def _annotations(message: Message) -> dict[str, bytes] | None:
    return {k: v.to_bytes() for k, v in message.annotations.items()} or None


def messages_batch(
    messages: Sequence[Message], stream: str, partition: int, schema: pa.Schema = SCHEMA
) -> pa.RecordBatch:
    """One row per message, in order (the columns of ``schema``)."""
    n = len(messages)
    cache: list[list[MessageProperties | None]] = []

    def props() -> list[MessageProperties | None]:
        if not cache:  # read once for every property column the schema picks
            cache.append([m.properties for m in messages])
        return cache[0]

    build: dict[str, Callable[[pa.DataType], pa.Array]] = {
        "value": lambda t: _column([m.value for m in messages], t),
        "key": lambda t: _column([m.key for m in messages], t),
        "headers": lambda t: _column([_headers(m) for m in messages], t),
        "stream": _same(n, stream),
        "partition": _same(n, partition),
        "offset": lambda t: _column([m.offset for m in messages], t),
        "timestamp": lambda t: _column([m.timestamp_us for m in messages], t),
        "annotations": lambda t: _column([_annotations(m) for m in messages], t),
    }
    for name in PROPERTY_COLUMNS:
        build[name] = _property_column(props, name)
    return _batch(schema, build)
