"""Osiris chunks (the payload of Deliver): header, CRC-32, simple and sub-batch entries.

The captured chunks come from the Deliver frames of docs/protocol/rabbitmq-streams.md §1.8;
everything else is built here with ``struct``, ``zlib.crc32`` and stdlib ``gzip`` following
the §2 layout of that page, not with streamwire.
"""

from __future__ import annotations

import gzip
import struct
import tracemalloc
import zlib

import pytest

from streamwire.errors import ChecksumMismatchError, DecodeError, RemoteProtocolError
from streamwire.rabbitmq.protocol.chunk import (
    CHUNK_HEADER_SIZE,
    MAX_UNCOMPRESSED_SUB_BATCH,
    ChunkHeader,
    decompress,
    parse_chunk,
    parse_chunk_header,
)
from streamwire.rabbitmq.protocol.frames import Deliver, decode_frame
from tests.unit.rabbitmq.support import CHUNK_V1, CHUNK_V2, M0, M1, body

HEADER = struct.Struct(">BBHIqQQIIIB3x")
MIB = 1024 * 1024


def simple(message: bytes) -> bytes:
    return struct.pack(">I", len(message)) + message


def sub_batch(
    messages: list[bytes],
    *,
    codec: int = 0,
    records: int | None = None,
    uncompressed: int | None = None,
    compressed_body: bytes | None = None,
) -> bytes:
    """A sub-batch entry (docs/protocol/rabbitmq-streams.md §2.3): ``1|codec:3|0000``, records
    u16, uncompressed u32, size u32."""
    raw = b"".join(simple(m) for m in messages)
    if compressed_body is not None:
        stored = compressed_body
    elif codec == 1:
        stored = gzip.compress(raw)
    else:
        stored = raw
    return (
        struct.pack(
            ">BHII",
            0x80 | (codec << 4),
            len(messages) if records is None else records,
            len(raw) if uncompressed is None else uncompressed,
            len(stored),
        )
        + stored
    )


def build_chunk(
    entries: bytes,
    *,
    num_entries: int = 1,
    num_records: int = 1,
    chunk_id: int = 0,
    timestamp: int = 1_700_000_000_000,
    magic: int = 0x50,
    crc: int | None = None,
    data_length: int | None = None,
    trailer: int = 0,
    bloom: int = 0,
) -> bytes:
    header = HEADER.pack(
        magic,
        0,
        num_entries,
        num_records,
        timestamp,
        1,
        chunk_id,
        zlib.crc32(entries) if crc is None else crc,
        len(entries) if data_length is None else data_length,
        trailer,
        bloom,
    )
    return header + entries


# --- the captured chunks -------------------------------------------------------------------------


def test_captured_chunks_are_what_deliver_carries() -> None:
    v1 = decode_frame(body("deliver-v1"))
    v2 = decode_frame(body("deliver-v2"))
    assert isinstance(v1, Deliver)
    assert isinstance(v2, Deliver)
    assert bytes(v1.chunk) == CHUNK_V1
    assert bytes(v2.chunk) == CHUNK_V2
    assert v1.committed_chunk_id is None
    assert v2.committed_chunk_id == 0


@pytest.mark.parametrize(
    ("chunk", "timestamp"),
    [
        pytest.param(CHUNK_V1, 0x000001A20128289F, id="deliver-v1"),
        pytest.param(CHUNK_V2, 0x000001A2012915AD, id="deliver-v2"),
    ],
)
def test_captured_chunk(chunk: bytes, timestamp: int) -> None:
    header, records = parse_chunk(chunk)
    assert header == ChunkHeader(
        chunk_type=0,
        num_entries=2,
        num_records=2,
        timestamp=timestamp,
        epoch=1,
        chunk_id=0,
        crc=0x5AF0B141,
        data_length=22,
        trailer_length=0,
        bloom_size=0,
    )
    assert [bytes(r) for r in records] == [M0, M1]
    assert parse_chunk_header(chunk) == header


def test_captured_crc_is_zlib_crc32_of_the_data_section() -> None:
    assert zlib.crc32(CHUNK_V1[CHUNK_HEADER_SIZE:]) == 0x5AF0B141
    assert CHUNK_HEADER_SIZE == 48


def test_records_are_zero_copy_views_of_the_chunk() -> None:
    _, records = parse_chunk(CHUNK_V1)
    assert all(isinstance(r, memoryview) for r in records)
    assert records[0].obj is CHUNK_V1


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_parse_chunk_accepts_any_buffer(
    kind: type[bytes] | type[bytearray] | type[memoryview],
) -> None:
    _, records = parse_chunk(kind(CHUNK_V1))
    assert [bytes(r) for r in records] == [M0, M1]


def test_parse_chunk_of_a_decoded_deliver() -> None:
    frame = decode_frame(body("deliver-v2"))
    assert isinstance(frame, Deliver)
    assert isinstance(frame.chunk, memoryview)  # a view of the frame: no copy
    _, records = parse_chunk(frame.chunk)
    assert [bytes(r) for r in records] == [M0, M1]


# --- CRC -----------------------------------------------------------------------------------------


def test_crc_mismatch_in_the_header() -> None:
    bad = bytearray(CHUNK_V1)
    bad[32:36] = (0x5AF0B142).to_bytes(4, "big")
    with pytest.raises(ChecksumMismatchError) as info:
        parse_chunk(bytes(bad))
    assert info.value.expected == 0x5AF0B142
    assert info.value.actual == 0x5AF0B141
    assert isinstance(info.value, RemoteProtocolError)


def test_crc_mismatch_in_the_data() -> None:
    bad = bytearray(CHUNK_V1)
    bad[-1] ^= 0x01  # "m1" becomes "m0"
    with pytest.raises(ChecksumMismatchError):
        parse_chunk(bytes(bad))
    _, records = parse_chunk(bytes(bad), verify_crc=False)
    assert [bytes(r) for r in records] == [M0, M0]


def test_verify_crc_false_accepts_a_wrong_crc() -> None:
    bad = bytearray(CHUNK_V1)
    bad[32:36] = b"\0\0\0\0"
    header, records = parse_chunk(bytes(bad), verify_crc=False)
    assert header.crc == 0
    assert [bytes(r) for r in records] == [M0, M1]


def test_crc_is_not_crc32c() -> None:
    import crc32c

    data = CHUNK_V1[CHUNK_HEADER_SIZE:]
    chunk = build_chunk(data, num_entries=2, num_records=2, crc=crc32c.crc32c(data))
    with pytest.raises(ChecksumMismatchError):
        parse_chunk(chunk)


# --- entries -------------------------------------------------------------------------------------


def test_simple_entries_and_chunk_id() -> None:
    messages = [b"", b"a", b"\x00" * 300, "ß".encode()]
    chunk = build_chunk(
        b"".join(simple(m) for m in messages), num_entries=4, num_records=4, chunk_id=1000
    )
    header, records = parse_chunk(chunk)
    assert header.chunk_id == 1000
    assert [bytes(r) for r in records] == messages


def test_empty_chunk() -> None:
    header, records = parse_chunk(build_chunk(b"", num_entries=0, num_records=0))
    assert header.data_length == 0
    assert records == []


def test_uncompressed_sub_batch_matches_the_verified_first_bytes() -> None:
    # docs/protocol/rabbitmq-streams.md §2.3 "Verified first bytes: uncompressed
    # 80 0003 0000002a 0000002a ..."
    messages = [b"0123456789", b"abcdefghij", b"ABCDEFGHIJ"]
    entry = sub_batch(messages)
    assert entry[:11] == bytes.fromhex("80 0003 0000002a 0000002a".replace(" ", ""))
    header, records = parse_chunk(build_chunk(entry, num_entries=1, num_records=3))
    assert header.num_entries == 1
    assert [bytes(r) for r in records] == messages


def test_gzip_sub_batch_matches_the_verified_first_bytes() -> None:
    # docs/protocol/rabbitmq-streams.md §2.3 "gzip 90 0002 0000001a 00000025 1f8b08..." (the
    # stored size depends on the gzip header, so only flags, records and uncompressed size are
    # compared).
    messages = [b"message-0", b"message-1"]
    entry = sub_batch(messages, codec=1)
    assert entry[:7] == bytes.fromhex("9000020000001a")
    assert entry[11:14] == b"\x1f\x8b\x08"
    _, records = parse_chunk(build_chunk(entry, num_entries=1, num_records=2))
    assert [bytes(r) for r in records] == messages


def test_mixed_entries_expand_in_offset_order() -> None:
    entries = (
        simple(b"s0")
        + sub_batch([b"u0", b"u1", b"u2"])
        + simple(b"s1")
        + sub_batch([b"g%d" % i for i in range(100)], codec=1)
        + sub_batch([b""])
    )
    header, records = parse_chunk(build_chunk(entries, num_entries=5, num_records=106))
    expected = [b"s0", b"u0", b"u1", b"u2", b"s1", *(b"g%d" % i for i in range(100)), b""]
    assert [bytes(r) for r in records] == expected
    assert header.num_records == len(records) == 106


def test_bytes_after_data_length_are_ignored() -> None:
    # Trailer and Bloom filter bytes are not sent with the default selector; if something does
    # follow the data section (chunk_selector=all), it is ignored.
    trailing = b"\xff" * 19
    header, records = parse_chunk(CHUNK_V1 + trailing)
    assert header.data_length == 22
    assert [bytes(r) for r in records] == [M0, M1]
    chunk = build_chunk(simple(b"x"), trailer=19, bloom=16) + trailing
    header, records = parse_chunk(chunk)
    assert (header.trailer_length, header.bloom_size) == (19, 16)
    assert [bytes(r) for r in records] == [b"x"]


# --- malformed chunks ----------------------------------------------------------------------------


def test_num_records_mismatch() -> None:
    with pytest.raises(DecodeError, match="announces 3 records, holds 2"):
        parse_chunk(build_chunk(simple(b"a") + simple(b"b"), num_entries=2, num_records=3))
    with pytest.raises(DecodeError, match="announces 1 records, holds 3"):
        parse_chunk(build_chunk(sub_batch([b"a", b"b", b"c"]), num_records=1))


def test_truncated_simple_entry() -> None:
    entries = simple(b"hello")[:-1]  # size says 5, only 4 follow; CRC matches what is there
    with pytest.raises(DecodeError, match="entry of 5 bytes"):
        parse_chunk(build_chunk(entries))


def test_truncated_entry_size() -> None:
    with pytest.raises(DecodeError, match="entry size"):
        parse_chunk(build_chunk(simple(b"a") + b"\x00\x00", num_records=1))


def test_data_length_cutting_an_entry() -> None:
    entries = simple(b"a") + simple(b"bc")
    chunk = build_chunk(entries[:-1], num_records=2) + entries[-1:]
    with pytest.raises(DecodeError):
        parse_chunk(chunk)


def test_data_length_beyond_the_buffer() -> None:
    chunk = build_chunk(simple(b"abc"), data_length=100)
    with pytest.raises(DecodeError, match="data length 100") as info:
        parse_chunk(chunk)
    assert info.value.offset == 36
    with pytest.raises(DecodeError):
        parse_chunk(CHUNK_V1[:-1])
    with pytest.raises(DecodeError):
        parse_chunk_header(CHUNK_V1[:-1])


@pytest.mark.parametrize("size", [0, 1, 47])
def test_short_header(size: int) -> None:
    with pytest.raises(DecodeError, match="chunk header"):
        parse_chunk(CHUNK_V1[:size])


@pytest.mark.parametrize("magic", [0x00, 0x40, 0x51, 0x60, 0xFF])
def test_bad_magic(magic: int) -> None:
    with pytest.raises(DecodeError, match="magic"):
        parse_chunk(build_chunk(simple(b"a"), magic=magic))


def test_truncated_sub_batch_header() -> None:
    entry = sub_batch([b"a"])[:8]
    with pytest.raises(DecodeError, match="sub-batch header"):
        parse_chunk(build_chunk(entry))


def test_sub_batch_body_beyond_data_length() -> None:
    entry = sub_batch([b"abc"])
    with pytest.raises(DecodeError, match="sub-batch body"):
        parse_chunk(build_chunk(entry[:-1]))


def test_sub_batch_with_more_records_than_its_body_holds() -> None:
    with pytest.raises(DecodeError, match="sub-batch record size"):
        parse_chunk(build_chunk(sub_batch([b"a", b"b"], records=3), num_records=3))


def test_sub_batch_record_overrunning_its_body() -> None:
    body_ = struct.pack(">I", 10) + b"abc"
    entry = struct.pack(">BHII", 0x80, 1, len(body_), len(body_)) + body_
    with pytest.raises(DecodeError, match="sub-batch record of 10 bytes"):
        parse_chunk(build_chunk(entry))


def test_sub_batch_with_trailing_bytes() -> None:
    with pytest.raises(DecodeError, match="trailing"):
        parse_chunk(build_chunk(sub_batch([b"a", b"b"], records=1), num_records=1))


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec(codec: int) -> None:
    # 5-7 are not codecs at all (the broker refuses them on publish).
    entry = sub_batch([b"a"], codec=codec, compressed_body=b"\x00" * 8)
    with pytest.raises(DecodeError, match=f"compression {codec}"):
        parse_chunk(build_chunk(entry))


@pytest.mark.parametrize(("codec", "name"), [(2, "snappy"), (3, "lz4"), (4, "zstd")])
def test_corrupt_bodies_of_every_codec(codec: int, name: str) -> None:
    entry = sub_batch([b"a"], codec=codec, compressed_body=b"\x00" * 8)
    with pytest.raises(DecodeError, match=name):
        parse_chunk(build_chunk(entry))


@pytest.mark.parametrize(("codec", "name"), [(2, "snappy"), (3, "lz4"), (4, "zstd")])
def test_sub_batches_of_every_codec(codec: int, name: str) -> None:
    from streamwire.codec.compression import compress

    records = [b"alpha", b"", b"gamma" * 50]
    body = b"".join(simple(r) for r in records)
    entry = sub_batch(records, codec=codec, compressed_body=compress(name, body))
    _, got = parse_chunk(build_chunk(entry, num_records=3))
    assert [bytes(r) for r in got] == records


def test_corrupt_gzip_body() -> None:
    entry = sub_batch([b"a"], codec=1, compressed_body=b"\x1f\x8b\x08" + b"\x00" * 20)
    with pytest.raises(DecodeError, match="gzip"):
        parse_chunk(build_chunk(entry))


def test_truncated_gzip_body() -> None:
    good = gzip.compress(simple(b"hello world" * 10))
    entry = sub_batch([b"hello world" * 10], codec=1, compressed_body=good[:-12])
    with pytest.raises(DecodeError, match="gzip"):
        parse_chunk(build_chunk(entry))


# --- decompression bomb guard --------------------------------------------------------------------


def test_uncompressed_size_above_64_mib_is_refused_without_decompressing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_decompression(*args: object, **kwargs: object) -> None:
        raise AssertionError("decompression must not start")

    monkeypatch.setattr(zlib, "decompressobj", no_decompression)  # chunk.py calls zlib.…
    entry = sub_batch(
        [b"a"],
        codec=1,
        uncompressed=MAX_UNCOMPRESSED_SUB_BATCH + 1,
        compressed_body=gzip.compress(b"\x00\x00\x00\x01a"),
    )
    with pytest.raises(DecodeError, match=f"{MAX_UNCOMPRESSED_SUB_BATCH + 1} uncompressed"):
        parse_chunk(build_chunk(entry))
    with pytest.raises(DecodeError):
        decompress(1, b"", 0xFFFFFFFF)


def test_limit_is_the_brokers_64_mib() -> None:
    assert MAX_UNCOMPRESSED_SUB_BATCH == 64 * MIB


@pytest.mark.parametrize("claimed", [0, 10, 999, 1001, 5000])
def test_lying_uncompressed_size_is_refused(claimed: int) -> None:
    raw = simple(b"x" * 996)  # 1000 bytes
    entry = sub_batch([b"x" * 996], codec=1, uncompressed=claimed)
    with pytest.raises(DecodeError, match="does not match"):
        parse_chunk(build_chunk(entry))
    with pytest.raises(DecodeError):
        decompress(1, gzip.compress(raw), claimed)
    assert decompress(1, gzip.compress(raw), len(raw)) == raw


def test_bomb_is_not_expanded_beyond_the_claimed_size() -> None:
    bomb = gzip.compress(bytes(32 * MIB), compresslevel=9)  # ~32 KiB on the wire
    assert len(bomb) < MIB
    entry = sub_batch([b"a"], codec=1, uncompressed=100, compressed_body=bomb)
    chunk = build_chunk(entry)
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError, match="does not match"):
            parse_chunk(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MIB  # nowhere near the 32 MiB the bomb expands to
