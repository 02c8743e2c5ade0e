"""A chunk's plain records as column buffers (``streamwire.rabbitmq._columns``): the native
walk and the pure-Python walk give the same buffers, ``None`` for the same chunks and the
same errors; and the columns say exactly what ``decode_chunk``'s messages say."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamwire import _native
from streamwire.codec.amqp import encode_data_body
from streamwire.codec.columns import Columns
from streamwire.errors import StreamwireError
from streamwire.rabbitmq import _columns
from streamwire.rabbitmq._amqp_map import decode_chunk
from streamwire.rabbitmq._columns import chunk_columns, chunk_columns_py
from streamwire.rabbitmq.protocol.chunk import CHUNK_HEADER_SIZE, parse_chunk_header
from tests.property.test_native_core import CHUNK_DAMAGE, ENTRIES, chunk_bytes
from tests.property.test_rabbitmq_decode_chunk import simple, sub_batch

CORE, WHY = _native.built()
_Test = TypeVar("_Test", bound=Callable[..., Any])
_skip_without_core = pytest.mark.skipif(CORE is None, reason=f"{WHY} (build it: make native)")


def needs_core(test: _Test) -> _Test:
    """Runs the extension beside the pure-Python code (so the STREAMWIRE_PURE=1 pass leaves it
    out: ``both_cores``); skipped when the extension is not built."""
    marked: _Test = pytest.mark.both_cores(_skip_without_core(test))
    return marked


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except Exception as exc:
        return "raised", (type(exc), str(exc))


def native_walk(*args: Any) -> Any:
    assert CORE is not None
    return CORE.rmq_chunk_columns(*args)  # type: ignore[attr-defined]


@needs_core
@settings(max_examples=400)
@given(
    ENTRIES,
    st.integers(0, 2000),
    st.integers(-2, 2),
    st.integers(-5, 30),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.binary(max_size=9),
)
def test_native_and_pure_walks_agree(
    parts: list[tuple[int, bytes]],
    chunk_id: int,
    miscount: int,
    skip: int,
    amqp: bool,
    verify: bool,
    good_crc: bool,
    prefix: bytes,
) -> None:
    data = b"".join(e for _, e in parts)
    records = max(0, min(2**32 - 1, sum(n for n, _ in parts) + miscount))
    crc = zlib.crc32(data) ^ (0 if good_crc else 1)
    buf = prefix + chunk_bytes(data, records, chunk_id, crc, 1_700_000_000_000)
    start = len(prefix) + CHUNK_HEADER_SIZE
    args = (buf, start, start + len(data), chunk_id, records, skip, amqp, crc if verify else None)
    assert outcome(lambda: native_walk(*args)) == outcome(lambda: chunk_columns_py(*args))


@needs_core
@pytest.mark.parametrize("what", sorted(CHUNK_DAMAGE))
@pytest.mark.parametrize("good_crc", [True, False])
def test_each_error_is_the_same(what: str, good_crc: bool) -> None:
    entries, records = CHUNK_DAMAGE[what]
    crc = zlib.crc32(entries) ^ (0 if good_crc else 1)
    buf = chunk_bytes(entries, records, 7, crc, 1_700_000_000_000)
    args = (buf, 48, 48 + len(entries), 7, records, 0, True, crc)
    pure = outcome(lambda: chunk_columns_py(*args))
    if what == "sub-batch header" and good_crc:  # left to decode_chunk, which raises
        assert pure == ("ok", None)
    else:
        assert pure[0] == "raised"
        assert (what if good_crc else "chunk CRC-32 checksum mismatch") in pure[1][1]
    assert outcome(lambda: native_walk(*args)) == pure


@needs_core
def test_bounds_outside_the_buffer_are_refused_alike() -> None:
    buf = chunk_bytes(b"", 0, 0, 0, 0)
    for start, end in ((10, 5), (0, len(buf) + 1)):
        args = (buf, start, end, 0, 0, 0, True, None)
        pure = outcome(lambda: chunk_columns_py(*args))  # noqa: B023
        assert pure[0] == "raised"
        assert outcome(lambda: native_walk(*args)) == pure  # noqa: B023


def values_of(cols: Columns) -> list[tuple[bytes, int]]:
    ends = memoryview(cols.value_ends).cast("i")
    offsets = memoryview(cols.offsets).cast("q")
    assert len(ends) == cols.count + 1
    assert ends[0] == 0
    return [(cols.values[ends[i] : ends[i + 1]], offsets[i]) for i in range(cols.count)]


@settings(max_examples=300)
@given(ENTRIES, st.integers(0, 2000), st.integers(-5, 30), st.booleans(), st.booleans())
def test_columns_say_what_the_messages_say(
    parts: list[tuple[int, bytes]], chunk_id: int, skip: int, amqp: bool, native: bool
) -> None:
    data = b"".join(e for _, e in parts)
    records = sum(n for n, _ in parts)
    chunk = chunk_bytes(data, records, chunk_id, zlib.crc32(data), 1_700_000_000_000)
    with pytest.MonkeyPatch.context() as patch:
        if not native:
            patch.setattr(_columns, "_native", None)
        got = outcome(lambda: chunk_columns(memoryview(chunk), skip_below=skip, amqp=amqp))
    messages = outcome(lambda: decode_chunk(chunk, stream="s", skip_below=skip, amqp=amqp))
    if got[0] == "raised":
        assert issubclass(got[1][0], StreamwireError)
        assert messages == got  # the same error
        return
    cols = got[1]
    if cols is None:  # a compressed sub-batch or a record that is not a plain body
        return
    assert messages[0] == "ok"
    assert cols.timestamp_us == 1_700_000_000_000 * 1000
    assert values_of(cols) == [(m.value, m.offset) for m in messages[1]]
    assert all(not m.headers and m.key is None for m in messages[1])


@example([b"a" * 1000, b"b" * 255, b"c" * 256], 7)
@given(st.lists(st.binary(max_size=700), min_size=1, max_size=50), st.integers(0, 2**40))
def test_plain_chunks_give_columns(bodies: list[bytes], chunk_id: int) -> None:
    """Bodies of either data-section form (up to 255 bytes, and longer: a 1 kB body's chunk
    used to be decoded message by message) come as columns."""
    data = b"".join(simple(encode_data_body(b)) for b in bodies)
    chunk = chunk_bytes(data, len(bodies), chunk_id, zlib.crc32(data), 5)
    cols = chunk_columns(chunk, skip_below=chunk_id + 1)
    assert cols is not None
    assert values_of(cols) == [(b, chunk_id + i) for i, b in enumerate(bodies)][1:]


@pytest.mark.parametrize("native", [True, False])
def test_uncompressed_sub_batches_of_plain_bodies_give_columns(native: bool) -> None:
    """What a producer with ``sub_batch_size`` stores (the foreachBatch sink's too):
    entries of plain bodies, read in place like simple entries, mixed with them."""
    entries = [
        sub_batch([encode_data_body(b"a"), encode_data_body(b"b" * 300)], False),
        simple(encode_data_body(b"c")),
        sub_batch([encode_data_body(b"d")], False),
    ]
    data = b"".join(entries)
    chunk = chunk_bytes(data, 4, 10, zlib.crc32(data), 5)
    with pytest.MonkeyPatch.context() as patch:
        if not native:
            patch.setattr(_columns, "_native", None)
        cols = chunk_columns(chunk, skip_below=11)
    assert cols is not None
    assert values_of(cols) == [(b"b" * 300, 11), (b"c", 12), (b"d", 13)]


def test_chunks_columns_cannot_hold_are_left_to_messages() -> None:
    records = [encode_data_body(b"a"), encode_data_body(b"b")]
    data = sub_batch(records, True)  # compressed
    assert chunk_columns(chunk_bytes(data, 2, 0, zlib.crc32(data), 5)) is None
    data = sub_batch([encode_data_body(b"a"), b"not amqp"], False)
    assert chunk_columns(chunk_bytes(data, 2, 0, zlib.crc32(data), 5)) is None
    data = simple(b"not amqp")
    assert chunk_columns(chunk_bytes(data, 1, 0, zlib.crc32(data), 5)) is None
    plain = chunk_columns(chunk_bytes(data, 1, 0, zlib.crc32(data), 5), amqp=False)
    assert plain is not None
    assert values_of(plain) == [(b"not amqp", 0)]
    huge = chunk_bytes(simple(encode_data_body(b"x")), 1, 2**63 - 1, 0, 5)
    assert chunk_columns(huge, verify_crc=False) is None  # offsets beyond int64
    header = parse_chunk_header(huge)
    assert header.chunk_id == 2**63 - 1
