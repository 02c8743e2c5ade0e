"""HTTP/2 and gRPC-over-HTTP/2 on the wire: frame layout, codes, statuses (RFC 9113; the
gRPC HTTP/2 mapping). Pure functions and constants shared by the sans-IO machine
(:mod:`streamwire.transport.h2machine`) and its asyncio driver
(:mod:`streamwire.transport.h2grpc`)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final
from urllib.parse import unquote

from streamwire._native import core as _native

__all__ = (
    "ALPN",
    "CallEnded",
    "ErrorCode",
    "NotHttp2",
    "Status",
    "encode_frame",
    "gather_data",
    "gather_data_pure",
    "grpc_status",
    "rst_status",
    "setting",
    "split_messages",
)

ALPN: Final = "h2"
PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# frame types (RFC 9113, 6)
DATA: Final = 0x0
HEADERS: Final = 0x1
PRIORITY: Final = 0x2
RST_STREAM: Final = 0x3
SETTINGS: Final = 0x4
PUSH_PROMISE: Final = 0x5
PING: Final = 0x6
GOAWAY: Final = 0x7
WINDOW_UPDATE: Final = 0x8
CONTINUATION: Final = 0x9
# flags
END_STREAM: Final = 0x1
ACK: Final = 0x1
END_HEADERS: Final = 0x4
PADDED: Final = 0x8
PRIORITY_FLAG: Final = 0x20
# settings (RFC 9113, 6.5.2)
SETTINGS_HEADER_TABLE_SIZE: Final = 0x1
SETTINGS_ENABLE_PUSH: Final = 0x2
SETTINGS_MAX_CONCURRENT_STREAMS: Final = 0x3
SETTINGS_INITIAL_WINDOW_SIZE: Final = 0x4
SETTINGS_MAX_FRAME_SIZE: Final = 0x5
SETTINGS_MAX_HEADER_LIST_SIZE: Final = 0x6

DEFAULT_WINDOW: Final = 65_535
MIN_FRAME: Final = 16_384
"""SETTINGS_MAX_FRAME_SIZE's initial (and smallest) value."""
MAX_FRAME_LIMIT: Final = (1 << 24) - 1
"""SETTINGS_MAX_FRAME_SIZE's largest value."""
MAX_WINDOW: Final = 0x7FFFFFFF


class ErrorCode:
    """HTTP/2 error codes (RFC 9113, 7)."""

    NO_ERROR: Final = 0x0
    PROTOCOL_ERROR: Final = 0x1
    INTERNAL_ERROR: Final = 0x2
    FLOW_CONTROL_ERROR: Final = 0x3
    SETTINGS_TIMEOUT: Final = 0x4
    STREAM_CLOSED: Final = 0x5
    FRAME_SIZE_ERROR: Final = 0x6
    REFUSED_STREAM: Final = 0x7
    CANCEL: Final = 0x8
    COMPRESSION_ERROR: Final = 0x9
    CONNECT_ERROR: Final = 0xA
    ENHANCE_YOUR_CALM: Final = 0xB
    INADEQUATE_SECURITY: Final = 0xC
    HTTP_1_1_REQUIRED: Final = 0xD


class Status:
    """gRPC status codes used here (numbers from the gRPC specification)."""

    OK: Final = 0
    CANCELLED: Final = 1
    UNKNOWN: Final = 2
    RESOURCE_EXHAUSTED: Final = 8
    PERMISSION_DENIED: Final = 7
    INTERNAL: Final = 13
    UNAVAILABLE: Final = 14


class CallEnded(Exception):
    """How a call ended: a gRPC status code and message (``code`` 0: the server ended the
    stream normally)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}" if message else str(code))
        self.code = code
        self.message = message


class NotHttp2(Exception):
    """The peer did not speak HTTP/2 (no ``h2`` by ALPN, or its first frame was not
    SETTINGS): the caller may fall back to another transport."""


_U32 = struct.Struct(">I")
_SETTING = struct.Struct(">HI")


def encode_frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame."""
    return _U32.pack(len(payload) << 8 | kind) + bytes((flags,)) + _U32.pack(stream) + payload


def setting(ident: int, value: int) -> bytes:
    """One entry of a SETTINGS frame's payload."""
    return _SETTING.pack(ident, value)


def split_messages(buf: bytes | bytearray, limit: int) -> tuple[list[bytes], int, int]:
    """The whole gRPC messages at the start of ``buf``: ``(messages, consumed, nbytes)``
    where ``consumed`` (= ``nbytes``) is where the first incomplete one starts. A
    compressed message (none was asked for) or one longer than ``limit`` ends the run; when
    it is the first, :class:`CallEnded` is raised (INTERNAL, RESOURCE_EXHAUSTED), so what
    came before it is handed out first."""
    out: list[bytes] = []
    pos, end = 0, len(buf)
    while end - pos >= 5:
        flag = buf[pos]
        size = int.from_bytes(buf[pos + 1 : pos + 5])
        if flag or size > limit:
            if out:
                break
            if flag:
                raise CallEnded(Status.INTERNAL, "compressed gRPC message without grpc-encoding")
            raise CallEnded(Status.RESOURCE_EXHAUSTED, f"gRPC message of {size} bytes > {limit}")
        stop = pos + 5 + size
        if stop > end:
            break
        out.append(bytes(buf[pos + 5 : stop]))
        pos = stop
    return out, pos, pos


def gather_data_pure(
    buf: bytearray, start: int, stream: int, out: bytearray, budget: int, max_frame: int
) -> tuple[int, int]:
    """From ``start`` in ``buf``, each whole DATA frame of ``stream`` without END_STREAM, at
    most ``max_frame`` long, with valid padding and fitting the flow-control ``budget``
    left, has its payload (padding removed) appended to ``out``; stops before the first
    frame that is anything else. ``(position after the last frame taken, their lengths
    summed)``. The native core's ``h2_gather_data`` is its twin (property tests)."""
    pos, end, counted = start, len(buf), 0
    while end - pos >= 9:
        head = int.from_bytes(buf[pos : pos + 4])
        length, kind, flags = head >> 8, head & 0xFF, buf[pos + 4]
        sid = int.from_bytes(buf[pos + 5 : pos + 9]) & 0x7FFFFFFF
        if (
            kind != DATA
            or sid != stream
            or flags & END_STREAM
            or length > max_frame
            or end - pos - 9 < length
            or counted + length > budget
        ):
            break
        s, e = pos + 9, pos + 9 + length
        if flags & PADDED:
            if length < 1 or buf[s] >= length:
                break
            e -= buf[s]
            s += 1
        out += memoryview(buf)[s:e]
        counted += length
        pos += 9 + length
    return pos, counted


gather_data = _native.h2_gather_data if _native is not None else gather_data_pure
"""Native when the core is there, else :func:`gather_data_pure`."""


_RST_STATUS: Final = {
    ErrorCode.REFUSED_STREAM: Status.UNAVAILABLE,
    ErrorCode.CANCEL: Status.CANCELLED,
    ErrorCode.ENHANCE_YOUR_CALM: Status.RESOURCE_EXHAUSTED,
    ErrorCode.INADEQUATE_SECURITY: Status.PERMISSION_DENIED,
}


def rst_status(code: int, who: str = "the server") -> CallEnded:
    """The gRPC status of a stream reset with ``code`` (the gRPC HTTP/2 mapping: REFUSED_STREAM
    is UNAVAILABLE, CANCEL is CANCELLED, ENHANCE_YOUR_CALM is RESOURCE_EXHAUSTED,
    INADEQUATE_SECURITY is PERMISSION_DENIED, anything else INTERNAL)."""
    return CallEnded(
        _RST_STATUS.get(code, Status.INTERNAL), f"stream reset by {who} (RST_STREAM {code})"
    )


def grpc_status(headers: Sequence[tuple[str, str]]) -> CallEnded | None:
    """The status a header block (trailers) carries, None if it has no ``grpc-status``."""
    status = message = None
    for name, value in headers:
        if name == "grpc-status":
            status = value
        elif name == "grpc-message":
            message = value
    if status is None:
        return None
    try:
        code = int(status)
    except ValueError:
        return CallEnded(Status.UNKNOWN, f"malformed grpc-status {status!r}")
    return CallEnded(code, unquote(message or "", errors="replace"))
