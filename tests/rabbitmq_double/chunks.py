"""Osiris chunks as the broker writes them (docs/protocol/rabbitmq-streams.md §2): the
server-side counterpart of :mod:`streamwire.rabbitmq.protocol.chunk`, which only parses.

Entries are stored exactly as a Publish frame carried them (a simple entry's size prefix
included, or a whole sub-batch), so a chunk is a header in front of their concatenation.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from streamwire.codec.checksums import crc32
from streamwire.rabbitmq.protocol.chunk import CHUNK_HEADER_SIZE

__all__ = ("encode_chunk", "entry_records", "simple_entry")

_HEADER: Final = struct.Struct(">BBHIqQQIIIB3x")
_SUB_BATCH_RECORDS: Final = struct.Struct(">H")
_SIZE: Final = struct.Struct(">I")
_MAGIC: Final = 0x50
assert _HEADER.size == CHUNK_HEADER_SIZE


def simple_entry(message: bytes) -> bytes:
    """A simple entry: ``0|size:31`` then the message."""
    return _SIZE.pack(len(message)) + message


def entry_records(entry: bytes) -> int:
    """How many records (offsets) an entry takes: 1, or a sub-batch's record count."""
    if entry[0] & 0x80:
        (records,) = _SUB_BATCH_RECORDS.unpack_from(entry, 1)
        return int(records)
    return 1


def encode_chunk(
    chunk_id: int, entries: Sequence[bytes], *, timestamp: int, epoch: int = 1
) -> bytes:
    """A chunk of user entries (type 0) whose first record has offset ``chunk_id``;
    ``timestamp`` in milliseconds."""
    data = b"".join(entries)
    records = sum(entry_records(e) for e in entries)
    header = _HEADER.pack(
        _MAGIC, 0, len(entries), records, timestamp, epoch, chunk_id, crc32(data), len(data), 0, 0
    )
    return header + data
