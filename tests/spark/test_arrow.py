"""The source's Arrow batches (``streamwire.spark._arrow``) are exactly what pyspark builds
from the row tuples the reader used to yield, and the columnar path (RabbitMQ chunks of
plain bodies) gives exactly what the per-message path gives. No SparkSession, no broker."""

from __future__ import annotations

import dataclasses
import re
import zlib
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)
from pyspark.sql.worker.plan_data_source_read import records_to_arrow_batches

import streamwire
from streamwire.codec.amqp import encode_data_body
from streamwire.codec.columns import Columns
from streamwire.rabbitmq._amqp_map import decode_chunk
from streamwire.rabbitmq._columns import chunk_columns
from streamwire.spark import SourceSchemaError, _arrow
from streamwire.spark._resume import ROW_HEADER
from streamwire.spark._schema import _utc_arrow_schema, source_projection
from streamwire.spark.datasource import StreamwireDataSource, _messages_in_range
from tests.fresh import run_fresh
from tests.message_properties import CREATED, EVERY_PROPERTY, MESSAGE_UUID
from tests.property.test_native_core import chunk_bytes
from tests.property.test_rabbitmq_decode_chunk import simple
from tests.unit.iggy.strategies import HEADERS

pytestmark = [pytest.mark.spark]

#: The source schema as pyspark parses ``SOURCE_SCHEMA_DDL``.
SPARK_SCHEMA = StructType(
    [
        StructField("value", BinaryType()),
        StructField("key", BinaryType()),
        StructField("headers", MapType(StringType(), BinaryType())),
        StructField("stream", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
    ]
)


def row(message: streamwire.Message, stream: str, partition: int) -> tuple[Any, ...]:
    """The tuple the reader yielded before it built Arrow batches (the sink's row identity
    header left out, as the reader leaves it out: Hypothesis draws it, from the source)."""
    headers = {k: v.to_bytes() for k, v in message.headers.items() if k != ROW_HEADER} or None
    return (
        message.value,
        message.key,
        headers,
        stream,
        partition,
        message.offset,
        message.timestamp,
    )


def spark_batch(rows: list[tuple[Any, ...]]) -> pa.Table:
    """What pyspark's worker makes of the rows (its own conversion, as a table)."""
    batches: Iterator[pa.RecordBatch] = iter(
        records_to_arrow_batches(iter(rows), 1 << 20, SPARK_SCHEMA, StreamwireDataSource({}))
    )
    return pa.Table.from_batches(list(batches), schema=_arrow.SCHEMA)


def test_the_schema_is_the_one_pyspark_expects() -> None:
    assert _utc_arrow_schema(to_arrow_schema, SPARK_SCHEMA).equals(_arrow.SCHEMA)
    assert StreamwireDataSource({}).schema().replace(" ", "") == (
        "value binary, key binary, headers map<string,binary>, stream string, "
        "partition int, offset long, timestamp timestamp"
    ).replace(" ", "")


MESSAGES = st.lists(
    st.builds(
        lambda v, k, h, ts, off: streamwire.Message.received(
            v, key=k, headers=h, timestamp_us=ts, offset=off
        ),
        st.binary(max_size=30),
        st.none() | st.binary(max_size=8),
        HEADERS,
        st.none() | st.integers(0, 2**53),
        st.integers(0, 2**63 - 1),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=150)
@given(MESSAGES, st.text(min_size=1, max_size=10), st.integers(0, 2**31 - 1))
def test_messages_give_the_batch_pyspark_builds_from_rows(
    messages: list[streamwire.Message], stream: str, partition: int
) -> None:
    got = _arrow.messages_batch(messages, stream, partition)
    assert got.schema.equals(_arrow.SCHEMA)
    expected = spark_batch([row(m, stream, partition) for m in messages])
    assert pa.Table.from_batches([got]).equals(expected)


@settings(max_examples=150)
@given(
    st.lists(st.binary(max_size=100), min_size=1, max_size=40),
    st.integers(0, 1000),
    st.integers(0, 60),
    st.integers(0, 60),
    st.integers(0, 2**40),
)
def test_columns_give_the_batch_of_their_messages(
    bodies: list[bytes], chunk_id: int, skip: int, start: int, end: int
) -> None:
    """A chunk read through its columns and through its messages, for any range
    ``[start, end)`` (relative to the chunk), gives the same rows and the same verdict on
    whether the read is done."""
    data = b"".join(simple(encode_data_body(b)) for b in bodies)
    chunk = chunk_bytes(data, len(bodies), chunk_id, zlib.crc32(data), 1_700_000_000_123)
    lo, hi = chunk_id + start, chunk_id + start + end + 1
    cols = chunk_columns(chunk, skip_below=chunk_id + skip)
    assert cols is not None
    got, done = _arrow.columns_batch(cols, "s", 3, lo, hi)
    messages = decode_chunk(chunk, stream="s", skip_below=chunk_id + skip)
    taken, expected_done = _messages_in_range(messages, lo, hi)
    assert done == expected_done
    assert got.equals(_arrow.messages_batch(taken, "s", 3))
    assert pa.Table.from_batches([got]).equals(spark_batch([row(m, "s", 3) for m in taken]))


def _chunk(bodies: list[bytes], chunk_id: int, timestamp_ms: int) -> bytes:
    data = b"".join(simple(encode_data_body(b)) for b in bodies)
    return chunk_bytes(data, len(bodies), chunk_id, zlib.crc32(data), timestamp_ms)


PIECES = st.lists(
    st.tuples(
        st.lists(st.binary(max_size=40), min_size=1, max_size=12),
        st.sampled_from(["columns", "messages", "no timestamp"]),
        st.integers(0, 3),  # the chunk's timestamp: a few values, so runs repeat
    ),
    min_size=1,
    max_size=8,
)


#: The source's columns that are never null (a user schema may say ``NOT NULL``).
NEVER_NULL = {"value", "stream", "partition", "offset"}


@st.composite
def user_schemas(draw: st.DrawFn) -> StructType:
    """A user schema the source accepts: some of its columns in any order, ``NOT NULL`` where
    a column is never null, headers with or without null values allowed."""
    fields = draw(st.permutations(SPARK_SCHEMA.fields))[: draw(st.integers(1, 7))]
    picked = []
    for f in fields:
        data_type = f.dataType
        if f.name == "headers":
            data_type = MapType(StringType(), BinaryType(), draw(st.booleans()))
        nullable = f.name not in NEVER_NULL or draw(st.booleans())
        picked.append(StructField(f.name, data_type, nullable))
    return StructType(picked)


def pick(batches: list[pa.RecordBatch], schema: pa.Schema) -> dict[str, list[Any]]:
    """The values of ``schema``'s columns in full-schema ``batches``, by name."""
    table = pa.Table.from_batches(batches, schema=_arrow.SCHEMA)
    return {name: table.column(name).to_pylist() for name in schema.names}


def test_the_source_schema_projects_to_itself() -> None:
    assert source_projection(SPARK_SCHEMA).equals(_arrow.SCHEMA)


@settings(max_examples=150)
@given(MESSAGES, user_schemas())
def test_a_user_schema_gives_the_batch_pyspark_builds_from_its_columns(
    messages: list[streamwire.Message], user: StructType
) -> None:
    """The batch for a user schema is what pyspark's worker builds from the rows' values in
    those columns, in that order, and its schema is the one the worker checks against."""
    schema = source_projection(user)
    assert schema.equals(_utc_arrow_schema(to_arrow_schema, user))
    got = _arrow.messages_batch(messages, "s", 3, schema)
    assert got.schema.equals(schema)
    at = {f.name: i for i, f in enumerate(SPARK_SCHEMA.fields)}
    full = [row(m, "s", 3) for m in messages]
    rows = [tuple(r[at[name]] for name in user.fieldNames()) for r in full]
    converted = records_to_arrow_batches(iter(rows), 1 << 20, user, StreamwireDataSource({}))
    assert pa.Table.from_batches([got]).equals(pa.Table.from_batches(list(converted), schema))


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ([], "it names no column"),
        ([StructField("size", IntegerType())], "the source has no column 'size'"),
        ([StructField("value", StringType())], "column 'value' is binary, not string"),
        ([StructField("offset", IntegerType())], "column 'offset' is bigint, not int"),
        ([StructField("timestamp", TimestampNTZType())], "is timestamp, not timestamp_ntz"),
        ([StructField("key", BinaryType(), False)], "column 'key' can be null"),
        ([StructField("headers", SPARK_SCHEMA["headers"].dataType, False)], "'headers' can be"),
        ([SPARK_SCHEMA["value"], SPARK_SCHEMA["value"]], "duplicate column(s) 'value'"),
    ],
)
def test_a_user_schema_that_is_not_a_choice_of_the_columns_says_why(
    fields: list[StructField], problem: str
) -> None:
    with pytest.raises(SourceSchemaError, match=re.escape(problem)):
        source_projection(StructType(fields))
    source = StreamwireDataSource({"url": "rabbitmq-stream://h", "stream": "s"})
    with pytest.raises(SourceSchemaError, match=re.escape(problem)):
        source.reader(StructType(fields))
    with pytest.raises(SourceSchemaError, match=re.escape(problem)):
        source.streamReader(StructType(fields))


def test_both_readers_read_in_the_schema_they_are_given() -> None:
    user = StructType([SPARK_SCHEMA["offset"], SPARK_SCHEMA["value"]])
    source = StreamwireDataSource({"url": "rabbitmq-stream://h", "stream": "s"})
    assert source.reader(user).schema.names == ["offset", "value"]
    assert source.streamReader(user).schema.equals(source_projection(user))
    assert source.reader(SPARK_SCHEMA).schema.equals(_arrow.SCHEMA)
    assert source.reader(None).schema.equals(_arrow.SCHEMA)


@settings(max_examples=200)
@given(
    PIECES,
    st.integers(0, 80),
    st.integers(1, 80),
    st.integers(1, 25),
    st.integers(1, 400),
    user_schemas(),
)
def test_the_batcher_gives_the_rows_of_the_pieces_in_order(
    pieces: list[tuple[list[bytes], str, int]],
    start: int,
    length: int,
    max_rows: int,
    max_bytes: int,
    user: StructType,
) -> None:
    """Chunks (as columns, with or without a timestamp) and lists of messages, in offset
    order, fed to a Batcher as the reader does: the batches hold exactly the rows the
    per-piece batches hold (and so pyspark's conversion of the rows), stop where the range
    says, and none is bigger than the bounds unless it is one piece alone. A Batcher for a
    user schema fed the same gives the same batches with those columns only."""
    end = start + length
    batcher = _arrow.Batcher("s", 3, rows=max_rows, nbytes=max_bytes)
    projection = source_projection(user)
    projected = _arrow.Batcher("s", 3, rows=max_rows, nbytes=max_bytes, schema=projection)
    picked: list[pa.RecordBatch] = []
    got: list[pa.RecordBatch] = []
    expected: list[pa.RecordBatch] = []
    taken_rows: list[tuple[Any, ...]] = []
    sizes: list[tuple[int, int]] = []  # (rows, value bytes) of each piece's rows in range
    chunk_id = 0
    for bodies, kind, ts in pieces:
        chunk = _chunk(bodies, chunk_id, 1_700_000_000_000 + ts)
        chunk_id += len(bodies)
        if kind == "messages":
            messages = decode_chunk(chunk, stream="s")
            taken, done = _messages_in_range(messages, start, end)
            batcher.messages(taken)
            projected.messages(taken)
            expected.append(_arrow.messages_batch(taken, "s", 3))
        else:
            cols = chunk_columns(chunk)
            assert cols is not None
            if kind == "no timestamp":
                cols = dataclasses.replace(cols, timestamp_us=None)
            batch, done = _arrow.columns_batch(cols, "s", 3, start, end)
            assert batcher.columns(cols, start, end) == done
            assert projected.columns(cols, start, end) == done
            expected.append(batch)
            taken = [
                streamwire.Message.received(bytes(v), offset=o, timestamp_us=cols.timestamp_us)
                for v, o in zip(
                    batch.column("value").to_pylist(),
                    batch.column("offset").to_pylist(),
                    strict=True,
                )
            ]
        taken_rows += [row(m, "s", 3) for m in taken]
        sizes.append((len(taken), sum(len(m.value) for m in taken)))
        got += batcher.take(everything=done)
        picked += projected.take(everything=done)
        if done:
            break
    got += batcher.take(everything=True)
    picked += projected.take(everything=True)
    assert all(b.schema.equals(projection) for b in picked)
    assert [b.num_rows for b in picked] == [b.num_rows for b in got]
    table = pa.Table.from_batches(picked, schema=projection)
    assert {n: table.column(n).to_pylist() for n in projection.names} == pick(got, projection)
    assert all(b.schema.equals(_arrow.SCHEMA) and b.num_rows for b in got)
    want = pa.Table.from_batches(expected, schema=_arrow.SCHEMA)
    assert pa.Table.from_batches(got, schema=_arrow.SCHEMA).equals(want)
    if taken_rows:
        assert want.equals(spark_batch(taken_rows))
    lone = {r for r, _ in sizes if r > max_rows} | {r for r, b in sizes if b > max_bytes}
    for b in got:
        nbytes = sum(len(v) for v in b.column("value").to_pylist())
        assert (b.num_rows <= max_rows and nbytes <= max_bytes) or b.num_rows in lone


#: Every property column and the annotations, as a user schema picks them.
PROPERTIES_SCHEMA = StructType(
    [
        StructField("offset", LongType()),
        StructField("message_id", StringType()),
        StructField("user_id", BinaryType()),
        StructField("to", StringType()),
        StructField("subject", StringType()),
        StructField("reply_to", StringType()),
        StructField("correlation_id", StringType()),
        StructField("content_type", StringType()),
        StructField("content_encoding", StringType()),
        StructField("absolute_expiry_time", TimestampType()),
        StructField("creation_time", TimestampType()),
        StructField("group_id", StringType()),
        StructField("group_sequence", LongType()),
        StructField("reply_to_group_id", StringType()),
        StructField("annotations", MapType(StringType(), BinaryType())),
    ]
)


def test_property_columns_give_the_batch_pyspark_builds_from_their_values() -> None:
    """A user schema may pick the message properties and annotations: ids as text (uuid
    canonical, int decimal, bytes hex), times as UTC timestamps; null where unset."""
    every, created, u = EVERY_PROPERTY, CREATED, MESSAGE_UUID
    messages = [
        streamwire.Message(b"a", properties=every, annotations={"x-opt-n": 3}),
        streamwire.Message(b"b"),
        streamwire.Message(b"c", properties=streamwire.MessageProperties(message_id=b"\x00\xff")),
        streamwire.Message(b"d", properties=streamwire.MessageProperties(correlation_id="c-1")),
    ]
    for i, m in enumerate(messages):
        m.offset = i
    schema = source_projection(PROPERTIES_SCHEMA)
    got = _arrow.messages_batch(messages, "s", 0, schema)
    rows = [
        (
            0,
            str(u),
            b"guest",
            "orders",
            "created",
            "replies",
            str(2**64 - 1),
            "application/json",
            "gzip",
            datetime(2030, 1, 1, tzinfo=UTC),
            created,
            "g-1",
            2**32 - 1,
            "g-0",
            {"x-opt-n": (3).to_bytes(8, "little")},
        ),
        (1, *[None] * 14),
        (2, "00ff", *[None] * 13),
        (3, None, None, None, None, None, "c-1", *[None] * 8),
    ]
    converted = records_to_arrow_batches(
        iter(rows), 1 << 20, PROPERTIES_SCHEMA, StreamwireDataSource({})
    )
    assert pa.Table.from_batches([got]).equals(pa.Table.from_batches(list(converted), schema))
    # a chunk of plain bodies (the columnar path) has none of them
    chunk = chunk_bytes(simple(encode_data_body(b"x")), 1, 7, 0, 1_700_000_000_000)
    cols = chunk_columns(chunk, verify_crc=False)
    assert cols is not None
    batch, _ = _arrow.columns_batch(cols, "s", 0, 7, 8, schema)
    assert batch.to_pylist() == [{"offset": 7, **dict.fromkeys(PROPERTIES_SCHEMA.names[1:])}]


def _columns(values: list[bytes], first: int, timestamp_us: int | None) -> Columns:
    ends = [0]
    for v in values:
        ends.append(ends[-1] + len(v))
    return Columns(
        count=len(values),
        value_ends=array("i", ends).tobytes(),
        values=b"".join(values),
        offsets=array("q", range(first, first + len(values))).tobytes(),
        timestamp_us=timestamp_us,
    )


def test_chunks_of_a_megabyte_or_more_are_batches_of_their_own_without_a_copy() -> None:
    """Small chunks are joined into one batch, past ``ALONE_BYTES`` too; a chunk with
    ``ALONE_BYTES`` of values or more is a batch of its own whose values are the chunk's own
    buffer (joining it would copy every value once more), and the rows are the same either
    way."""
    big = _arrow.ALONE_BYTES // 1000 + 1
    small = big * 2 // 3
    pieces = [
        _columns([b"a" * 1000] * small, 0, 1_000),
        _columns([b"b" * 1000] * small, small, 2_000),
        _columns([b"a" * 1000] * small, 2 * small, 1_000),
        _columns([b"c" * 1000] * big, 3 * small, 3_000),
        _columns([b"d" * 1000] * big, 3 * small + big, 4_000),
        _columns([b"e" * 10] * 2, 3 * small + 2 * big, 5_000),
    ]
    end = 3 * small + 2 * big + 2
    batcher = _arrow.Batcher("s", 0)
    got: list[pa.RecordBatch] = []
    for cols in pieces:
        done = batcher.columns(cols, 0, end)
        got += batcher.take(everything=done)
    assert [b.num_rows for b in got] == [3 * small, big, big, 2]
    for batch, cols in zip(got[1:3], pieces[3:5], strict=True):
        data = batch.column("value").buffers()[2]
        assert data is not None
        assert data.address == pa.py_buffer(cols.values).address
    want = [_arrow.columns_batch(c, "s", 0, 0, end)[0] for c in pieces]
    assert pa.Table.from_batches(got).equals(pa.Table.from_batches(want))
    assert pa.Table.from_batches(got).column("timestamp").cast(pa.int64()).to_pylist() == (
        [1_000] * small
        + [2_000] * small
        + [1_000] * small
        + [3_000] * big
        + [4_000] * big
        + [5_000] * 2
    )


def test_a_fresh_worker_imports_neither_pandas_nor_pyarrow_compute_for_chunks() -> None:
    """Importing the source (what a new Spark planner or worker does first) and turning
    chunks into batches (several timestamps, the stream and partition columns), and plain
    messages (no key, no headers: Liftbridge's and Iggy's usual), imports neither pandas
    (``pa.scalar`` and ``pa.array`` of Python values look for it: a third of a second) nor
    ``pyarrow.compute``, beyond what pyspark and pyarrow import themselves."""
    code = (
        "import sys, pyarrow, pyspark.sql.datasource\n"
        "before = {m for m in ('pandas', 'pyarrow.compute') if m in sys.modules}\n"
        "import streamwire.spark.datasource\n"
        "from array import array\n"
        "from streamwire import Message\n"
        "from streamwire.codec.columns import Columns\n"
        "from streamwire.spark import _arrow\n"
        "b = _arrow.Batcher('s', 7)\n"
        "q = lambda *v: array('q', v).tobytes()\n"
        "i = lambda *v: array('i', v).tobytes()\n"
        "b.columns(Columns(3, i(0, 1, 2, 3), b'xxx', q(0, 1, 2), 1_000), 0, 10)\n"
        "b.columns(Columns(2, i(0, 2, 4), b'yyyy', q(3, 4), 2_000), 0, 10)\n"
        "[batch] = b.take(everything=True)\n"
        "ms = [Message.received(b'v%d' % i, offset=i, timestamp_us=7 + i) for i in range(4)]\n"
        "got = _arrow.messages_batch(ms, 's', 2)\n"
        "after = {m for m in ('pandas', 'pyarrow.compute') if m in sys.modules}\n"
        "assert after == before, after - before\n"
        "assert batch.validate(full=True) is None and got.validate(full=True) is None\n"
        "assert batch.column('stream').to_pylist() == ['s'] * 5\n"
        "assert batch.column('partition').to_pylist() == [7] * 5\n"
        "micros = batch.column('timestamp').cast(pyarrow.int64()).to_pylist()\n"
        "assert micros == [1000] * 3 + [2000] * 2\n"
        "assert got.column('value').to_pylist() == [b'v0', b'v1', b'v2', b'v3']\n"
        "assert got.column('offset').to_pylist() == [0, 1, 2, 3]\n"
        "assert got.column('timestamp').cast(pyarrow.int64()).to_pylist() == [7, 8, 9, 10]\n"
        "assert got.column('key').null_count == 4\n"
    )
    run_fresh(code)


@settings(max_examples=200)
@given(
    st.lists(st.one_of(st.none(), st.binary(max_size=8))),
    st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))),
    st.lists(st.one_of(st.none(), st.dictionaries(st.text(max_size=3), st.binary(max_size=3)))),
)
def test_columns_built_from_bytes_equal_pyarrows_own(
    values: list[bytes | None], numbers: list[int | None], maps: list[dict[str, bytes] | None]
) -> None:
    """A column of messages' values, keys, offsets, timestamps or headers is the array
    ``pa.array`` makes of the same Python values, null or not, empty or not."""
    assert _arrow._column(values, pa.binary()).equals(pa.array(values, pa.binary()))
    for t in (pa.int64(), _arrow.SCHEMA.field("timestamp").type):
        assert _arrow._column(numbers, t).equals(pa.array(numbers, t))
    headers = _arrow.SCHEMA.field("headers").type
    assert _arrow._column(maps, headers).equals(pa.array(maps, headers))
