"""An Osiris chunk's plain records → :class:`~streamwire.codec.columns.Columns`.

The bulk counterpart of :func:`streamwire.rabbitmq._amqp_map.decode_chunk` for columnar
readers: bodies and offsets go into two buffers instead of a ``Message`` each. Only chunks
whose records are all plain bodies (one AMQP data section, or anything when not decoding
AMQP) qualify; for any other chunk :func:`chunk_columns` returns ``None`` and the caller
decodes it message by message. The native core walks the entries when it is loaded; the
pure-Python walk gives the same buffers and the same errors
(``tests/property/test_rabbitmq_columns.py``).
"""

from __future__ import annotations

import struct
from array import array
from typing import Final

from streamwire._native import core as _native
from streamwire.codec.checksums import crc32
from streamwire.codec.columns import Columns
from streamwire.errors import ChecksumMismatchError, DecodeError
from streamwire.rabbitmq._amqp_map import chunk_buffer
from streamwire.rabbitmq.protocol.chunk import CHUNK_HEADER_SIZE, parse_chunk_header

__all__ = ("chunk_columns", "chunk_columns_py")

_DATA8: Final = b"\x00\x53\x75\xa0"
_DATA32: Final = b"\x00\x53\x75\xb0"  # a data section of over 255 bytes
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
    pos = start
    while pos < end:
        if pos + 4 > end:
            raise DecodeError("entry size", pos, frame="Deliver")
        (size,) = unpack(chunk, pos)
        if size & 0x80000000:
            return None  # a sub-batch
        pos += 4
        stop = pos + size
        if stop > end:
            raise DecodeError(f"entry of {size} bytes", pos - 4, frame="Deliver")
        if offset >= skip_below:
            if not amqp:
                value = chunk[pos:stop]
            elif size >= 5 and chunk[pos + 4] == size - 5 and chunk[pos : pos + 4] == _DATA8:
                value = chunk[pos + 5 : stop]
            elif (
                size >= 8
                and chunk[pos : pos + 4] == _DATA32
                and unpack(chunk, pos + 4)[0] == size - 8
            ):
                value = chunk[pos + 8 : stop]
            else:
                return None
            values.append(value)
            total += len(value)
            ends.append(total)
            offsets.append(offset)
        offset += 1
        pos = stop
    if offset - first_offset != num_records:
        raise DecodeError(
            f"chunk announces {num_records} records, holds {offset - first_offset}",
            4,
            frame="Deliver",
        )
    return ends.tobytes(), b"".join(values), offsets.tobytes()
