"""The source's Arrow batches (``streamwire.spark._arrow``) are exactly what pyspark builds
from the row tuples the reader used to yield, and the columnar path (RabbitMQ chunks of
plain bodies) gives exactly what the per-message path gives. No SparkSession, no broker."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
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
    TimestampType,
)
from pyspark.sql.worker.plan_data_source_read import records_to_arrow_batches

import streamwire
from streamwire.codec.amqp import encode_data_body
from streamwire.rabbitmq._amqp_map import decode_chunk
from streamwire.rabbitmq._columns import chunk_columns
from streamwire.spark import _arrow
from streamwire.spark.datasource import StreamwireDataSource, _messages_in_range
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
    """The tuple the reader yielded before it built Arrow batches."""
    headers = {k: v.to_bytes() for k, v in message.headers.items()} or None
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
    assert to_arrow_schema(SPARK_SCHEMA, timezone="UTC").equals(_arrow.SCHEMA)
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
