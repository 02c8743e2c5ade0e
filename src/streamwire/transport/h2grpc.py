"""A minimal gRPC-over-HTTP/2 client for one server-streaming call per connection.

grpc-python reads a server stream one message at a time (a completion-queue operation and
a few Python calls per message, ~7 µs each); this reads the socket with an asyncio
``Protocol`` and hands every gRPC message that a read completed to its sink in one call.
It speaks only what such a call needs (RFC 9113, the gRPC HTTP/2 mapping):

* the client preface and SETTINGS (push off, the stream window given), a connection
  WINDOW_UPDATE to the same size; SETTINGS and PING acknowledged;
* one request: HEADERS (HPACK, ``hpack``), then the length-prefixed request message in a
  DATA frame that ends the client's side of the stream;
* responses: HEADERS (``:status`` 200 and ``application/grpc``), DATA frames carrying
  length-prefixed messages (padding allowed, compressed messages refused), trailers
  (``grpc-status``, percent-encoded ``grpc-message``), or a trailers-only response;
* flow control: received DATA is credited back (connection and stream) only while the
  sink says it has room (``credit``), so a consumer that stops taking messages holds the
  server back with at most one window of bytes in flight; a peer that overruns the window
  is a connection error;
* RST_STREAM, GOAWAY, a closed connection or a protocol error end the call with a
  :class:`CallEnded` that carries the gRPC status grpc's core reports for the same event
  (UNAVAILABLE, CANCELLED, INTERNAL).

Nothing here is specific to a service: the caller gives the path, the request bytes and a
``split`` function that turns a buffer of DATA bytes into decoded messages
(:func:`split_messages` is the plain one).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from collections.abc import Callable, Sequence
from typing import Any, Final, Generic, Protocol, TypeVar
from urllib.parse import unquote

import hpack

from streamwire._native import core as _native

__all__ = (
    "ALPN",
    "CallEnded",
    "GrpcStreamProtocol",
    "NotHttp2",
    "Sink",
    "Status",
    "authority",
    "encode_frame",
    "split_messages",
)

_T = TypeVar("_T")

ALPN: Final = "h2"
PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# frame types
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
# settings
SETTINGS_ENABLE_PUSH: Final = 0x2
SETTINGS_INITIAL_WINDOW_SIZE: Final = 0x4
SETTINGS_MAX_FRAME_SIZE: Final = 0x5
# error codes
NO_ERROR: Final = 0x0
PROTOCOL_ERROR: Final = 0x1
FLOW_CONTROL_ERROR: Final = 0x3
FRAME_SIZE_ERROR: Final = 0x6
REFUSED_STREAM: Final = 0x7
CANCEL: Final = 0x8

DEFAULT_WINDOW: Final = 65_535
MAX_FRAME: Final = 16_384
#: Largest frame this client accepts (it announces none: the default, 16 KiB, applies, but
#: a little slack costs nothing).
_MAX_ACCEPTED_FRAME: Final = 1 << 24
#: Largest header block (HEADERS + CONTINUATION) accepted.
_MAX_HEADER_BLOCK: Final = 1 << 20
#: The one stream this client opens.
STREAM_ID: Final = 1

_HEADER = struct.Struct(">I B B I")  # length << 8 | type packed by hand below
_U32 = struct.Struct(">I")


class Status:
    """gRPC status codes used here (numbers from the gRPC specification)."""

    OK: Final = 0
    CANCELLED: Final = 1
    UNKNOWN: Final = 2
    RESOURCE_EXHAUSTED: Final = 8
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


class Sink(Protocol[_T]):
    """Where a call's messages go."""

    def deliver(self, messages: list[_T], nbytes: int) -> None:
        """Messages decoded from ``nbytes`` bytes of gRPC messages (prefixes included)."""

    def credit(self) -> bool:
        """Whether the sink has room: received bytes are credited back only then."""


def encode_frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame."""
    return _U32.pack(len(payload) << 8 | kind) + bytes((flags,)) + _U32.pack(stream) + payload


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


Split = Callable[[bytearray], tuple[list[_T], int, int]]
"""Decodes the whole messages at the start of a buffer: ``(messages, consumed, nbytes)``."""


def _rst_status(code: int) -> CallEnded:
    if code == REFUSED_STREAM:
        return CallEnded(Status.UNAVAILABLE, "stream refused (RST_STREAM REFUSED_STREAM)")
    if code == CANCEL:
        return CallEnded(Status.CANCELLED, "stream reset by the server (RST_STREAM CANCEL)")
    return CallEnded(Status.INTERNAL, f"stream reset by the server (RST_STREAM {code})")


def _grpc_status(headers: Sequence[tuple[str, str]]) -> CallEnded | None:
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


class GrpcStreamProtocol(asyncio.Protocol, Generic[_T]):
    """One connection carrying one server-streaming gRPC call (stream 1).

    ``opened`` resolves once the server's SETTINGS arrived (or raises :class:`NotHttp2`,
    or :class:`CallEnded`); ``ended`` with the :class:`CallEnded` that ended the call
    (status 0 for a normal end). Messages go to ``sink`` as ``split`` decodes them.
    ``cancel()`` resets the stream and closes the connection.
    """

    def __init__(
        self,
        *,
        loop: asyncio.AbstractEventLoop,
        authority: str,
        path: str,
        request: bytes | None,
        split: Split[_T],
        sink: Sink[_T],
        scheme: str = "http",
        window: int = 1 << 20,
        max_message: int = 64 << 20,
        user_agent: str = "streamwire",
    ) -> None:
        self._loop = loop
        self._split = split
        self._gather = gather_data
        self._sink = sink
        self._window = window
        self._max_message = max_message
        self._inbuf = bytearray()
        self._msgbuf = bytearray()
        self._transport: asyncio.Transport | None = None
        self._decoder = hpack.Decoder()
        self._header_block: bytearray | None = None
        self._header_flags = 0
        self._got_settings = False
        self._got_headers = False
        self._uncredited = 0  # DATA bytes received and not yet credited back
        self._received = 0  # DATA bytes received beyond what the server may send
        self._budget = window  # what the server may still send (stream = connection)
        self.failure: Exception | None = None
        """What ``split`` raised, if that ended the call."""
        self.not_http2 = False
        """The server answered, but not in HTTP/2 (TLS without ``h2`` by ALPN, or a first
        frame that was not SETTINGS); a connection lost before SETTINGS is not that."""
        self.opened: asyncio.Future[None] = loop.create_future()
        self.ended: asyncio.Future[CallEnded] = loop.create_future()
        headers = [
            (":method", "POST"),
            (":scheme", scheme),
            (":path", path),
            (":authority", authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("user-agent", user_agent),
        ]
        block = hpack.Encoder().encode(headers)
        settings = _setting(SETTINGS_ENABLE_PUSH, 0) + _setting(
            SETTINGS_INITIAL_WINDOW_SIZE, window
        )
        out = [PREFACE, encode_frame(SETTINGS, 0, 0, settings)]
        if window > DEFAULT_WINDOW:
            out.append(encode_frame(WINDOW_UPDATE, 0, 0, _U32.pack(window - DEFAULT_WINDOW)))
        out.append(encode_frame(HEADERS, END_HEADERS, STREAM_ID, block))
        if request is not None:  # the one request, ending the client's side
            body = b"\x00" + _U32.pack(len(request)) + request
            for start in range(0, len(body), MAX_FRAME):
                last = start + MAX_FRAME >= len(body)
                chunk = body[start : start + MAX_FRAME]
                out.append(encode_frame(DATA, END_STREAM if last else 0, STREAM_ID, chunk))
        self._hello = b"".join(out)

    # --- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None and ssl_object.selected_alpn_protocol() != ALPN:
            self.not_http2 = True
            self._fail_open(NotHttp2("the server did not agree to HTTP/2 (ALPN h2)"))
            return
        transport.write(self._hello)  # the request fits the default windows

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        why = f"connection lost: {exc}" if exc else "connection closed by the server"
        if not self._got_settings:
            self._fail_open(NotHttp2(f"no HTTP/2 SETTINGS from the server ({why})"))
        self._end(CallEnded(Status.UNAVAILABLE, why))

    def data_received(self, data: bytes) -> None:
        if self.ended.done():
            return
        buf = self._inbuf
        buf += data
        try:
            pos = self._frames(buf)
        except CallEnded as ended:
            self._abort(ended)
            return
        except Exception as exc:  # ``split`` could not decode a message
            self.failure = exc
            self._abort(CallEnded(Status.INTERNAL, f"undecodable message: {exc}"))
            return
        del buf[:pos]

    # --- frames ---------------------------------------------------------------------

    def _frames(self, buf: bytearray) -> int:
        """Handle every whole frame in ``buf``; where the first incomplete one starts.

        Runs of DATA frames are gathered (``gather_data``, native when built) into the
        message buffer, whose whole messages are split and delivered before any other frame
        is handled and at the end; a frame the gathering does not take is handled alone
        (and raises what is wrong with it)."""
        pos, end = 0, len(buf)
        if not self._got_settings and end >= 9 and buf[3] != SETTINGS:
            self.not_http2 = True
            self._fail_open(NotHttp2("the server's first frame was not SETTINGS"))
            raise CallEnded(Status.UNAVAILABLE, "not an HTTP/2 server")
        gather, mbuf = self._gather, self._msgbuf
        while end - pos >= 9:
            if buf[pos + 3] == DATA and self._got_headers:
                taken, counted = gather(
                    buf, pos, STREAM_ID, mbuf, self._budget - self._received, _MAX_ACCEPTED_FRAME
                )
                if taken != pos:
                    self._received += counted
                    self._uncredited += counted
                    pos = taken
                    continue
            head = int.from_bytes(buf[pos : pos + 4])
            length, kind = head >> 8, head & 0xFF
            if length > _MAX_ACCEPTED_FRAME:
                raise CallEnded(Status.INTERNAL, f"HTTP/2 frame of {length} bytes")
            stop = pos + 9 + length
            if stop > end:
                break
            flags = buf[pos + 4]
            stream = int.from_bytes(buf[pos + 5 : pos + 9]) & 0x7FFFFFFF
            if kind == DATA:
                self._data(buf, pos + 9, stop, flags, stream)
            else:
                self._split_messages()
                self._control(kind, flags, stream, bytes(buf[pos + 9 : stop]))
            pos = stop
            if self.ended.done():
                return pos
        self._split_messages()
        if self._uncredited >= self._window >> 2 and self._sink.credit():
            self.give_credit()
        return pos

    def _split_messages(self) -> None:
        """Deliver the whole messages gathered so far. ``split`` hands out what comes before
        a bad message and raises for it on the next call."""
        mbuf = self._msgbuf
        while len(mbuf) >= 5:
            messages, consumed, nbytes = self._split(mbuf)
            if consumed:
                del mbuf[:consumed]
            if not messages:
                if len(mbuf) > self._max_message + 5:  # split raises for a long one first
                    raise CallEnded(Status.RESOURCE_EXHAUSTED, "gRPC message too long")
                return
            self._sink.deliver(messages, nbytes)

    def _data(self, buf: bytearray, start: int, stop: int, flags: int, stream: int) -> None:
        """A DATA frame the gathering did not take: what is wrong with it, or the last one."""
        length = stop - start
        self._received += length
        self._uncredited += length
        if self._received > self._budget:
            raise CallEnded(Status.INTERNAL, "the server overran the flow-control window")
        if stream != STREAM_ID or not self._got_headers:
            raise CallEnded(Status.INTERNAL, f"unexpected DATA on stream {stream}")
        if flags & PADDED:
            if length < 1 or buf[start] >= length:
                raise CallEnded(Status.INTERNAL, "bad DATA padding")
            stop -= buf[start]
            start += 1
        self._msgbuf += memoryview(buf)[start:stop]
        self._split_messages()
        if flags & END_STREAM:
            if self._msgbuf:
                raise CallEnded(Status.INTERNAL, "the stream ended inside a gRPC message")
            raise CallEnded(Status.INTERNAL, "the stream ended without trailers")

    def _control(self, kind: int, flags: int, stream: int, payload: bytes) -> None:
        if self._header_block is not None and kind != CONTINUATION:
            raise CallEnded(Status.INTERNAL, "a header block interrupted")
        if kind == SETTINGS:
            self._settings(flags, stream, payload)
        elif kind == HEADERS:
            self._headers(flags, stream, payload)
        elif kind == CONTINUATION:
            if self._header_block is None or stream != STREAM_ID:
                raise CallEnded(Status.INTERNAL, "unexpected CONTINUATION")
            self._header_block += payload
            self._header_flags |= flags & END_HEADERS
            self._header_block_done()
        elif kind == PING:
            if len(payload) != 8 or stream:
                raise CallEnded(Status.INTERNAL, "bad PING")
            if not flags & ACK:
                self._write(encode_frame(PING, ACK, 0, payload))
        elif kind == RST_STREAM:
            if len(payload) != 4:
                raise CallEnded(Status.INTERNAL, "bad RST_STREAM")
            if stream == STREAM_ID:
                self._end(_rst_status(_U32.unpack(payload)[0]))
                self._close()
        elif kind == GOAWAY:
            if len(payload) < 8 or stream:
                raise CallEnded(Status.INTERNAL, "bad GOAWAY")
            last, code = struct.unpack_from(">II", payload)
            detail = payload[8:].decode("utf-8", "replace")
            if code != NO_ERROR or (last & 0x7FFFFFFF) < STREAM_ID:
                text = f"the server went away (GOAWAY {code}{': ' + detail if detail else ''})"
                self._end(CallEnded(Status.UNAVAILABLE, text))
                self._close()
        elif kind == WINDOW_UPDATE:
            if len(payload) != 4:
                raise CallEnded(Status.INTERNAL, "bad WINDOW_UPDATE")
            self._window_update(stream, _U32.unpack(payload)[0] & 0x7FFFFFFF)
        elif kind == PUSH_PROMISE:
            raise CallEnded(Status.INTERNAL, "PUSH_PROMISE with push disabled")
        # PRIORITY and unknown frame types are ignored (RFC 9113, 4.1, 5.5)

    def _settings(self, flags: int, stream: int, payload: bytes) -> None:
        if stream or len(payload) % 6:
            raise CallEnded(Status.INTERNAL, "bad SETTINGS")
        if flags & ACK:
            return
        for i in range(0, len(payload), 6):
            ident, value = struct.unpack_from(">HI", payload, i)
            if ident == SETTINGS_MAX_FRAME_SIZE and not MAX_FRAME <= value < 1 << 24:
                raise CallEnded(Status.INTERNAL, f"bad SETTINGS_MAX_FRAME_SIZE {value}")
            if ident == SETTINGS_INITIAL_WINDOW_SIZE and value > 0x7FFFFFFF:
                raise CallEnded(Status.INTERNAL, f"bad SETTINGS_INITIAL_WINDOW_SIZE {value}")
            self._peer_setting(ident, value)
        self._write(encode_frame(SETTINGS, ACK, 0))
        if not self._got_settings:
            self._got_settings = True
            if not self.opened.done():
                self.opened.set_result(None)

    def _headers(self, flags: int, stream: int, payload: bytes) -> None:
        if stream != STREAM_ID:
            raise CallEnded(Status.INTERNAL, f"HEADERS on stream {stream}")
        start, stop = 0, len(payload)
        if flags & PADDED:
            if stop < 1 or payload[0] >= stop:
                raise CallEnded(Status.INTERNAL, "bad HEADERS padding")
            stop -= payload[0]
            start = 1
        if flags & PRIORITY_FLAG:
            start += 5
            if start > stop:
                raise CallEnded(Status.INTERNAL, "bad HEADERS priority")
        self._header_block = bytearray(payload[start:stop])
        self._header_flags = flags & (END_HEADERS | END_STREAM)
        self._header_block_done()

    def _header_block_done(self) -> None:
        block = self._header_block
        assert block is not None
        if len(block) > _MAX_HEADER_BLOCK:
            raise CallEnded(Status.INTERNAL, "header block too large")
        if not self._header_flags & END_HEADERS:
            return
        self._header_block = None
        try:
            headers = [(str(n), str(v)) for n, v in self._decoder.decode(bytes(block), raw=False)]
        except hpack.HPACKError as exc:
            raise CallEnded(Status.INTERNAL, f"bad header block: {exc}") from None
        ends = bool(self._header_flags & END_STREAM)
        if not self._got_headers:
            self._got_headers = True
            status = dict(headers).get(":status")
            if status != "200":
                raise CallEnded(
                    Status.UNAVAILABLE if status in ("502", "503", "504") else Status.UNKNOWN,
                    f"HTTP status {status}",
                )
            ctype = dict(headers).get("content-type", "")
            if not ctype.startswith("application/grpc"):
                raise CallEnded(Status.UNKNOWN, f"content-type {ctype!r} is not gRPC")
            if not ends:
                return
        elif not ends:
            raise CallEnded(Status.INTERNAL, "trailers without END_STREAM")
        if self._msgbuf:
            raise CallEnded(Status.INTERNAL, "the stream ended inside a gRPC message")
        ended = _grpc_status(headers)
        if ended is None:
            ended = CallEnded(Status.UNKNOWN, "the stream ended without grpc-status")
        self._end(ended)
        self._close()

    # --- hooks for a call that sends (``h2call``): the server's send windows ------------

    def _window_update(self, stream: int, increment: int) -> None:
        """The server's WINDOW_UPDATE (this call sends nothing after its request)."""

    def _peer_setting(self, ident: int, value: int) -> None:
        """One (valid) setting of the server's SETTINGS."""

    # --- flow control, ending --------------------------------------------------------

    def give_credit(self) -> None:
        """Credit the bytes received so far back to the server (connection and stream)."""
        credit, self._uncredited = self._uncredited, 0
        if credit and self._transport is not None and not self.ended.done():
            self._budget += credit
            inc = _U32.pack(credit)
            self._write(
                encode_frame(WINDOW_UPDATE, 0, 0, inc)
                + encode_frame(WINDOW_UPDATE, 0, STREAM_ID, inc)
            )

    def credit_owed(self) -> bool:
        """Whether enough bytes wait to be credited for a WINDOW_UPDATE to be worth it."""
        return self._uncredited >= self._window >> 2

    def _write(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    def _fail_open(self, exc: Exception) -> None:
        if not self.opened.done():
            self.opened.set_exception(exc)
            self.opened.exception()  # retrieved: nobody may be waiting any more

    def _end(self, ended: CallEnded) -> None:
        if not self.ended.done():
            self.ended.set_result(ended)
        self._fail_open(ended)

    def _close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def _abort(self, ended: CallEnded) -> None:
        """A protocol error: end the call, tell the server (GOAWAY) and close."""
        self._end(ended)
        self._write(encode_frame(GOAWAY, 0, 0, _U32.pack(0) + _U32.pack(PROTOCOL_ERROR)))
        self._close()

    def cancel(self) -> None:
        """End the call locally: RST_STREAM CANCEL (written at once when the socket takes
        it), then abort the connection, so that a peer that stopped reading cannot keep it
        open. Idempotent."""
        if not self.ended.done():
            self._write(encode_frame(RST_STREAM, 0, STREAM_ID, _U32.pack(CANCEL)))
        self._end(CallEnded(Status.CANCELLED, "cancelled locally"))
        if self._transport is not None:
            self._transport.abort()


def _setting(ident: int, value: int) -> bytes:
    return struct.pack(">HI", ident, value)


_P = TypeVar("_P", bound="GrpcStreamProtocol[Any]")


async def open_call(
    factory: Callable[[], _P],
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None,
    server_hostname: str | None,
    timeout: float | None,
    wait_settings: bool = True,
) -> _P:
    """Connect and send the request; returns once the server's SETTINGS arrived (or, with
    ``wait_settings=False``, once connected: a client may send before the server's
    SETTINGS, within the default windows). Raises ``OSError``/``TimeoutError``
    (connecting), :class:`NotHttp2` or :class:`CallEnded`. Cancellation or a failure
    closes the connection."""
    loop = asyncio.get_running_loop()
    proto: _P | None = None
    try:
        async with asyncio.timeout(timeout):
            kwargs: dict[str, Any] = {}
            if ssl_context is not None:
                kwargs = {"ssl": ssl_context, "server_hostname": server_hostname or host}
            _, proto = await loop.create_connection(factory, host, port, **kwargs)
            if wait_settings or proto.opened.done():  # (done already: TLS without h2)
                await proto.opened
        return proto
    except BaseException:
        if proto is not None:
            proto.cancel()
        raise


def authority(host: str, port: int, server_hostname: str | None = None) -> str:
    """The ``:authority`` of a call to ``host:port`` (the TLS server name when given)."""
    if server_hostname is not None:
        return server_hostname
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def alpn_context(context: ssl.SSLContext) -> ssl.SSLContext:
    """``context`` offering HTTP/2 by ALPN (changed in place, returned)."""
    with contextlib.suppress(NotImplementedError):
        context.set_alpn_protocols([ALPN])
    return context
