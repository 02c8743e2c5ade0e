"""The sink's values from Arrow record batches (``_messages``): the same messages the row
path makes of the same rows, plain bodies where no row has a key or headers, and clear
errors for nulls and wrong types. No SparkSession, no broker."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamwire
from streamwire.rabbitmq._amqp_map import encode_message
from streamwire.spark import SinkSchemaError
from streamwire.spark._messages import content_keyed, run_values, runs
from streamwire.spark._schema import SinkLayout

pytestmark = [pytest.mark.spark]

HEADERS = pa.map_(pa.string(), pa.binary())
LAYOUT = SinkLayout(value=0, key=1, headers=2)

header_maps = st.none() | st.dictionaries(
    st.text(max_size=4), st.none() | st.binary(max_size=4), max_size=3
)
rows_strategy = st.lists(
    st.tuples(st.binary(max_size=8), st.none() | st.binary(max_size=4), header_maps),
    max_size=20,
)


def batch(rows: list[tuple[Any, ...]]) -> Any:
    columns: list[Any] = list(zip(*rows, strict=True)) if rows else [(), (), ()]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(columns[0], pa.binary()),
            pa.array(columns[1], pa.binary()),
            pa.array([None if h is None else list(h.items()) for h in columns[2]], HEADERS),
        ],
        names=["value", "key", "headers"],
    )


def wire(value: bytes | streamwire.Message) -> bytes:
    """What a producer sends for ``value`` (a bare body and a plain message are the same)."""
    return encode_message(value)


@settings(max_examples=200, deadline=None)
@given(rows_strategy, st.integers(0, 1000))
def test_a_batch_gives_the_messages_of_its_rows(rows: list[tuple[Any, ...]], first: int) -> None:
    """Same bytes on the wire, or the same streamwire error (an empty header key)."""
    try:
        expected = [wire(v) for v in run_values(LAYOUT, rows, first)]
    except streamwire.ConfigurationError as exc:
        with pytest.raises(type(exc), match=re.escape(str(exc))):
            run_values(LAYOUT, batch(rows), first)
        return
    from_batch = run_values(LAYOUT, batch(rows), first)
    assert [wire(v) for v in from_batch] == expected
    for value in from_batch:
        # a Message only where the row has something a bare body cannot carry
        if isinstance(value, streamwire.Message):
            assert value.key is not None or value.headers
        else:
            assert type(value) is bytes


def test_text_columns_are_sent_as_utf8_and_bodies_stay_plain() -> None:
    for text, binary in ((pa.string(), pa.binary()), (pa.large_string(), pa.large_binary())):
        run = pa.RecordBatch.from_arrays(
            [pa.array(["é", "x"], text), pa.array(["k", None], text)], names=["value", "key"]
        )
        values = run_values(SinkLayout(value=0, key=1), run, 0)
        assert values[1] == b"x"
        assert isinstance(values[0], streamwire.Message)
        assert (values[0].value, values[0].key) == ("é".encode(), b"k")
        only = pa.RecordBatch.from_arrays([pa.array([b"a", b"b"], binary)], names=["value"])
        assert run_values(SinkLayout(value=0), only, 0) == [b"a", b"b"]


def test_string_header_values_stay_text_and_null_ones_are_dropped() -> None:
    run = pa.RecordBatch.from_arrays(
        [
            pa.array([b"v"]),
            pa.array([[("s", "t"), ("gone", None)]], pa.map_(pa.string(), pa.string())),
        ],
        names=["value", "headers"],
    )
    (message,) = run_values(SinkLayout(value=0, headers=1), run, 0)
    assert isinstance(message, streamwire.Message)
    assert message.headers == {"s": streamwire.HeaderValue.string("t")}


def test_a_null_value_names_its_row_in_the_partition() -> None:
    run = batch([(b"a", None, None), (None, b"k", None)])
    with pytest.raises(SinkSchemaError, match=r"row 41 of this partition has a null 'value'"):
        run_values(LAYOUT, run, 40)


@pytest.mark.parametrize(
    ("arrays", "layout", "problem"),
    [
        ([pa.array([1, 2])], SinkLayout(value=0), "column 'value' must be binary"),
        (
            [pa.array([b"v"]), pa.array([3.5])],
            SinkLayout(value=0, key=1),
            "column 'key' must be binary (or string), not double",
        ),
        (
            [pa.array([b"v"]), pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int32()))],
            SinkLayout(value=0, headers=1),
            "column 'headers' must be map<string,binary>",
        ),
        ([pa.array([b"v"])], SinkLayout(value=0, key=3), "column 'key' (position 3) is missing"),
    ],
)
def test_wrong_columns_are_a_sink_schema_error(
    arrays: list[Any], layout: SinkLayout, problem: str
) -> None:
    run = pa.RecordBatch.from_arrays(arrays, names=[f"c{i}" for i in range(len(arrays))])
    with pytest.raises(SinkSchemaError) as caught:
        run_values(layout, run, 0)
    assert problem in str(caught.value)
    assert isinstance(caught.value, streamwire.ConfigurationError)


def test_runs_pass_batches_on_and_gather_rows() -> None:
    first = batch([(b"a", None, None)])
    got = list(runs(iter([first, (b"r1",), (b"r2",), (b"r3",)]), rows_per_run=2))
    assert got[0] is first
    assert got[1:] == [[(b"r1",), (b"r2",)], [(b"r3",)]]


def _batch(values: list[bytes]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary())})


def test_a_write_identity_is_keyed_by_the_tasks_first_row() -> None:
    """A rerun of the same rows keeps the identity (its dedup holds); other rows under the
    same writeId get another (nothing of theirs taken for stored); the input is unchanged."""
    items = [_batch([]), _batch([b"a", b"b"]), _batch([b"c"])]
    identity, rows = content_keyed("w", iter(items))
    assert list(rows) == items
    assert identity.startswith("w-")
    assert identity == content_keyed("w", iter(items))[0]
    other, _ = content_keyed("w", iter([_batch([b"z", b"b"]), _batch([b"c"])]))
    assert other != identity
    tuples, _ = content_keyed("w", iter([(b"a", None, None), (b"b", None, None)]))
    assert tuples != content_keyed("w", iter([(b"x", None, None)]))[0]
    assert tuples == content_keyed("w", iter([(b"a", None, None), (b"q", None, None)]))[0]
    empty, nothing = content_keyed("w", iter([_batch([])]))
    assert (empty, [b.num_rows for b in nothing]) == ("w", [0])
