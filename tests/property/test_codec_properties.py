"""Hypothesis: round trips (non-ASCII included), chunking invariance, garbage in → only
streamwire exceptions out, for the shared codec primitives."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamwire import HeaderKind, HeaderValue
from streamwire.codec import LENGTH_PREFIX_U32, FrameAccumulator, Reader, Writer
from streamwire.codec._structs import U8, U16, U32
from streamwire.codec.framing import IGGY_HEADER
from streamwire.errors import DecodeError, FrameTooLargeError, StreamwireError

texts = st.text(max_size=200)  # hypothesis text includes non-ASCII, surrogates excluded


@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(-(2**63), 2**63 - 1), texts)))
def test_writer_reader_round_trip(items: list[tuple[int, int, str]]) -> None:
    w = Writer()
    for unsigned, signed, text in items:
        w.u64(unsigned).i64le(signed)
        if len(text.encode()) <= 32767:
            w.string16(text)
        w.prefixed_str(text, U32)
    r = Reader(w.getvalue())
    for unsigned, signed, text in items:
        assert r.u64() == unsigned
        assert r.i64le() == signed
        if len(text.encode()) <= 32767:
            assert r.string16() == text
        assert r.prefixed_str(U32) == text
    r.expect_end()


@given(st.binary(max_size=300))
def test_reader_garbage_only_raises_decode_error(data: bytes) -> None:
    r = Reader(data)
    try:
        while True:
            r.opt_string16()
            r.bytes32()
            r.count(U16, 2)
            r.prefixed(U8)
            r.u128le()
    except DecodeError:
        pass


frames = st.lists(st.binary(max_size=64), max_size=20)


@given(frames, st.lists(st.integers(1, 50), min_size=1, max_size=30))
def test_framing_is_invariant_under_chunking(bodies: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(U32.pack(len(b)) + b for b in bodies)
    acc = FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=1024)
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        acc.feed(stream[pos : pos + step])
        out.extend(acc.frames())
        pos += step
        i += 1
    assert out == bodies
    assert acc.buffered == 0


@given(st.binary(max_size=2000), st.integers(4, 600))
def test_framing_garbage_only_raises_our_errors(data: bytes, limit: int) -> None:
    for spec in (LENGTH_PREFIX_U32, IGGY_HEADER):
        if limit < spec.header_size:
            continue
        acc = FrameAccumulator(spec, max_frame_size=limit)
        acc.feed(data)
        try:
            for frame in acc.frames():
                assert len(frame) <= limit
        except (FrameTooLargeError, DecodeError):
            pass


header_values = st.one_of(
    st.binary(max_size=40).map(HeaderValue.raw),
    texts.map(HeaderValue.string),
    st.booleans().map(HeaderValue.boolean),
    st.integers(-(2**127), 2**127 - 1).map(HeaderValue.int128),
    st.integers(0, 2**128 - 1).map(HeaderValue.uint128),
    st.integers(-(2**31), 2**31 - 1).map(HeaderValue.int32),
    st.integers(0, 2**16 - 1).map(HeaderValue.uint16),
    st.floats(allow_nan=False).map(HeaderValue.float64),
    st.floats(width=32, allow_nan=False).map(HeaderValue.float32),
)


@given(header_values)
def test_header_value_wire_round_trip(value: HeaderValue) -> None:
    assert HeaderValue.from_bytes(value.kind, value.to_bytes()) == value


@given(st.integers(0, 20), st.binary(max_size=20))
def test_header_from_bytes_garbage(kind: int, data: bytes) -> None:
    try:
        value = HeaderValue.from_bytes(kind, data)
    except StreamwireError:
        return
    assert value.kind == HeaderKind(kind)
    assert value.to_bytes() == data
