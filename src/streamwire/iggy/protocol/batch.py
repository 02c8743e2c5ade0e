"""The 0.9 message batch: a 256-byte batch header and 48-byte message frames.

Layout: docs/protocol/iggy.md §6.

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
from itertools import repeat
from typing import Final, NamedTuple

from streamwire._native import core as _native
from streamwire.codec._structs import BytesLike
from streamwire.codec.checksums import xxh3_64
from streamwire.codec.reader import Reader
from streamwire.errors import ChecksumMismatchError, DecodeError, LocalProtocolError
from streamwire.iggy.protocol.constants import U32_MAX

__all__ = (
    "BATCH_HEADER_SIZE",
    "FRAME_HEADER_SIZE",
    "MAX_PAYLOAD_BYTES",
    "BatchHeader",
    "OutgoingMessage",
    "FrameRef",
    "StoredMessage",
    "batch_checksum",
    "bytes_view",
    "decode_batch",
    "decode_batches",
    "encode_batch",
    "encode_batch_py",
    "encode_runs",
    "encode_runs_py",
    "encode_record",
    "locate_frames",
    "locate_frames_py",
    "message_ids",
    "random_message_id",
    "random_message_id_bytes",
    "random_message_ids",
    "restamp_batch",
    "stored_messages",
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


_VERSION_4: Final = bytes((b & 0x0F) | 0x40 for b in range(256))
_RFC_4122: Final = bytes((b & 0x3F) | 0x80 for b in range(256))


def random_message_id_bytes(count: int, randbytes: Callable[[int], bytes] = os.urandom) -> bytes:
    """``count`` ids as :func:`random_message_id` mints them, from one draw of random bytes,
    as their wire bytes (16 each, little-endian): what :func:`encode_runs` takes."""
    raw = bytearray(randbytes(16 * count))
    raw[6::16] = raw[6::16].translate(_VERSION_4)
    raw[8::16] = raw[8::16].translate(_RFC_4122)
    return bytes(raw)


def message_ids(raw: BytesLike) -> list[int]:
    """The ids in ``raw``, 16 little-endian bytes each (:func:`random_message_id_bytes`)."""
    if len(raw) % 16:
        raise LocalProtocolError(f"message ids take 16 bytes each, not {len(raw)} in all")
    halves = struct.unpack(f"<{len(raw) // 8}Q", raw)
    return [lo | hi << 64 for lo, hi in zip(halves[::2], halves[1::2], strict=True)]


def random_message_ids(count: int, randbytes: Callable[[int], bytes] = os.urandom) -> list[int]:
    """``count`` ids as :func:`random_message_id` mints them, from one draw of random
    bytes."""
    return message_ids(random_message_id_bytes(count, randbytes))


class OutgoingMessage(NamedTuple):
    """One message to encode. ``id`` must be non-zero (mint one with
    :func:`random_message_id`); ``user_headers`` is an encoded TLV block. (A named tuple:
    the producer builds one per message.)"""

    id: int
    payload: bytes
    origin_timestamp: int
    """Microseconds since the epoch, taken when the message was created."""
    user_headers: bytes = b""

    def __repr__(self) -> str:
        return (
            f"OutgoingMessage(id={self.id:#x}, payload=<{len(self.payload)} bytes>,"
            f" origin_timestamp={self.origin_timestamp},"
            f" user_headers=<{len(self.user_headers)} bytes>)"
        )


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
    partition, base offset and base timestamp are 0). The native core does it when loaded
    (:mod:`streamwire._native`); :func:`encode_batch_py` is the same in pure Python."""
    if _native is not None:
        encoded = _native.iggy_encode_batch(messages)
        if encoded is not None:
            return encoded
    return encode_batch_py(messages)


#: A run of plain bodies for :func:`encode_runs`: the bodies, their ids (16 bytes each, as
#: :func:`random_message_id_bytes` makes them) and the run's origin timestamp (µs).
BodyRun = tuple[list[bytes], bytes, int]


def encode_runs(runs: list[BodyRun], room: int = 0) -> bytearray:
    """One batch of plain bodies given in runs: the same bytes as :func:`encode_batch` of
    ``OutgoingMessage(id, body, origin, b"")`` for each body of each run, in order, without
    making those tuples (the producer's ``send_many`` of ``bytes``), after ``room`` zero bytes
    (where a request frame's header goes, so that the batch is never copied again). The
    native core does it when loaded; :func:`encode_runs_py` is the same in pure Python."""
    if _native is not None:
        encoded = _native.iggy_encode_runs(runs, room)
        if encoded is not None:
            return encoded
    return encode_runs_py(runs, room)


def encode_runs_py(runs: list[BodyRun], room: int = 0) -> bytearray:
    """:func:`encode_runs` in pure Python."""
    frames: list[OutgoingMessage] = []
    for bodies, raw, origin in runs:
        ids = message_ids(raw)
        if len(ids) != len(bodies):
            raise LocalProtocolError(f"{len(bodies)} bodies but {len(ids)} ids in a run")
        frames += map(OutgoingMessage, ids, bodies, repeat(origin), repeat(b""))
    out = bytearray(room)
    out += encode_batch_py(frames)
    return out


def encode_batch_py(messages: Sequence[OutgoingMessage]) -> bytes:
    """:func:`encode_batch` in pure Python."""
    if not messages:
        raise LocalProtocolError("a batch needs at least one message")
    origin = min(m.origin_timestamp for m in messages)
    head = FRAME_HEADER_SIZE
    size = BATCH_HEADER_SIZE + head * len(messages)
    size += sum(len(m.payload) + len(m.user_headers) for m in messages)
    out = bytearray(size)
    view = memoryview(out)
    pack_frame, pack_u64 = _FRAME.pack_into, _U64.pack_into
    checksums: list[int] = []
    at = BATCH_HEADER_SIZE
    for delta, (msg_id, payload, origin_ts, headers) in enumerate(messages):
        if not 0 < msg_id < 1 << 128:
            raise LocalProtocolError(f"message id {msg_id} must be in [1, 2**128)")
        p_len = len(payload)
        if not 1 <= p_len <= MAX_PAYLOAD_BYTES:
            raise LocalProtocolError(f"a payload must be 1..{MAX_PAYLOAD_BYTES} bytes")
        ts_delta = origin_ts - origin
        if ts_delta > U32_MAX:
            raise LocalProtocolError("messages of one batch must span under 2**32 µs")
        h_len = len(headers)
        pack_frame(out, at, 0, msg_id & _MASK64, msg_id >> 64, delta, ts_delta, h_len, p_len, 0)
        p_at = at + head
        out[p_at : p_at + p_len] = payload
        end = p_at + p_len + h_len
        if h_len:
            out[p_at + p_len : end] = headers
        checksum = xxh3_64(view[at + 8 : end])
        pack_u64(out, at, checksum)
        checksums.append(checksum)
        at = end
    header = BatchHeader(
        partition_id=0,
        base_offset=0,
        base_timestamp=0,
        origin_timestamp=origin,
        batch_length=size,
        batch_checksum=0,
        message_count=len(messages),
    )
    view.release()
    out[:BATCH_HEADER_SIZE] = _encode_header(header, batch_checksum(header, checksums))
    return bytes(out)


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


FrameRef = tuple[int, int, int, int, int, int, int, int, int, int, int]
"""Where one message frame lies in a buffer of batch records, and its decoded fields:
``(offset, timestamp, origin_timestamp, id, checksum, start, payload_end, end,
partition_id, offset_delta, timestamp_delta)``. The frame is ``buf[start:end]``, its payload
``buf[start + 48:payload_end]``, its user headers ``buf[payload_end:end]``; the checksum
covers ``buf[start + 8:end]``."""


def locate_frames(
    buf: bytes | memoryview,
    start: int = 0,
    end: int | None = None,
    *,
    frame: str = "batch records",
) -> Sequence[FrameRef]:
    """Check the structure of the batch records in ``buf[start:end]`` and locate every
    message frame (no checksum work). Raises :class:`DecodeError` (offsets into ``buf``)
    for a truncated or inconsistent record. ``buf`` is ``bytes`` or a view of ``bytes``
    (:func:`bytes_view`: a poll reply's records are a slice of the received frame, not a
    copy).

    With the native core loaded (:mod:`streamwire._native`) the frames come back as a
    compact index over ``buf`` (a read-only sequence making each tuple on access);
    :func:`locate_frames_py` returns the same tuples as a list."""
    if (
        _native is not None
        and (type(buf) is bytes or bytes_view(buf))
        and type(start) is int
        and 0 <= start < _I62
        and (end is None or (type(end) is int and abs(end) < _I62))
    ):
        return _native.iggy_locate_frames(buf, start, end, frame)
    return locate_frames_py(buf, start, end, frame=frame)


_I62: Final = 1 << 62


def bytes_view(buf: object) -> bool:
    """Whether ``buf`` is a one-dimensional, contiguous byte view of an immutable ``bytes``
    (what the native core takes besides ``bytes``)."""
    return (
        type(buf) is memoryview
        and type(buf.obj) is bytes
        and buf.c_contiguous
        and buf.ndim == 1
        and buf.format == "B"
    )


def locate_frames_py(
    buf: bytes | memoryview,
    start: int = 0,
    end: int | None = None,
    *,
    frame: str = "batch records",
) -> list[FrameRef]:
    """:func:`locate_frames` in pure Python: one tuple per frame."""
    stop_all = len(buf) if end is None else min(end, len(buf))
    out: list[FrameRef] = []
    append = out.append
    unpack_frame = _FRAME.unpack_from
    head = FRAME_HEADER_SIZE
    pos = start
    while pos < stop_all:
        if stop_all - pos < BATCH_HEADER_SIZE:
            raise DecodeError(
                f"batch header: need 256 bytes, {stop_all - pos} left", pos, frame=frame
            )
        pid, base, base_ts, origin, length, _, count = _BATCH.unpack_from(buf, pos)
        if any(buf[pos + _BATCH.size : pos + BATCH_HEADER_SIZE]):
            raise DecodeError("non-zero reserved bytes in a batch header", pos + 52, frame=frame)
        if not BATCH_HEADER_SIZE <= length <= stop_all - pos:
            raise DecodeError(f"batch length {length}", pos + 32, frame=frame)
        stop = pos + length
        if count * head > length - BATCH_HEADER_SIZE:
            raise DecodeError(f"batch of {count} messages", pos + 48, frame=frame)
        at = pos + BATCH_HEADER_SIZE
        for _ in range(count):
            if stop - at < head:
                raise DecodeError(
                    f"message frame: need 48 bytes, {stop - at} left", at, frame=frame
                )
            checksum, lo, hi, o_delta, t_delta, h_len, p_len, reserved = unpack_frame(buf, at)
            if reserved:
                raise DecodeError(
                    "non-zero reserved bytes in a message frame", at + 40, frame=frame
                )
            p_end = at + head + p_len
            f_end = p_end + h_len
            if f_end > stop:
                raise DecodeError(
                    f"message frame of {head + p_len + h_len} bytes, {stop - at} left",
                    at,
                    frame=frame,
                )
            append(
                (
                    base + o_delta,
                    base_ts,
                    origin + t_delta,
                    lo | hi << 64,
                    checksum,
                    at,
                    p_end,
                    f_end,
                    pid,
                    o_delta,
                    t_delta,
                )
            )
            at = f_end
        if at != stop:
            raise DecodeError(f"{stop - at} trailing bytes", at, frame=frame)
        pos = stop
    return out


def stored_messages(buf: bytes | memoryview, refs: Sequence[FrameRef]) -> list[StoredMessage]:
    """The located frames as :class:`StoredMessage` objects."""
    head = FRAME_HEADER_SIZE
    out: list[StoredMessage] = []
    for offset, timestamp, origin, msg_id, checksum, at, p_end, f_end, pid, od, td in refs:
        payload, headers = bytes(buf[at + head : p_end]), bytes(buf[p_end:f_end])
        out.append(
            StoredMessage(
                offset=offset,
                timestamp=timestamp,
                origin_timestamp=origin,
                id=msg_id,
                checksum=checksum,
                payload=payload,
                user_headers=headers,
                partition_id=pid,
                offset_delta=od,
                timestamp_delta=td,
            )
        )
    return out


def decode_batch(
    data: BytesLike, *, verify: bool = False
) -> tuple[BatchHeader, list[StoredMessage]]:
    """Decode exactly one batch (a SendMessages batch section). With ``verify`` every
    message checksum and the batch checksum are checked (:class:`ChecksumMismatchError`)."""
    buf = data if isinstance(data, bytes) else bytes(data)
    header = _read_header(Reader(buf, frame="message batch"))
    if header.batch_length != len(buf):
        raise DecodeError(
            f"batch length {header.batch_length} in {len(buf)} bytes", 32, frame="message batch"
        )
    messages = stored_messages(buf, locate_frames(buf, frame="message batch"))
    if verify:
        verify_messages(messages)
        expected = batch_checksum(header, [m.checksum for m in messages])
        if expected != header.batch_checksum:
            raise ChecksumMismatchError("batch", header.batch_checksum, expected)
    return header, messages


def decode_batches(r: Reader) -> list[StoredMessage]:
    """Walk batch records until the reader's end (a poll reply's tail)."""
    start = r.pos
    buf = bytes(r.rest())
    try:
        refs = locate_frames(buf)
    except DecodeError as exc:
        raise r.error(exc.what, start + (exc.offset or 0)) from None
    return stored_messages(buf, refs)


def verify_messages(messages: Sequence[StoredMessage]) -> None:
    """Raise :class:`ChecksumMismatchError` for the first message whose checksum is wrong."""
    for m in messages:
        if not m.checksum_ok():
            actual = _message_checksum(
                m.id, m.offset_delta, m.timestamp_delta, m.payload, m.user_headers
            )
            raise ChecksumMismatchError(f"message at offset {m.offset}", m.checksum, actual)
