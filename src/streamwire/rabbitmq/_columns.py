"""An Osiris chunk's plain records → :class:`~streamwire.codec.columns.Columns`.

The bulk counterpart of :func:`streamwire.rabbitmq._amqp_map.decode_chunk` for columnar
readers: bodies and offsets go into two buffers instead of a ``Message`` each. Only chunks
whose records are all plain bodies (one AMQP data section, or anything when not decoding
AMQP; in simple entries or uncompressed sub-batch entries) qualify; for any other chunk
:func:`chunk_columns` returns ``None`` and the caller
decodes it message by message. The native core walks the entries when it is loaded; the
pure-Python walk gives the same buffers and the same errors
(``tests/property/test_rabbitmq_columns.py``).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from typing import Final

from streamwire._native import core as _native
from streamwire.codec.amqp import decode_data_body
from streamwire.codec.checksums import crc32
from streamwire.codec.columns import Columns
from streamwire.errors import ChecksumMismatchError, DecodeError
from streamwire.rabbitmq._amqp_map import chunk_buffer
from streamwire.rabbitmq.protocol.chunk import (
    CHUNK_HEADER_SIZE,
    SUB_BATCH_HEADER,
    Compression,
    parse_chunk_header,
)

__all__ = ("chunk_columns", "chunk_columns_py")

_SIZE: Final = struct.Struct(">I")
_I32: Final = (1 << 31) - 1
_I64: Final = (1 << 63) - 1

#: (value ends, values, offsets), or None when a record is not a plain body
Buffers = tuple[bytes, bytes, bytes] | None


def chunk_columns(
    chunk: bytes | memoryview, *, skip_below: int = 0, verify_crc: bool = True, amqp: bool = True
) -> Columns | None:
    """The records of ``chunk`` at or after offset ``skip_below`` as columns, or ``None`` when
    some record is not a plain body (or the chunk is beyond int32 value offsets / int64
    offsets). Raises ``DecodeError`` / ``ChecksumMismatchError`` as ``decode_chunk`` does;
    after ``None`` the chunk's CRC, if asked for, was checked already."""
    header = parse_chunk_header(chunk)
    if header.data_length > _I32 or header.chunk_id + header.num_records > _I64:
        return None
    buf, base = chunk_buffer(chunk)
    start = base + CHUNK_HEADER_SIZE
    end = start + header.data_length
    crc = header.crc if verify_crc else None
    walk = getattr(_native, "rmq_chunk_columns", None)
    if walk is None or not -_I64 <= skip_below <= _I64:
        walk = chunk_columns_py
    found: Buffers = walk(
        buf, start, end, header.chunk_id, header.num_records, skip_below, amqp, crc
    )
    if found is None:
        return None
    ends, values, offsets = found
    return Columns(len(offsets) // 8, ends, values, offsets, header.timestamp * 1000)


def chunk_columns_py(
    chunk: bytes,
    start: int,
    end: int,
    first_offset: int,
    num_records: int,
    skip_below: int,
    amqp: bool,
    crc: int | None,
) -> Buffers:
    """The pure-Python walk of ``chunk[start:end]`` (the native core's
    ``rmq_chunk_columns``): ``(value ends, values, offsets)`` or ``None``."""
    if start > end or end > len(chunk) or end - start > _I32:
        raise ValueError("entries outside the buffer")
    if crc is not None:
        actual = crc32(memoryview(chunk)[start:end])
        if actual != crc:
            raise ChecksumMismatchError("chunk CRC-32", crc, actual)
    values: list[bytes] = []
    ends = array("i", [0])
    offsets = array("q")
    total = 0
    offset = first_offset
    unpack = _SIZE.unpack_from
    view = memoryview(chunk)
    pos = start
    records: Sequence[tuple[int, int]]
    while pos < end:
        if pos + 4 > end:
            raise DecodeError("entry size", pos, frame="Deliver")
        (size,) = unpack(chunk, pos)
        if size & 0x80000000:
            found = _sub_batch_records(chunk, pos, end)
            if found is None:
                return None  # compressed or malformed: decode_chunk decodes or refuses it
            pos, records = found
        else:
            pos += 4
            stop = pos + size
            if stop > end:
                raise DecodeError(f"entry of {size} bytes", pos - 4, frame="Deliver")
            records = ((pos, stop),)
            pos = stop
        for first, stop in records:
            if offset >= skip_below:
                record = view[first:stop]
                value = decode_data_body(record) if amqp else bytes(record)
                if value is None:
                    return None
                values.append(value)
                total += len(value)
                ends.append(total)
                offsets.append(offset)
            offset += 1
    if offset - first_offset != num_records:
        raise DecodeError(
            f"chunk announces {num_records} records, holds {offset - first_offset}",
            4,
            frame="Deliver",
        )
    return ends.tobytes(), b"".join(values), offsets.tobytes()


def _sub_batch_records(
    chunk: bytes, pos: int, end: int
) -> tuple[int, list[tuple[int, int]]] | None:
    """Where the sub-batch entry at ``pos`` ends and where its records are, or ``None``
    when it is compressed or malformed (``expand_sub_batch`` raises on what is malformed)."""
    if pos + SUB_BATCH_HEADER.size > end:
        return None
    flags, count, _, size = SUB_BATCH_HEADER.unpack_from(chunk, pos)
    inner = pos + SUB_BATCH_HEADER.size
    stop = inner + size
    if stop > end or (flags >> 4) & 0x7 != Compression.NONE:
        return None
    records: list[tuple[int, int]] = []
    for _ in range(count):
        if inner + 4 > stop:
            return None
        (n,) = _SIZE.unpack_from(chunk, inner)
        inner += 4
        if inner + n > stop:
            return None
        records.append((inner, inner + n))
        inner += n
    return (stop, records) if inner == stop else None
