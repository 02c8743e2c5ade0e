"""The 0.9 message batch: a 256-byte batch header and 48-byte message frames (notes §6).

``[batch header][frame 1][frame 2]...``, frame = ``[frame header 48][payload][user headers]``.
The producer fills in every checksum (XXH3-64, seed 0): per message over the frame bytes
after its checksum field, per batch over the six header fields followed by the message
checksums. The same layout is used in SendMessages bodies and poll replies; in a poll reply
the server has stamped ``partition_id``, ``base_offset`` and ``base_timestamp``, and a record
may be a slice of a stored batch, so offsets are always ``base_offset + offset_delta``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from streamwire.codec._structs import BytesLike
from streamwire.codec.checksums import xxh3_64
from streamwire.codec.reader import Reader
from streamwire.errors import ChecksumMismatchError, LocalProtocolError
from streamwire.iggy.protocol.constants import U32_MAX

__all__ = (
    "BATCH_HEADER_SIZE",
    "FRAME_HEADER_SIZE",
    "MAX_PAYLOAD_BYTES",
    "BatchHeader",
    "OutgoingMessage",
    "StoredMessage",
    "batch_checksum",
    "decode_batch",
    "decode_batches",
    "encode_batch",
    "encode_record",
    "random_message_id",
    "restamp_batch",
    "verify_messages",
)

BATCH_HEADER_SIZE: Final = 256
FRAME_HEADER_SIZE: Final = 48
MAX_PAYLOAD_BYTES: Final = 64_000_000
"""Payload limit enforced by the SDKs (1 byte .. 64,000,000 bytes)."""

# partition_id, base_offset, base_timestamp, origin_timestamp, batch_length, batch_checksum,
# message_count
_BATCH: Final = struct.Struct("<QQQQQQI")
# the six fields covered by the batch checksum (everything above but the checksum)
_BATCH_SIGNED: Final = struct.Struct("<QQQQQI")
# checksum, id (lo, hi), offset_delta, timestamp_delta, user_headers_length, payload_length,
# reserved
_FRAME: Final = struct.Struct("<QQQIIIIQ")
_U64: Final = struct.Struct("<Q")
_MASK64: Final = (1 << 64) - 1


def random_message_id(randbytes: Callable[[int], bytes] = os.urandom) -> int:
    """A random UUIDv4 read as a little-endian u128, as the SDKs mint for id 0 (§6.4): the
    wire bytes are the UUID's canonical byte order."""
    raw = bytearray(randbytes(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return int.from_bytes(raw, "little")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutgoingMessage:
    """One message to encode. ``id`` must be non-zero (mint one with
    :func:`random_message_id`); ``user_headers`` is an encoded TLV block."""

    id: int
    payload: bytes = field(repr=False)
    origin_timestamp: int
    """Microseconds since the epoch, taken when the message was created."""
    user_headers: bytes = field(default=b"", repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchHeader:
    partition_id: int
    base_offset: int
    base_timestamp: int
    origin_timestamp: int
    batch_length: int
    batch_checksum: int
    message_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    """A message as read from a batch, with absolute offset and timestamps."""

    offset: int
    timestamp: int
    """Broker append time (µs): the batch's base timestamp."""
    origin_timestamp: int
    """Producer time (µs): batch origin + the frame's delta."""
    id: int
    checksum: int
    payload: bytes = field(repr=False)
    user_headers: bytes = field(default=b"", repr=False)
    partition_id: int = 0
    offset_delta: int = 0
    timestamp_delta: int = 0

    def checksum_ok(self) -> bool:
        return self.checksum == _message_checksum(
            self.id, self.offset_delta, self.timestamp_delta, self.payload, self.user_headers
        )


def _message_checksum(
    msg_id: int, offset_delta: int, ts_delta: int, payload: bytes, headers: bytes
) -> int:
    tail = _FRAME.pack(
        0, msg_id & _MASK64, msg_id >> 64, offset_delta, ts_delta, len(headers), len(payload), 0
    )[8:]
    return xxh3_64(b"".join((tail, payload, headers)))


def batch_checksum(header: BatchHeader, checksums: Sequence[int]) -> int:
    """XXH3-64 over the six signed header fields and the message checksums (§6.3)."""
    signed = _BATCH_SIGNED.pack(
        header.partition_id,
        header.base_offset,
        header.base_timestamp,
        header.origin_timestamp,
        header.batch_length,
        header.message_count,
    )
    return xxh3_64(signed + b"".join(_U64.pack(c) for c in checksums))


def encode_batch(messages: Sequence[OutgoingMessage]) -> bytes:
    """Encode messages into one batch with every checksum filled in (producer side:
    partition, base offset and base timestamp are 0)."""
    if not messages:
        raise LocalProtocolError("a batch needs at least one message")
    origin = min(m.origin_timestamp for m in messages)
    frames: list[bytes] = []
    checksums: list[int] = []
    for delta, m in enumerate(messages):
        if not 0 < m.id < 1 << 128:
            raise LocalProtocolError(f"message id {m.id} must be in [1, 2**128)")
        if not 1 <= len(m.payload) <= MAX_PAYLOAD_BYTES:
            raise LocalProtocolError(f"a payload must be 1..{MAX_PAYLOAD_BYTES} bytes")
        ts_delta = m.origin_timestamp - origin
        if ts_delta > U32_MAX:
            raise LocalProtocolError("messages of one batch must span under 2**32 µs")
        head = _FRAME.pack(
            0, m.id & _MASK64, m.id >> 64, delta, ts_delta, len(m.user_headers), len(m.payload), 0
        )
        checksum = xxh3_64(b"".join((head[8:], m.payload, m.user_headers)))
        checksums.append(checksum)
        frames.append(_U64.pack(checksum) + head[8:] + m.payload + m.user_headers)
    length = BATCH_HEADER_SIZE + sum(len(f) for f in frames)
    header = BatchHeader(
        partition_id=0,
        base_offset=0,
        base_timestamp=0,
        origin_timestamp=origin,
        batch_length=length,
        batch_checksum=0,
        message_count=len(messages),
    )
    return _encode_header(header, batch_checksum(header, checksums)) + b"".join(frames)


def _encode_header(header: BatchHeader, checksum: int) -> bytes:
    packed = _BATCH.pack(
        header.partition_id,
        header.base_offset,
        header.base_timestamp,
        header.origin_timestamp,
        header.batch_length,
        checksum,
        header.message_count,
    )
    return packed + bytes(BATCH_HEADER_SIZE - _BATCH.size)


def restamp_batch(
    batch: BytesLike, *, partition_id: int, base_offset: int, base_timestamp: int
) -> bytes:
    """Server side: stamp partition, base offset and append time, and recompute the batch
    checksum (what the server stores and later serves in poll replies)."""
    header, messages = decode_batch(batch)
    return encode_record(
        messages,
        partition_id=partition_id,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        origin_timestamp=header.origin_timestamp,
    )


def encode_record(
    messages: Sequence[StoredMessage],
    *,
    partition_id: int,
    base_offset: int,
    base_timestamp: int,
    origin_timestamp: int,
) -> bytes:
    """Server side: a stored record (or a slice of one) as served in a poll reply. Frames
    keep their deltas and checksums; length, count and batch checksum are recomputed."""
    frames = [
        _FRAME.pack(
            m.checksum,
            m.id & _MASK64,
            m.id >> 64,
            m.offset_delta,
            m.timestamp_delta,
            len(m.user_headers),
            len(m.payload),
            0,
        )
        + m.payload
        + m.user_headers
        for m in messages
    ]
    header = BatchHeader(
        partition_id=partition_id,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        origin_timestamp=origin_timestamp,
        batch_length=BATCH_HEADER_SIZE + sum(len(f) for f in frames),
        batch_checksum=0,
        message_count=len(messages),
    )
    checksum = batch_checksum(header, [m.checksum for m in messages])
    return _encode_header(header, checksum) + b"".join(frames)


def _read_header(r: Reader) -> BatchHeader:
    start = r.pos
    pid, base, base_ts, origin, length, checksum, count = _BATCH.unpack(r.view(_BATCH.size))
    reserved = r.view(BATCH_HEADER_SIZE - _BATCH.size)
    if any(reserved):
        raise r.error("non-zero reserved bytes in a batch header", start + _BATCH.size)
    return BatchHeader(
        partition_id=pid,
        base_offset=base,
        base_timestamp=base_ts,
        origin_timestamp=origin,
        batch_length=length,
        batch_checksum=checksum,
        message_count=count,
    )


def _read_record(r: Reader) -> tuple[BatchHeader, list[StoredMessage]]:
    start = r.pos
    header = _read_header(r)
    if not BATCH_HEADER_SIZE <= header.batch_length <= r.remaining + BATCH_HEADER_SIZE:
        raise r.error(f"batch length {header.batch_length}", start + 32)
    body = r.sub(header.batch_length - BATCH_HEADER_SIZE, "batch frames")
    if header.message_count * FRAME_HEADER_SIZE > body.remaining:
        raise r.error(f"batch of {header.message_count} messages", start + 48)
    messages: list[StoredMessage] = []
    for _ in range(header.message_count):
        pos = body.pos
        (checksum, id_lo, id_hi, o_delta, t_delta, h_len, p_len, reserved) = _FRAME.unpack(
            body.view(_FRAME.size)
        )
        if reserved:
            raise body.error("non-zero reserved bytes in a message frame", pos + 40)
        payload = body.bytes(p_len)
        headers = body.bytes(h_len)
        messages.append(
            StoredMessage(
                offset=header.base_offset + o_delta,
                timestamp=header.base_timestamp,
                origin_timestamp=header.origin_timestamp + t_delta,
                id=id_lo | (id_hi << 64),
                checksum=checksum,
                payload=payload,
                user_headers=headers,
                partition_id=header.partition_id,
                offset_delta=o_delta,
                timestamp_delta=t_delta,
            )
        )
    body.expect_end()
    return header, messages


def decode_batch(
    data: BytesLike, *, verify: bool = False
) -> tuple[BatchHeader, list[StoredMessage]]:
    """Decode exactly one batch (a SendMessages batch section). With ``verify`` every
    message checksum and the batch checksum are checked (:class:`ChecksumMismatchError`)."""
    r = Reader(data, frame="message batch")
    header, messages = _read_record(r)
    r.expect_end()
    if verify:
        verify_messages(messages)
        expected = batch_checksum(header, [m.checksum for m in messages])
        if expected != header.batch_checksum:
            raise ChecksumMismatchError("batch", header.batch_checksum, expected)
    return header, messages


def decode_batches(r: Reader) -> list[StoredMessage]:
    """Walk batch records until the reader's end (a poll reply's tail)."""
    out: list[StoredMessage] = []
    while not r.at_end():
        out.extend(_read_record(r)[1])
    return out


def verify_messages(messages: Sequence[StoredMessage]) -> None:
    """Raise :class:`ChecksumMismatchError` for the first message whose checksum is wrong."""
    for m in messages:
        if not m.checksum_ok():
            actual = _message_checksum(
                m.id, m.offset_delta, m.timestamp_delta, m.payload, m.user_headers
            )
            raise ChecksumMismatchError(f"message at offset {m.offset}", m.checksum, actual)
