"""Osiris chunks: the payload of a Deliver frame.

Layout (big-endian, docs/protocol/rabbitmq-streams.md §2)::

    magic/version u8 (0x50) | chunk type u8 | entries u16 | records u32 | timestamp i64 (ms)
    | epoch u64 | chunk id u64 | crc u32 | data length u32 | trailer length u32
    | bloom size u8 | reserved 3 | entries (data length bytes)

The CRC is zlib CRC-32 over the entries only. Bloom filter and trailer bytes are never sent
with the default chunk selector; anything after ``data length`` is ignored. An entry is a
simple entry (``0|size:31`` then the message) or a sub-batch (``1|codec:3|0000``, records
u16, uncompressed u32, size u32, body of ``records × (size u32, message)``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from streamwire.codec import compression
from streamwire.codec._structs import BytesLike
from streamwire.codec.checksums import crc32
from streamwire.errors import ChecksumMismatchError, DecodeError

__all__ = (
    "CHUNK_HEADER_SIZE",
    "MAX_UNCOMPRESSED_SUB_BATCH",
    "SUB_BATCH_HEADER",
    "ChunkHeader",
    "Compression",
    "decompress",
    "expand_sub_batch",
    "parse_chunk",
    "parse_chunk_header",
)

_HEADER: Final = struct.Struct(">BBHIqQQIIIB3x")
CHUNK_HEADER_SIZE: Final = _HEADER.size  # 48
_SIZE: Final = struct.Struct(">I")
SUB_BATCH_HEADER: Final = struct.Struct(">BHII")
"""A sub-batch entry's header: flags (top bit set, codec in bits 4-6), records,
uncompressed size, stored size; its records follow, each a 32-bit size and the record."""
MAX_UNCOMPRESSED_SUB_BATCH: Final = 64 * 1024 * 1024  # the broker's own limit
_MAGIC: Final = 0x50


class Compression:
    """Sub-batch compression codes."""

    NONE: Final = 0
    GZIP: Final = 1
    SNAPPY: Final = 2
    LZ4: Final = 3
    ZSTD: Final = 4


@dataclass(frozen=True, slots=True)
class ChunkHeader:
    chunk_type: int
    num_entries: int
    num_records: int
    timestamp: int
    """Milliseconds since the epoch; every record of the chunk shares it."""
    epoch: int
    chunk_id: int
    """Offset of the chunk's first record."""
    crc: int
    data_length: int
    trailer_length: int
    bloom_size: int


def parse_chunk_header(chunk: BytesLike) -> ChunkHeader:
    if len(chunk) < CHUNK_HEADER_SIZE:
        raise DecodeError(f"chunk header: {len(chunk)} bytes", 0, frame="Deliver")
    magic, ctype, entries, records, ts, epoch, cid, crc, dlen, tlen, bloom = _HEADER.unpack_from(
        chunk
    )
    if magic != _MAGIC:
        raise DecodeError(f"chunk magic/version {magic:#04x}", 0, frame="Deliver")
    if CHUNK_HEADER_SIZE + dlen > len(chunk):
        raise DecodeError(
            f"chunk data length {dlen} (only {len(chunk) - CHUNK_HEADER_SIZE} bytes)",
            36,
            frame="Deliver",
        )
    return ChunkHeader(ctype, entries, records, ts, epoch, cid, crc, dlen, tlen, bloom)


_CODEC_NAMES: Final = ("none", "gzip", "snappy", "lz4", "zstd")


def decompress(codec: int, data: BytesLike, uncompressed: int) -> bytes:
    """Decompress a sub-batch body, never producing more than ``uncompressed`` bytes."""
    if uncompressed > MAX_UNCOMPRESSED_SUB_BATCH:
        raise DecodeError(f"sub-batch of {uncompressed} uncompressed bytes", frame="Deliver")
    if not 0 <= codec < len(_CODEC_NAMES):
        raise DecodeError(f"sub-batch compression {codec}", frame="Deliver")
    try:
        return compression.decompress(_CODEC_NAMES[codec], data, uncompressed)
    except DecodeError as exc:
        raise DecodeError(f"sub-batch: {exc.what}", frame="Deliver") from None


def expand_sub_batch(
    data: memoryview, pos: int, end: int, out: list[memoryview]
) -> tuple[int, int]:
    """Append the records of the sub-batch entry at ``pos`` of ``data`` (which ends at
    ``end``) to ``out``; returns (position after the entry, number of records)."""
    if pos + SUB_BATCH_HEADER.size > end:
        raise DecodeError("sub-batch header", pos, frame="Deliver")
    flags, records, uncompressed, size = SUB_BATCH_HEADER.unpack_from(data, pos)
    body_start = pos + SUB_BATCH_HEADER.size
    if body_start + size > end:
        raise DecodeError(f"sub-batch body of {size} bytes", pos, frame="Deliver")
    codec = (flags >> 4) & 0x7
    body = data[body_start : body_start + size]
    if codec != Compression.NONE:
        body = memoryview(decompress(codec, body, uncompressed))
    inner, inner_end = 0, len(body)
    for _ in range(records):
        if inner + 4 > inner_end:
            raise DecodeError("sub-batch record size", pos, frame="Deliver")
        (n,) = _SIZE.unpack_from(body, inner)
        inner += 4
        if inner + n > inner_end:
            raise DecodeError(f"sub-batch record of {n} bytes", pos, frame="Deliver")
        out.append(body[inner : inner + n])
        inner += n
    if inner != inner_end:
        raise DecodeError("sub-batch has trailing bytes", pos, frame="Deliver")
    return body_start + size, records


def parse_chunk(
    chunk: BytesLike, *, verify_crc: bool = True
) -> tuple[ChunkHeader, list[memoryview]]:
    """The chunk header and its records in offset order (sub-batches expanded).

    Record ``i`` has offset ``header.chunk_id + i``. Raises :class:`DecodeError` for a
    malformed chunk and :class:`ChecksumMismatchError` when the CRC does not match.
    """
    view = chunk if isinstance(chunk, memoryview) else memoryview(chunk)
    header = parse_chunk_header(view)
    start = CHUNK_HEADER_SIZE
    end = start + header.data_length
    if verify_crc:
        actual = crc32(view[start:end])
        if actual != header.crc:
            raise ChecksumMismatchError("chunk CRC-32", header.crc, actual)
    records: list[memoryview] = []
    append = records.append
    unpack = _SIZE.unpack_from
    pos = start
    while pos < end:
        if pos + 4 > end:
            raise DecodeError("entry size", pos, frame="Deliver")
        (size,) = unpack(view, pos)
        if size & 0x80000000:
            pos, _ = expand_sub_batch(view, pos, end, records)
            continue
        pos += 4
        if pos + size > end:
            raise DecodeError(f"entry of {size} bytes", pos - 4, frame="Deliver")
        append(view[pos : pos + size])
        pos += size
    if len(records) != header.num_records:
        raise DecodeError(
            f"chunk announces {header.num_records} records, holds {len(records)}",
            4,
            frame="Deliver",
        )
    return header, records
