"""Hypothesis: round trips (non-ASCII included), chunking invariance, garbage in → only
streamwire exceptions out, for the shared codec primitives."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamwire import HeaderKind, HeaderValue
from streamwire.codec import LENGTH_PREFIX_U32, FrameAccumulator, Reader, Writer
from streamwire.codec._structs import U8, U16, U32, BytesLike
from streamwire.codec.framing import GATHER_ABOVE, IGGY_HEADER
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


# gather_above: 1 gathers every frame that is incomplete once its header arrived, 30 only
# the larger ones, the default none of these (all frames are under 64 KiB)
GATHER = st.sampled_from((1, 30, GATHER_ABOVE))
CHUNK_TYPES = st.sampled_from((bytes, bytearray, memoryview))


@given(
    frames,
    st.lists(st.integers(1, 50), min_size=1, max_size=30),
    GATHER,
    CHUNK_TYPES,
)
def test_framing_is_invariant_under_chunking(
    bodies: list[bytes], cuts: list[int], gather: int, chunk_type: type[BytesLike]
) -> None:
    stream = b"".join(U32.pack(len(b)) + b for b in bodies)
    acc = FrameAccumulator(LENGTH_PREFIX_U32, max_frame_size=1024, gather_above=gather)
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        piece = bytearray(stream[pos : pos + step])
        acc.feed(chunk_type(piece))
        piece[:] = b"\xff" * len(piece)  # the caller may reuse its buffer once fed
        out.extend(acc.frames())
        pos += step
        i += 1
    assert out == bodies
    assert all(type(frame) is bytes for frame in out)
    assert acc.buffered == 0


@given(
    st.lists(st.binary(min_size=1, max_size=100), max_size=8),
    st.lists(st.integers(1, 700), min_size=1, max_size=10),
    GATHER,
)
def test_iggy_framing_is_invariant_under_chunking(
    bodies: list[bytes], cuts: list[int], gather: int
) -> None:
    def frame(body: bytes) -> bytes:
        header = bytearray(range(256))
        header[48:52] = (256 + len(body)).to_bytes(4, "little")
        return bytes(header) + body

    wanted = [frame(b) for b in bodies]
    stream = b"".join(wanted)
    acc = FrameAccumulator(IGGY_HEADER, max_frame_size=1024, gather_above=gather)
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        acc.feed(stream[pos : pos + step])
        assert acc.buffered <= len(stream)
        out.extend(acc.frames())
        pos += step
        i += 1
    assert out == wanted
    assert acc.buffered == 0


@given(st.binary(max_size=2000), st.integers(4, 600), GATHER, st.integers(1, 700))
def test_framing_garbage_only_raises_our_errors(
    data: bytes, limit: int, gather: int, step: int
) -> None:
    for spec in (LENGTH_PREFIX_U32, IGGY_HEADER):
        if limit < spec.header_size:
            continue
        acc = FrameAccumulator(spec, max_frame_size=limit, gather_above=gather)
        try:
            for pos in range(0, len(data), step):
                acc.feed(data[pos : pos + step])
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
