"""An HTTP/2 client connection carrying gRPC calls, as a sans-IO state machine.

Bytes in (:meth:`H2Machine.receive_data`), events out, bytes to send
(:meth:`H2Machine.data_to_send`); time is an argument (``now``, any monotonic origin), as in
``rabbitmq/protocol/machine.py``. :mod:`streamwire.transport.h2grpc` drives it over asyncio.
What it speaks (RFC 9113 and the gRPC HTTP/2 mapping):

* **Several calls on one connection.** Each :meth:`~H2Machine.open_stream` is a client
  stream (1, 3, 5, …) carrying one gRPC call: HEADERS (HPACK), then length-prefixed request
  messages in DATA frames, the response HEADERS, messages and trailers. It opens no more
  streams than the server's SETTINGS_MAX_CONCURRENT_STREAMS (:attr:`~H2Machine.can_open`).
* **Receiving.** DATA is split into gRPC messages by each call's ``split`` (bytes to decoded
  messages), handed out as :class:`Messages` events. Runs of DATA frames of one stream are
  gathered in one step (``gather_data``, native when built). The connection window is
  credited back as DATA arrives; a stream's window only when its reader has room
  (:meth:`~H2Machine.credit`), so a call whose consumer stops holds the server back by one
  stream window while the others go on.
* **Sending**, within the server's connection and stream windows, in DATA frames of at most
  its SETTINGS_MAX_FRAME_SIZE; what the windows hold back goes out as they open.
* **Limits it announces and enforces**: the stream window (SETTINGS_INITIAL_WINDOW_SIZE),
  the frame size (SETTINGS_MAX_FRAME_SIZE), push off; a larger frame is a FRAME_SIZE_ERROR,
  a header block above ``max_header_block`` an ENHANCE_YOUR_CALM.
* **Keepalive.** While calls are open and nothing arrived for ``keepalive_time`` seconds it
  sends a PING; if nothing at all arrives within ``keepalive_timeout`` after it, the
  connection is dead (:class:`ConnectionEnded`, UNAVAILABLE), so that a half-open
  connection under a quiet subscription is noticed.
* **Errors carry their codes.** A connection error sends GOAWAY with its code
  (PROTOCOL_ERROR, FRAME_SIZE_ERROR, FLOW_CONTROL_ERROR, COMPRESSION_ERROR,
  ENHANCE_YOUR_CALM); a stream error RST_STREAM with its own (PROTOCOL_ERROR for a malformed
  response, FLOW_CONTROL_ERROR, CANCEL when the client gives up on a call: cancelled, a
  message too large or undecodable, NO_ERROR when the server ended the call while the
  client was still sending). The server's RST_STREAM and GOAWAY codes become the gRPC
  statuses grpc's core reports (:func:`~streamwire.transport.h2wire.rst_status`).

Frames for a stream the client already reset or finished are ignored (their DATA still
counts against the connection window, and their header blocks still go through HPACK).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import hpack

from streamwire.errors import ConfigurationError
from streamwire.transport import h2wire as w
from streamwire.transport.h2wire import CallEnded, ErrorCode, Status

__all__ = (
    "ConnectionEnded",
    "Event",
    "Flushed",
    "H2Machine",
    "H2Settings",
    "Messages",
    "Opened",
    "Split",
    "StreamEnded",
)

Split = Callable[[bytearray], tuple[list[Any], int, int]]
"""Decodes the whole gRPC messages at the start of a buffer: ``(messages, consumed,
nbytes)``; raises for a bad first message (:class:`CallEnded` or a decoding error)."""

_U32 = struct.Struct(">I")
_GOAWAY = struct.Struct(">II")
_MAX_STREAM_ID: Final = (1 << 31) - 1
_MAX_ENCODER_TABLE: Final = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class H2Settings:
    """What a connection announces and how it keeps itself alive."""

    window: int = 1 << 20
    """Receive window of each stream (SETTINGS_INITIAL_WINDOW_SIZE)."""
    connection_window: int = 8 << 20
    """Receive window of the connection (raised from 64 KiB by a WINDOW_UPDATE)."""
    max_frame: int = 1 << 20
    """Largest frame accepted (SETTINGS_MAX_FRAME_SIZE)."""
    max_header_block: int = 1 << 20
    """Largest header block (HEADERS and CONTINUATION) accepted."""
    keepalive_time: float | None = 300.0
    """Seconds without receiving anything, while calls are open, before a PING (None: never).
    gRPC servers in Go refuse pings more often than every 5 minutes by default (GOAWAY
    ENHANCE_YOUR_CALM "too_many_pings"); 300 s keeps within that."""
    keepalive_timeout: float = 20.0
    """Seconds a PING may go without anything received before the connection is dead
    (grpc's default)."""
    user_agent: str = "streamwire"

    def __post_init__(self) -> None:
        if not 1 <= self.window <= w.MAX_WINDOW:
            raise ConfigurationError("window must be in 1 .. 2**31-1")
        if not w.DEFAULT_WINDOW <= self.connection_window <= w.MAX_WINDOW:
            raise ConfigurationError("connection_window must be in 65535 .. 2**31-1")
        if not w.MIN_FRAME <= self.max_frame <= w.MAX_FRAME_LIMIT:
            raise ConfigurationError("max_frame must be in 16384 .. 2**24-1")
        if self.keepalive_time is not None and self.keepalive_time <= 0:
            raise ConfigurationError("keepalive_time must be > 0 (or None)")
        if self.keepalive_timeout <= 0:
            raise ConfigurationError("keepalive_timeout must be > 0")


# --- events ------------------------------------------------------------------------------


@dataclass(slots=True)
class Opened:
    """The server's first SETTINGS arrived: it speaks HTTP/2."""


@dataclass(slots=True)
class Messages:
    """Messages of a call, decoded from ``nbytes`` bytes of gRPC messages (prefixes
    included)."""

    stream_id: int
    messages: list[Any]
    nbytes: int


@dataclass(slots=True)
class Flushed:
    """Send windows opened: the call sent some of what it had queued."""

    stream_id: int


@dataclass(slots=True)
class StreamEnded:
    """A call is over: ``ended`` is its status (code 0: the server ended it normally);
    ``failure`` what ``split`` raised, if that ended it."""

    stream_id: int
    ended: CallEnded
    failure: Exception | None = None


@dataclass(slots=True)
class ConnectionEnded:
    """The connection is over (every call on it had its :class:`StreamEnded` first).
    ``error_code``: the HTTP/2 code of the GOAWAY sent or received, if any; ``not_http2``:
    the server answered, but not in HTTP/2; ``too_many_pings``: the server's GOAWAY said
    the keepalive pings come too often."""

    ended: CallEnded
    error_code: int | None = None
    not_http2: bool = False
    too_many_pings: bool = False


Event = Opened | Messages | Flushed | StreamEnded | ConnectionEnded


class _ConnectionError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Stream:
    __slots__ = (
        "budget",
        "buffered_end",
        "closing",
        "half_closed",
        "headers_done",
        "id",
        "max_message",
        "msgbuf",
        "out",
        "received",
        "send_window",
        "split",
        "uncredited",
    )

    def __init__(self, sid: int, split: Split, max_message: int, window: int, send: int) -> None:
        self.id = sid
        self.split = split
        self.max_message = max_message
        self.msgbuf = bytearray()
        self.headers_done = False
        self.received = 0  # DATA bytes received (flow-controlled length)
        self.budget = window  # what the server may send in all: window + credit given
        self.uncredited = 0
        self.out = bytearray()  # gRPC bytes queued, not sent (the windows are spent)
        self.send_window = send
        self.closing = False  # end_stream() was called
        self.half_closed = False  # END_STREAM sent
        self.buffered_end = False


class H2Machine:
    """One client connection (see the module notes). ``authority`` and ``scheme`` go into
    every call's request headers."""

    def __init__(self, settings: H2Settings, *, authority: str, scheme: str = "http") -> None:
        self.settings = settings
        self._authority = authority
        self._scheme = scheme
        self._out = bytearray()
        self._inbuf = bytearray()
        self._events: list[Event] = []
        self._encoder = hpack.Encoder()
        self._decoder = hpack.Decoder()
        self._decoder.max_allowed_table_size = _MAX_ENCODER_TABLE
        self._decoder.max_header_list_size = settings.max_header_block
        self._streams: dict[int, _Stream] = {}
        self._next_id = 1
        self._header_block: bytearray | None = None
        self._header_stream = 0
        self._header_flags = 0
        self._opened = False
        self._started = False
        self._goaway_received = False
        self._dead: ConnectionEnded | None = None
        self._peer_max_streams = 1 << 31
        self._peer_max_frame = w.MIN_FRAME
        self._peer_initial = w.DEFAULT_WINDOW
        self._conn_send = w.DEFAULT_WINDOW  # what the server lets us send on the connection
        self._conn_received = 0
        self._conn_budget = settings.connection_window
        self._conn_uncredited = 0
        self._last_received = 0.0
        self._ping_sent: float | None = None
        self._ping_data = b""
        self._pings = 0
        self._gather = w.gather_data

    # --- state ---------------------------------------------------------------------------

    @property
    def opened(self) -> bool:
        """Whether the server's SETTINGS arrived."""
        return self._opened

    @property
    def ended(self) -> ConnectionEnded | None:
        """How the connection ended, once it has."""
        return self._dead

    @property
    def active(self) -> int:
        """Calls open on the connection."""
        return len(self._streams)

    @property
    def can_open(self) -> bool:
        """Whether another call may start here (alive, no GOAWAY, below the server's
        SETTINGS_MAX_CONCURRENT_STREAMS, stream ids left)."""
        return (
            self._dead is None
            and not self._goaway_received
            and len(self._streams) < self._peer_max_streams
            and self._next_id <= _MAX_STREAM_ID
        )

    def buffered(self, stream_id: int) -> int:
        """gRPC bytes a call queued and the windows held back (0 for an unknown call)."""
        st = self._streams.get(stream_id)
        return len(st.out) if st is not None else 0

    def credit_owed(self, stream_id: int) -> bool:
        """Whether enough of a call's received bytes wait to be credited for a WINDOW_UPDATE
        to be worth it (a quarter of the window)."""
        st = self._streams.get(stream_id)
        return st is not None and st.uncredited >= self.settings.window >> 2

    def data_to_send(self) -> bytes:
        """Everything queued for the server (and forget it)."""
        out, self._out = self._out, bytearray()
        return bytes(out)

    # --- the client's side ---------------------------------------------------------------

    def start(self, now: float) -> None:
        """Queue the preface, SETTINGS and the connection's WINDOW_UPDATE."""
        if self._started:
            return
        self._started = True
        self._last_received = now
        s = self.settings
        payload = (
            w.setting(w.SETTINGS_ENABLE_PUSH, 0)
            + w.setting(w.SETTINGS_INITIAL_WINDOW_SIZE, s.window)
            + w.setting(w.SETTINGS_MAX_FRAME_SIZE, s.max_frame)
        )
        self._out += w.PREFACE
        self._out += w.encode_frame(w.SETTINGS, 0, 0, payload)
        if s.connection_window > w.DEFAULT_WINDOW:
            inc = _U32.pack(s.connection_window - w.DEFAULT_WINDOW)
            self._out += w.encode_frame(w.WINDOW_UPDATE, 0, 0, inc)

    def open_stream(
        self,
        path: str,
        split: Split,
        *,
        request: bytes | None = None,
        max_message: int = 64 << 20,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> int:
        """Start a call of ``path``; its stream id. With ``request`` the client's side ends
        after that one message (a server-streaming call); without, :meth:`send` and
        :meth:`end_stream` follow. Raises ``RuntimeError`` when :attr:`can_open` is False."""
        if not self.can_open:
            raise RuntimeError("no new HTTP/2 stream may start on this connection")
        self.start(self._last_received)
        sid = self._next_id
        self._next_id += 2
        headers = [
            (":method", "POST"),
            (":scheme", self._scheme),
            (":path", path),
            (":authority", self._authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("user-agent", self.settings.user_agent),
            *metadata,
        ]
        block = self._encoder.encode(headers)
        size = self._peer_max_frame
        first, rest = block[:size], block[size:]
        self._out += w.encode_frame(w.HEADERS, 0 if rest else w.END_HEADERS, sid, first)
        while rest:
            part, rest = rest[:size], rest[size:]
            self._out += w.encode_frame(w.CONTINUATION, 0 if rest else w.END_HEADERS, sid, part)
        st = _Stream(sid, split, max_message, self.settings.window, self._peer_initial)
        self._streams[sid] = st
        if request is not None:
            self._queue(st, (request,))
            st.closing = True
            self._flush(st)
        return sid

    def send(self, stream_id: int, messages: Sequence[bytes]) -> None:
        """Queue ``messages`` (serialized) on a call and send what the windows allow.
        Raises ``KeyError`` for a call that is over, ``RuntimeError`` after
        :meth:`end_stream`."""
        st = self._streams[stream_id]
        if st.closing:
            raise RuntimeError("gRPC call: write after done_writing")
        self._queue(st, messages)
        self._flush(st)

    def end_stream(self, stream_id: int) -> None:
        """Half-close a call: END_STREAM once what it queued is sent. Idempotent; nothing
        for a call that is over."""
        st = self._streams.get(stream_id)
        if st is not None:
            st.closing = True
            self._flush(st)

    def reset(self, stream_id: int, code: int = ErrorCode.CANCEL) -> bool:
        """End a call from the client's side: RST_STREAM ``code``. False if it was over."""
        st = self._streams.pop(stream_id, None)
        if st is None or self._dead is not None:
            return False
        self._out += w.encode_frame(w.RST_STREAM, 0, stream_id, _U32.pack(code))
        return True

    def credit(self, stream_id: int) -> None:
        """Credit a call's received bytes back to the server (its reader has room)."""
        st = self._streams.get(stream_id)
        if st is None or not st.uncredited or self._dead is not None:
            return
        credit, st.uncredited = st.uncredited, 0
        st.budget += credit
        self._out += w.encode_frame(w.WINDOW_UPDATE, 0, stream_id, _U32.pack(credit))

    def goodbye(self) -> None:
        """GOAWAY NO_ERROR (the client closes the connection)."""
        if self._dead is None and self._started:
            self._out += w.encode_frame(w.GOAWAY, 0, 0, _GOAWAY.pack(0, ErrorCode.NO_ERROR))

    def lost(self, why: str) -> list[Event]:
        """The connection is gone underneath (reset, closed by the client): end every call
        (UNAVAILABLE) and the connection."""
        if self._dead is not None:
            return []
        self._events = []
        self._end_connection(CallEnded(Status.UNAVAILABLE, why), None)
        return self._events

    # --- time --------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When :meth:`advance_time` has something to do: a keepalive PING is due, or the
        one sent is out of time."""
        if self._dead is not None:
            return None
        if self._ping_sent is not None:
            return self._ping_sent + self.settings.keepalive_timeout
        keepalive = self.settings.keepalive_time
        if keepalive is None or not self._streams or not self._started:
            return None
        return self._last_received + keepalive

    def advance_time(self, now: float) -> list[Event]:
        """Send a keepalive PING when one is due; end the connection when the one sent went
        unanswered (nothing at all received since) for ``keepalive_timeout``."""
        self._events = []
        if self._dead is not None:
            return self._events
        s = self.settings
        if self._ping_sent is not None:
            if self._last_received > self._ping_sent:
                self._ping_sent = None  # something arrived: the connection is alive
            elif now >= self._ping_sent + s.keepalive_timeout:
                why = f"keepalive: nothing received within {s.keepalive_timeout:g} s of a PING"
                self._end_connection(CallEnded(Status.UNAVAILABLE, why), None)
                return self._events
        if (
            self._ping_sent is None
            and s.keepalive_time is not None
            and self._streams
            and self._started
            and now >= self._last_received + s.keepalive_time
        ):
            self._pings += 1
            self._ping_data = self._pings.to_bytes(8)
            self._ping_sent = now
            self._out += w.encode_frame(w.PING, 0, 0, self._ping_data)
        return self._events

    # --- receiving ---------------------------------------------------------------------

    def receive_data(self, data: bytes, now: float) -> list[Event]:
        """Take bytes from the server (``b""``: it closed the connection); the events they
        complete."""
        events: list[Event] = []
        self._events = events
        if self._dead is not None:
            return events
        if not data:
            why = "connection closed by the server"
            self._end_connection(CallEnded(Status.UNAVAILABLE, why), None)
            return events
        self._last_received = now
        buf = self._inbuf
        buf += data
        try:
            pos = self._frames(buf)
        except _ConnectionError as exc:
            self._connection_error(exc.code, exc.message)
            pos = len(buf)
        if self.ended is not None:  # nothing more is read: let the buffers go
            buf.clear()
            self._header_block = None
            return events
        del buf[:pos]
        if self._conn_uncredited >= self.settings.connection_window >> 2:
            credit, self._conn_uncredited = self._conn_uncredited, 0
            self._conn_budget += credit
            self._out += w.encode_frame(w.WINDOW_UPDATE, 0, 0, _U32.pack(credit))
        return events

    def _frames(self, buf: bytearray) -> int:
        """Handle every whole frame in ``buf``; where the first incomplete one starts."""
        pos, end = 0, len(buf)
        if not self._opened and end >= 9 and buf[3] != w.SETTINGS:
            self._not_http2("the server's first frame was not SETTINGS")
            return end
        max_frame = self.settings.max_frame
        streams = self._streams
        while end - pos >= 9:
            kind = buf[pos + 3]
            if kind == w.DATA and self._header_block is None:
                sid = int.from_bytes(buf[pos + 5 : pos + 9]) & 0x7FFFFFFF
                st = streams.get(sid)
                if st is not None and st.headers_done:
                    budget = min(st.budget - st.received, self._conn_budget - self._conn_received)
                    taken, counted = self._gather(buf, pos, sid, st.msgbuf, budget, max_frame)
                    if taken != pos:
                        st.received += counted
                        st.uncredited += counted
                        self._conn_received += counted
                        self._conn_uncredited += counted
                        pos = taken
                        self._split(st)
                        if self._dead is not None:  # its last call ended after a GOAWAY
                            return end
                        continue
            length = int.from_bytes(buf[pos : pos + 3])
            if length > max_frame:
                raise _ConnectionError(
                    ErrorCode.FRAME_SIZE_ERROR, f"frame of {length} bytes > {max_frame}"
                )
            stop = pos + 9 + length
            if stop > end:
                break
            flags = buf[pos + 4]
            sid = int.from_bytes(buf[pos + 5 : pos + 9]) & 0x7FFFFFFF
            if self._header_block is not None and (
                kind != w.CONTINUATION or sid != self._header_stream
            ):
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "a header block interrupted")
            if kind == w.DATA:
                self._data(buf, pos + 9, stop, flags, sid)
            else:
                self._control(kind, flags, sid, bytes(buf[pos + 9 : stop]))
            pos = stop
            if self._dead is not None:
                return end
        return pos

    def _split(self, st: _Stream) -> None:
        """Hand out the whole messages gathered for a call."""
        mbuf = st.msgbuf
        while len(mbuf) >= 5:
            try:
                messages, consumed, nbytes = st.split(mbuf)
            except CallEnded as refused:  # compressed or too long
                self._stream_error(st, ErrorCode.CANCEL, refused)
                return
            except Exception as exc:  # split could not decode a message
                undecodable = CallEnded(Status.INTERNAL, f"undecodable message: {exc}")
                self._stream_error(st, ErrorCode.CANCEL, undecodable, failure=exc)
                return
            if consumed:
                del mbuf[:consumed]
            if not messages:
                if len(mbuf) > st.max_message + 5:  # split raises for a long one first
                    ended = CallEnded(Status.RESOURCE_EXHAUSTED, "gRPC message too long")
                    self._stream_error(st, ErrorCode.CANCEL, ended)
                return
            self._events.append(Messages(st.id, messages, nbytes))

    def _data(self, buf: bytearray, start: int, stop: int, flags: int, sid: int) -> None:
        """A DATA frame the gathering did not take."""
        length = stop - start
        if sid == 0:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "DATA on stream 0")
        self._conn_received += length
        self._conn_uncredited += length
        if self._conn_received > self._conn_budget:
            raise _ConnectionError(
                ErrorCode.FLOW_CONTROL_ERROR, "the server overran the connection window"
            )
        if flags & w.PADDED and (length < 1 or buf[start] >= length):
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "bad DATA padding")
        st = self._streams.get(sid)
        if st is None:
            self._check_known(sid, "DATA")
            return  # a call already over: ignored (counted for the connection above)
        st.received += length
        st.uncredited += length
        if st.received > st.budget:
            ended = CallEnded(Status.INTERNAL, "the server overran the stream window")
            self._stream_error(st, ErrorCode.FLOW_CONTROL_ERROR, ended)
            return
        if not st.headers_done:
            ended = CallEnded(Status.INTERNAL, "DATA before the response headers")
            self._stream_error(st, ErrorCode.PROTOCOL_ERROR, ended)
            return
        if flags & w.PADDED:
            stop -= buf[start]
            start += 1
        st.msgbuf += memoryview(buf)[start:stop]
        self._split(st)
        if flags & w.END_STREAM and st.id in self._streams:
            what = "inside a gRPC message" if st.msgbuf else "without trailers"
            ended = CallEnded(Status.INTERNAL, f"the stream ended {what}")
            self._finish(st, ended, remote_closed=True)

    def _control(self, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if kind == w.SETTINGS:
            self._settings(flags, sid, payload)
        elif kind == w.HEADERS:
            self._headers(flags, sid, payload)
        elif kind == w.CONTINUATION:
            if self._header_block is None:
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "unexpected CONTINUATION")
            self._header_block += payload
            self._header_flags |= flags & w.END_HEADERS
            self._header_block_done()
        elif kind == w.PING:
            if sid:
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "PING on a stream")
            if len(payload) != 8:
                raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "PING not 8 bytes long")
            if flags & w.ACK:
                if payload == self._ping_data:
                    self._ping_sent = None
            else:
                self._out += w.encode_frame(w.PING, w.ACK, 0, payload)
        elif kind == w.RST_STREAM:
            if not sid:
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "RST_STREAM on stream 0")
            if len(payload) != 4:
                raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "RST_STREAM not 4 bytes")
            st = self._streams.pop(sid, None)
            if st is None:
                self._check_known(sid, "RST_STREAM")
                return
            self._events.append(StreamEnded(sid, w.rst_status(_U32.unpack(payload)[0])))
            self._maybe_done()
        elif kind == w.GOAWAY:
            self._goaway(sid, payload)
        elif kind == w.WINDOW_UPDATE:
            self._window_update(sid, payload)
        elif kind == w.PUSH_PROMISE:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "PUSH_PROMISE with push disabled")
        elif kind == w.PRIORITY:
            if not sid:
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "PRIORITY on stream 0")
            if len(payload) != 5:
                raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "PRIORITY not 5 bytes")
        # unknown frame types are ignored (RFC 9113, 4.1, 5.5)

    def _check_known(self, sid: int, what: str) -> None:
        """A frame for a stream that is not open: a stream this client never opened is a
        connection error; one it reset or finished is fine (frames were in flight)."""
        if sid % 2 == 0 or sid >= self._next_id:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, f"{what} on idle stream {sid}")

    def _settings(self, flags: int, sid: int, payload: bytes) -> None:
        if sid:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & w.ACK:
            if payload:
                raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload")
            return
        if len(payload) % 6:
            raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS not a multiple of 6")
        for i in range(0, len(payload), 6):
            ident, value = struct.unpack_from(">HI", payload, i)
            if ident == w.SETTINGS_INITIAL_WINDOW_SIZE:
                if value > w.MAX_WINDOW:
                    raise _ConnectionError(
                        ErrorCode.FLOW_CONTROL_ERROR, f"SETTINGS_INITIAL_WINDOW_SIZE {value}"
                    )
                delta, self._peer_initial = value - self._peer_initial, value
                for st in self._streams.values():
                    st.send_window += delta
                    if st.send_window > w.MAX_WINDOW:
                        raise _ConnectionError(
                            ErrorCode.FLOW_CONTROL_ERROR, "a stream's send window overflowed"
                        )
            elif ident == w.SETTINGS_MAX_FRAME_SIZE:
                if not w.MIN_FRAME <= value <= w.MAX_FRAME_LIMIT:
                    raise _ConnectionError(
                        ErrorCode.PROTOCOL_ERROR, f"SETTINGS_MAX_FRAME_SIZE {value}"
                    )
                self._peer_max_frame = value
            elif ident == w.SETTINGS_ENABLE_PUSH:
                if value > 1:
                    raise _ConnectionError(
                        ErrorCode.PROTOCOL_ERROR, f"SETTINGS_ENABLE_PUSH {value}"
                    )
            elif ident == w.SETTINGS_MAX_CONCURRENT_STREAMS:
                self._peer_max_streams = value
            elif ident == w.SETTINGS_HEADER_TABLE_SIZE:
                self._encoder.header_table_size = min(value, _MAX_ENCODER_TABLE)
        self._out += w.encode_frame(w.SETTINGS, w.ACK, 0)
        if not self._opened:
            self._opened = True
            self._events.append(Opened())
        self._flush_all()

    def _headers(self, flags: int, sid: int, payload: bytes) -> None:
        if not sid:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "HEADERS on stream 0")
        start, stop = 0, len(payload)
        if flags & w.PADDED:
            if stop < 1 or payload[0] >= stop:
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "bad HEADERS padding")
            stop -= payload[0]
            start = 1
        if flags & w.PRIORITY_FLAG:
            start += 5
            if start > stop:
                raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "bad HEADERS priority")
        self._header_block = bytearray(payload[start:stop])
        self._header_stream = sid
        self._header_flags = flags & (w.END_HEADERS | w.END_STREAM)
        self._header_block_done()

    def _header_block_done(self) -> None:
        block = self._header_block
        assert block is not None
        if len(block) > self.settings.max_header_block:
            raise _ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, "header block too large")
        if not self._header_flags & w.END_HEADERS:
            return
        self._header_block = None
        sid, ends = self._header_stream, bool(self._header_flags & w.END_STREAM)
        try:  # decoded even for a call that is over: HPACK's table must stay in step
            headers = [(str(n), str(v)) for n, v in self._decoder.decode(bytes(block), raw=False)]
        except hpack.HPACKError as exc:
            raise _ConnectionError(
                ErrorCode.COMPRESSION_ERROR, f"bad header block: {exc}"
            ) from None
        st = self._streams.get(sid)
        if st is None:
            self._check_known(sid, "HEADERS")
            return
        if not st.headers_done:
            st.headers_done = True
            fields = dict(headers)
            status = fields.get(":status")
            if status != "200":
                code = Status.UNAVAILABLE if status in ("502", "503", "504") else Status.UNKNOWN
                self._finish(st, CallEnded(code, f"HTTP status {status}"), remote_closed=ends)
                return
            ctype = fields.get("content-type", "")
            if not ctype.startswith("application/grpc"):
                ended = CallEnded(Status.UNKNOWN, f"content-type {ctype!r} is not gRPC")
                self._finish(st, ended, remote_closed=ends)
                return
            if not ends:
                return
        elif not ends:
            ended = CallEnded(Status.INTERNAL, "trailers without END_STREAM")
            self._stream_error(st, ErrorCode.PROTOCOL_ERROR, ended)
            return
        if st.msgbuf:
            ended = CallEnded(Status.INTERNAL, "the stream ended inside a gRPC message")
        else:
            ended = w.grpc_status(headers) or CallEnded(
                Status.UNKNOWN, "the stream ended without grpc-status"
            )
        self._finish(st, ended, remote_closed=True)

    def _goaway(self, sid: int, payload: bytes) -> None:
        if sid:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream")
        if len(payload) < 8:
            raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes")
        last, code = _GOAWAY.unpack_from(payload)
        last &= 0x7FFFFFFF
        detail = payload[8:].decode("utf-8", "replace")
        self._goaway_received = True
        text = f"the server went away (GOAWAY {code}{': ' + detail if detail else ''})"
        too_many_pings = code == ErrorCode.ENHANCE_YOUR_CALM and detail == "too_many_pings"
        for stream_id in sorted(self._streams):
            if code != ErrorCode.NO_ERROR or stream_id > last:
                # never processed (safe to retry elsewhere) or cut short by an error
                del self._streams[stream_id]
                self._events.append(StreamEnded(stream_id, CallEnded(Status.UNAVAILABLE, text)))
        if code != ErrorCode.NO_ERROR or not self._streams:
            self._dead = ConnectionEnded(
                CallEnded(Status.UNAVAILABLE, text), code, too_many_pings=too_many_pings
            )
            self._events.append(self._dead)

    def _window_update(self, sid: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "WINDOW_UPDATE not 4 bytes")
        increment = _U32.unpack(payload)[0] & 0x7FFFFFFF
        if sid == 0:
            if not increment:
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
            self._conn_send += increment
            if self._conn_send > w.MAX_WINDOW:
                raise _ConnectionError(
                    ErrorCode.FLOW_CONTROL_ERROR, "the server overflowed the connection window"
                )
            self._flush_all()
            return
        st = self._streams.get(sid)
        if st is None:
            self._check_known(sid, "WINDOW_UPDATE")
            return
        if not increment:
            ended = CallEnded(Status.INTERNAL, "WINDOW_UPDATE of 0")
            self._stream_error(st, ErrorCode.PROTOCOL_ERROR, ended)
            return
        st.send_window += increment
        if st.send_window > w.MAX_WINDOW:
            ended = CallEnded(Status.INTERNAL, "the server overflowed the stream window")
            self._stream_error(st, ErrorCode.FLOW_CONTROL_ERROR, ended)
            return
        if st.out or (st.closing and not st.half_closed):
            self._flush(st)
            self._events.append(Flushed(sid))

    # --- sending -----------------------------------------------------------------------

    @staticmethod
    def _queue(st: _Stream, messages: Sequence[bytes]) -> None:
        out = st.out
        for message in messages:
            out += len(message).to_bytes(5)  # flag 0 (not compressed), then the length
            out += message

    def _flush(self, st: _Stream) -> None:
        """Send what a call queued, as far as the windows allow; END_STREAM once all of it
        went out after :meth:`end_stream`."""
        if self._dead is not None:
            return
        out = st.out
        allowed = min(len(out), self._conn_send, st.send_window)
        if allowed > 0:
            size, sid, dest = self._peer_max_frame, st.id, self._out
            last = st.closing and allowed == len(out)  # END_STREAM on the last frame
            with memoryview(out) as view:
                for i in range(0, allowed, size):
                    stop = min(i + size, allowed)
                    dest += ((stop - i) << 8 | w.DATA).to_bytes(4)
                    dest += b"\x01" if last and stop == allowed else b"\x00"
                    dest += sid.to_bytes(4)
                    dest += view[i:stop]
            if last:
                st.half_closed = True
            del out[:allowed]
            self._conn_send -= allowed
            st.send_window -= allowed
        if st.closing and not out and not st.half_closed:
            st.half_closed = True
            self._out += w.encode_frame(w.DATA, w.END_STREAM, st.id)

    def _flush_all(self) -> None:
        for st in list(self._streams.values()):
            if self._conn_send <= 0:
                return
            if st.out or (st.closing and not st.half_closed):
                self._flush(st)
                self._events.append(Flushed(st.id))

    # --- endings -----------------------------------------------------------------------

    def _finish(self, st: _Stream, ended: CallEnded, *, remote_closed: bool) -> None:
        """A call ended by the server's response: if the client's side is still open, stop
        it (RST_STREAM NO_ERROR when the server closed its side, else CANCEL)."""
        del self._streams[st.id]
        if not st.half_closed:
            code = ErrorCode.NO_ERROR if remote_closed else ErrorCode.CANCEL
            self._out += w.encode_frame(w.RST_STREAM, 0, st.id, _U32.pack(code))
        elif not remote_closed:
            self._out += w.encode_frame(w.RST_STREAM, 0, st.id, _U32.pack(ErrorCode.CANCEL))
        self._events.append(StreamEnded(st.id, ended))
        self._maybe_done()

    def _stream_error(
        self, st: _Stream, code: int, ended: CallEnded, *, failure: Exception | None = None
    ) -> None:
        """End a call with RST_STREAM ``code``."""
        if self._streams.pop(st.id, None) is None:
            return
        self._out += w.encode_frame(w.RST_STREAM, 0, st.id, _U32.pack(code))
        self._events.append(StreamEnded(st.id, ended, failure))
        self._maybe_done()

    def _maybe_done(self) -> None:
        """After a GOAWAY NO_ERROR, the connection ends with its last call."""
        if self._goaway_received and not self._streams and self._dead is None:
            why = CallEnded(Status.UNAVAILABLE, "the server went away (GOAWAY 0)")
            self._dead = ConnectionEnded(why, ErrorCode.NO_ERROR)
            self._events.append(self._dead)

    def _connection_error(self, code: int, message: str) -> None:
        """A protocol error: GOAWAY ``code``, every call ends (INTERNAL)."""
        self._out += w.encode_frame(
            w.GOAWAY, 0, 0, _GOAWAY.pack(0, code) + message.encode("utf-8", "replace")[:256]
        )
        self._end_connection(CallEnded(Status.INTERNAL, f"HTTP/2: {message}"), code)

    def _not_http2(self, why: str) -> None:
        ended = CallEnded(Status.UNAVAILABLE, f"not an HTTP/2 server ({why})")
        self._end_connection(ended, None, not_http2=True)

    def _end_connection(
        self, ended: CallEnded, code: int | None, *, not_http2: bool = False
    ) -> None:
        for sid in sorted(self._streams):
            self._events.append(StreamEnded(sid, CallEnded(ended.code, ended.message)))
        self._streams.clear()
        self._dead = ConnectionEnded(ended, code, not_http2=not_http2)
        self._events.append(self._dead)
