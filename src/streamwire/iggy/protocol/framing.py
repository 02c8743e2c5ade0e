"""The three 256-byte Iggy 0.9 headers (request, reply, eviction) and the result section.

This module is the one place that knows the header layouts (docs/protocol/iggy.md §2.2, §2.5,
§2.6), so that the next protocol revision touches one file. All integers are little-endian;
``size`` (u32 at offset 48) is the total frame length and the frame kind is the byte at 60.

:func:`decode_server_frame` turns one complete frame from the server (as cut by
``FrameAccumulator(IGGY_HEADER)``) into a :class:`Reply` or an :class:`Eviction`;
:func:`decode_request` does the same for the server side (the test double).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final

from streamwire.codec._structs import BytesLike
from streamwire.codec.checksums import xxh3_64
from streamwire.errors import DecodeError, LocalProtocolError
from streamwire.iggy.protocol.constants import HEADER_SIZE, U32_MAX, FrameKind, Operation

__all__ = (
    "Eviction",
    "Framable",
    "Reply",
    "Request",
    "decode_request",
    "decode_server_frame",
    "encode_eviction",
    "encode_reply",
    "encode_request",
    "encode_result_section",
    "peek_kind",
    "split_result_section",
)

_Q2: Final = struct.Struct("<QQ")
_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")

# request: offsets 128 client, 144 request_checksum, 160 timestamp, 168 request,
# 176 operation, 184 session, 192 user_id, 196..200 code (NonReplicated only)
_REQUEST_TAIL: Final = struct.Struct("<QQQQQQB7xQII")
# reply: 128 request_checksum, 144 context, 160 client, 176 op, 184 commit,
# 192 timestamp, 200 request, 208 operation, 216 status
_REPLY_TAIL: Final = struct.Struct("<QQQQQQQQQQB7xI")
_MASK64: Final = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Framable:
    """A request body already in a buffer, from ``at`` to its end, with at least
    :data:`HEADER_SIZE` bytes free in front of it: :func:`encode_request` writes the header
    there and the frame is the buffer from that point, the body never copied (a producer's
    batch of a megabyte). The buffer is the frame's: encode it once."""

    buffer: bytearray
    at: int


def _lo_hi(value: int) -> tuple[int, int]:
    if not 0 <= value < 1 << 128:
        raise LocalProtocolError(f"{value} does not fit in uint128")
    return value & _MASK64, value >> 64


def _common(kind: FrameKind, size: int, view: int = 0, replica: int = 0) -> bytearray:
    if not HEADER_SIZE <= size <= U32_MAX:
        raise LocalProtocolError(f"frame size {size} out of range")
    header = bytearray(HEADER_SIZE)
    _U32.pack_into(header, 48, size)
    _U32.pack_into(header, 52, view)
    header[60] = kind
    header[61] = replica
    return header


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """A decoded request frame (what the server sees)."""

    client: int
    request: int
    operation: int
    session: int
    code: int = 0
    """Command code from bytes 196..200 (NonReplicated only, else 0)."""
    request_checksum: int = 0
    timestamp: int = 0
    user_id: int = 0
    release: int = 0
    body: bytes = field(default=b"", repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """A decoded reply frame. ``body`` is the raw body (result section not stripped); from
    :func:`decode_server_frame` it is a read-only view of the frame, not a copy."""

    client: int
    request: int
    operation: int
    status: int = 0
    op: int = 0
    commit: int = 0
    timestamp: int = 0
    request_checksum: int = 0
    context: int = 0
    view: int = 0
    replica: int = 0
    body: bytes | memoryview = field(default=b"", repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Eviction:
    """The server dropped the session; ``reason`` per §2.6. Never carries a body."""

    client: int
    reason: int
    server_version: int = 0
    server_version_min: int = 0


def encode_request(
    body: BytesLike | tuple[BytesLike, ...] | Framable,
    *,
    client: int,
    request: int,
    operation: int,
    session: int,
    code: int = 0,
    stamp_checksum: bool = False,
    timestamp: int = 0,
) -> BytesLike:
    """A whole request frame: header + body. ``code`` goes to bytes 196..200 only for
    NonReplicated requests; ``stamp_checksum`` writes XXH3-64(body) as request_checksum.
    ``body`` may come in parts (:meth:`~streamwire.iggy.protocol._wire.Payload.encode_parts`):
    the frame is their concatenation, made with one copy of each; or already in its buffer
    with room for the header (:class:`Framable`): the frame is that buffer's view, no copy."""
    framable = body if isinstance(body, Framable) else None
    if framable is not None:
        if framable.at < HEADER_SIZE:
            raise LocalProtocolError(f"{framable.at} bytes before a body cannot hold a header")
        parts: tuple[BytesLike, ...] = (memoryview(framable.buffer)[framable.at :],)
    else:
        parts = body if isinstance(body, tuple) else (body,)  # type: ignore[assignment]
    header = _common(FrameKind.REQUEST, HEADER_SIZE + sum(map(len, parts)))
    checksum = xxh3_64(b"".join(parts)) if stamp_checksum else 0
    c_lo, c_hi = _lo_hi(client)
    nr_code = code if operation == Operation.NON_REPLICATED else 0
    try:
        _REQUEST_TAIL.pack_into(
            header, 128, c_lo, c_hi, checksum, 0, timestamp, request, operation, session, 0,
            nr_code,
        )  # fmt: skip
    except struct.error as exc:
        raise LocalProtocolError(f"cannot encode request header: {exc}") from exc
    if framable is not None:
        start = framable.at - HEADER_SIZE
        framable.buffer[start : framable.at] = header
        return memoryview(framable.buffer)[start:]
    return b"".join((header, *parts))


def encode_reply(
    body: BytesLike,
    *,
    client: int,
    request: int,
    operation: int,
    status: int = 0,
    op: int = 0,
    commit: int = 0,
    timestamp: int = 0,
    request_checksum: int = 0,
) -> bytes:
    """A whole reply frame (server side, used by the test double and vectors)."""
    header = _common(FrameKind.REPLY, HEADER_SIZE + len(body))
    c_lo, c_hi = _lo_hi(client)
    r_lo, r_hi = _lo_hi(request_checksum)
    try:
        _REPLY_TAIL.pack_into(
            header, 128, r_lo, r_hi, 0, 0, c_lo, c_hi, op, commit, timestamp, request,
            operation, status,
        )  # fmt: skip
    except struct.error as exc:
        raise LocalProtocolError(f"cannot encode reply header: {exc}") from exc
    return bytes(header) + bytes(body)


def encode_eviction(
    *, client: int, reason: int, server_version: int = 0, server_version_min: int = 0
) -> bytes:
    """An eviction frame: exactly 256 bytes, reason in the last byte."""
    header = _common(FrameKind.EVICTION, HEADER_SIZE)
    _Q2.pack_into(header, 128, *_lo_hi(client))
    _U32.pack_into(header, 144, server_version)
    _U32.pack_into(header, 148, server_version_min)
    header[255] = reason
    return bytes(header)


def peek_kind(frame: BytesLike) -> int:
    """The frame kind byte (offset 60) of a complete frame."""
    if len(frame) < HEADER_SIZE:
        raise DecodeError(f"Iggy frame of {len(frame)} bytes (header is {HEADER_SIZE})")
    return int(frame[60])


def _check_size(frame: BytesLike, what: str) -> memoryview:
    view = memoryview(frame).cast("B") if isinstance(frame, memoryview) else memoryview(frame)
    if len(view) < HEADER_SIZE:
        raise DecodeError(f"{what} of {len(view)} bytes (header is {HEADER_SIZE})", 0)
    (size,) = _U32.unpack_from(view, 48)
    if size != len(view):
        raise DecodeError(f"{what} announces {size} bytes but has {len(view)}", 48)
    return view


def _u128(view: memoryview, offset: int) -> int:
    lo, hi = _Q2.unpack_from(view, offset)
    return int(lo) | (int(hi) << 64)


def decode_server_frame(frame: BytesLike) -> Reply | Eviction:
    """Decode one complete frame sent by a server: Reply (8) or Eviction (13)."""
    view = _check_size(frame, "Iggy frame")
    kind = view[60]
    if kind == FrameKind.EVICTION:
        if len(view) != HEADER_SIZE:
            raise DecodeError(f"eviction frame with a {len(view) - HEADER_SIZE}-byte body", 48)
        return Eviction(
            client=_u128(view, 128),
            reason=view[255],
            server_version=_U32.unpack_from(view, 144)[0],
            server_version_min=_U32.unpack_from(view, 148)[0],
        )
    if kind != FrameKind.REPLY:
        raise DecodeError(f"frame kind {kind} from the server (expected 8 or 13)", 60)
    (
        rc_lo, rc_hi, ctx_lo, ctx_hi, c_lo, c_hi, op, commit, timestamp, request, operation,
        status,
    ) = _REPLY_TAIL.unpack_from(view, 128)  # fmt: skip
    return Reply(
        client=c_lo | (c_hi << 64),
        request=request,
        operation=operation,
        status=status,
        op=op,
        commit=commit,
        timestamp=timestamp,
        request_checksum=rc_lo | (rc_hi << 64),
        context=ctx_lo | (ctx_hi << 64),
        view=_U32.unpack_from(view, 52)[0],
        replica=view[61],
        # a view of an immutable frame, not a copy (a poll reply's records are copied later)
        body=view[HEADER_SIZE:] if type(frame) is bytes else bytes(view[HEADER_SIZE:]),
    )


def decode_request(frame: BytesLike) -> Request:
    """Decode one complete request frame (server side). Raises :class:`DecodeError` when it
    is not a request; field validation (§2.2: client, operation, session and request rules)
    is left to the caller, as the server does it after decoding."""
    view = _check_size(frame, "Iggy request")
    if view[60] != FrameKind.REQUEST:
        raise DecodeError(f"frame kind {view[60]} (expected a request, 5)", 60)
    (c_lo, c_hi, rc_lo, rc_hi, timestamp, request, operation, session, user_id, code) = (
        _REQUEST_TAIL.unpack_from(view, 128)
    )
    if operation != Operation.NON_REPLICATED:
        code = 0
    return Request(
        client=c_lo | (c_hi << 64),
        request=request,
        operation=operation,
        session=session,
        code=code,
        request_checksum=rc_lo | (rc_hi << 64),
        timestamp=timestamp,
        user_id=user_id,
        release=_U32.unpack_from(view, 56)[0],
        body=bytes(view[HEADER_SIZE:]),
    )


# --- result section (§2.5 step 4) ------------------------------------------------------------


def encode_result_section(error_code: int | None = None, *, index: int = 0) -> bytes:
    """``[0u32]`` (success) or ``[1u32][index u32][code u32]`` (a committed rejection)."""
    if error_code is None:
        return _U32.pack(0)
    return _U32.pack(1) + _U32.pack(index) + _U32.pack(error_code)


def split_result_section(body: BytesLike) -> tuple[int | None, memoryview]:
    """Strip the result section: ``(None, payload)`` on success, ``(code, empty)`` on a
    rejection (the first entry's code)."""
    view = memoryview(body)
    if len(view) < 4:
        raise DecodeError(f"result section of {len(view)} bytes", 0, frame="reply")
    (count,) = _U32.unpack_from(view, 0)
    if count == 0:
        return None, view[4:]
    need = 4 + 8 * count
    if count > (len(view) - 4) // 8 or len(view) != need:
        raise DecodeError(
            f"result section of {count} entries in {len(view)} bytes", 0, frame="reply"
        )
    (code,) = _U32.unpack_from(view, 8)
    return code, view[need:]
