"""The consume hot path (``decode_chunk``) gives exactly what the general path gives
(``parse_chunk`` + ``decode_record``), for any mix of entries, and only streamwire errors
for garbage."""

from __future__ import annotations

import contextlib
import gzip
import struct
import zlib

from hypothesis import given
from hypothesis import strategies as st

from streamwire.codec.amqp import encode_data_body
from streamwire.codec.message import Message
from streamwire.errors import StreamwireError
from streamwire.rabbitmq._amqp_map import decode_chunk, decode_record, encode_message
from streamwire.rabbitmq.protocol.chunk import parse_chunk

U32 = struct.Struct(">I")


def simple(record: bytes) -> bytes:
    return U32.pack(len(record)) + record


def sub_batch(records: list[bytes], compress: bool) -> bytes:
    body = b"".join(U32.pack(len(r)) + r for r in records)
    stored = gzip.compress(body) if compress else body
    flags = 0x80 | (0x10 if compress else 0)
    return struct.pack(">BHII", flags, len(records), len(body), len(stored)) + stored


def chunk(entries: list[bytes], records: int, chunk_id: int) -> bytes:
    data = b"".join(entries)
    header = struct.pack(
        ">BBHIqQQIIIB3x",
        0x50, 0, len(entries), records, 1_700_000_000_000, 1, chunk_id,
        zlib.crc32(data), len(data), 0, 0,
    )  # fmt: skip
    return header + data


records = st.one_of(
    st.binary(max_size=300).map(encode_data_body),  # the fast path
    st.binary(max_size=40),  # not AMQP at all
    st.builds(
        lambda v, k: encode_message(Message(v, key=k, headers={"h": 1})),
        st.binary(max_size=20),
        st.binary(min_size=1, max_size=5),
    ),
)
entries = st.lists(
    st.one_of(
        records.map(lambda r: ([r], simple(r))),
        st.tuples(st.lists(records, min_size=1, max_size=4), st.booleans()).map(
            lambda rc: (rc[0], sub_batch(rc[0], rc[1]))
        ),
    ),
    max_size=12,
)


def key(m: Message) -> tuple[object, ...]:
    return (m.value, m.key, m.headers, m.offset, m.timestamp_us, m.stream)


@given(entries, st.integers(0, 1000), st.integers(0, 20), st.booleans())
def test_hot_path_equals_general_path(
    parts: list[tuple[list[bytes], bytes]], chunk_id: int, skip: int, amqp: bool
) -> None:
    total = sum(len(recs) for recs, _ in parts)
    data = chunk([e for _, e in parts], total, chunk_id)
    header, views = parse_chunk(data)
    ts = header.timestamp * 1000
    expected = [
        decode_record(v, chunk_id + i, ts, "s")
        if amqp
        else Message.received(bytes(v), offset=chunk_id + i, timestamp_us=ts, stream="s")
        for i, v in enumerate(views)
        if chunk_id + i >= chunk_id + skip
    ]
    got = decode_chunk(data, stream="s", skip_below=chunk_id + skip, amqp=amqp)
    assert [key(m) for m in got] == [key(m) for m in expected]
    # as Deliver hands it over: a view of the tail of the frame's bytes (no copy)
    framed = b"\x00\x08\x00\x01\x07" + data
    tail = decode_chunk(memoryview(framed)[5:], stream="s", skip_below=chunk_id + skip, amqp=amqp)
    assert [key(m) for m in tail] == [key(m) for m in expected]
    assert all(type(m.value) is bytes for m in got)


@given(st.binary(max_size=400))
def test_garbage_only_raises_streamwire_errors(noise: bytes) -> None:
    base = chunk([simple(encode_data_body(b"abc"))], 1, 0)
    for data in (noise, base[:48] + noise, base + noise, base[: len(noise) % (len(base) + 1)]):
        with contextlib.suppress(StreamwireError):
            decode_chunk(data, stream="s")
