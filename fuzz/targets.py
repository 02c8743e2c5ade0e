"""Fuzz targets: every decoder that reads bytes from the network or from a broker.

Each target takes arbitrary bytes and must either return or raise a
:class:`~streamwire.StreamwireError` — anything else (IndexError, struct.error, a hang) is a
bug.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Final, NoReturn

import hpack

from streamwire.codec import IGGY_HEADER, LENGTH_PREFIX_U32, FrameAccumulator
from streamwire.codec.amqp import decode_message, decode_value
from streamwire.codec.headers import HeaderValue
from streamwire.codec.reader import Reader
from streamwire.errors import StreamwireError
from streamwire.iggy.protocol.batch import decode_batches
from streamwire.iggy.protocol.framing import decode_request, decode_server_frame
from streamwire.iggy.protocol.tlv import decode_options, decode_user_headers
from streamwire.liftbridge.protocol.envelope import decode_envelope
from streamwire.liftbridge.protocol.messages import decode_ack, decode_publish
from streamwire.rabbitmq._amqp_map import decode_chunk
from streamwire.rabbitmq.protocol.frames import decode_frame
from streamwire.rabbitmq.protocol.machine import StreamsConnection
from streamwire.transport import h2wire
from streamwire.transport.h2machine import (
    ConnectionEnded,
    Flushed,
    H2Machine,
    H2Settings,
    Messages,
    Opened,
    StreamEnded,
)

__all__ = ("BUILT_SEEDS", "SEEDS", "TARGETS", "check")

VECTORS = Path(__file__).resolve().parent.parent / "tests" / "vectors"


def _rabbitmq_frame(data: bytes) -> None:
    decode_frame(data[4:] if len(data) >= 4 else data)


def _rabbitmq_chunk(data: bytes) -> None:
    decode_chunk(data, stream="fuzz", verify_crc=len(data) % 2 == 0)


def _rabbitmq_machine(data: bytes) -> None:
    """The connection machine in every handshake state it can reach, fed hostile bytes."""
    machine = StreamsConnection()
    machine.start(0.0)
    step = max(1, len(data) // 7 or 1)
    for i in range(0, len(data), step):
        machine.receive_data(data[i : i + step], float(i))
        machine.advance_time(float(i) + 100.0)


def _framing(data: bytes) -> None:
    for spec in (LENGTH_PREFIX_U32, IGGY_HEADER):
        acc = FrameAccumulator(spec, max_frame_size=1 << 16)
        acc.feed(data)
        for _ in acc.frames():
            pass


def _amqp_message(data: bytes) -> None:
    decode_message(data)


def _amqp_value(data: bytes) -> None:
    decode_value(data)


def _header_value(data: bytes) -> None:
    if data:
        HeaderValue.from_bytes(data[0], data[1:])


def _liftbridge(data: bytes) -> None:
    """The envelope, and the Ack (what arrives on the ack inbox) and Message payloads."""
    try:
        decode_envelope(data)
    finally:
        try:
            decode_ack(data)
        finally:
            decode_publish(data)


def _iggy_frame(data: bytes) -> None:
    try:
        decode_server_frame(data)
    finally:
        decode_request(data)


def _iggy_batch(data: bytes) -> None:
    decode_batches(Reader(data, frame="fuzz"))


def _iggy_tlv(data: bytes) -> None:
    try:
        decode_user_headers(data)
    finally:
        decode_options(data)


# --- the HTTP/2 client machine (transport/h2machine.py) ---------------------------------
#
# Input: ``[config][n][n control bytes][wire]``. ``wire`` is what the server sends after its
# first SETTINGS; each control byte is one step, ``kind = b & 7``, ``arg = b >> 3``:
# 0/1/2 receive the next ``(arg + 1) * 1 / 32 / 1024`` wire bytes; 3 advance the clock;
# 4 credit, 5 send, 6 reset a call; 7 arg 0 the server closes, 1 goodbye, 2 lost, odd open
# a call, ``arg % 4 == 2`` ``arg >> 2`` DATA frames of 16 KiB in one piece (a few KiB of
# input reach the flow-control limits so), else end_stream. Whatever wire is left arrives at
# the end, then the clock runs out. ``config``: bits 0-1 the calls opened first (one, one
# with a request, both, none); bit 2 small settings (32 KiB stream and 64 KiB connection
# windows, 16 KiB frames, 256-byte header blocks, 1 s keepalive); bit 3 the pure-Python
# gather_data; bit 4 no initial SETTINGS from the server.

_H2_MESSAGE_LIMIT: Final = 1 << 16
_H2_KINDS: Final = (Opened, Messages, Flushed, StreamEnded, ConnectionEnded)
_H2_SMALL: Final = H2Settings(
    window=32_768,
    connection_window=h2wire.DEFAULT_WINDOW,
    max_frame=h2wire.MIN_FRAME,
    max_header_block=256,
    keepalive_time=1.0,
    keepalive_timeout=2.0,
)


def _fail(message: str) -> NoReturn:
    raise AssertionError(message)


class _ObservedH2(H2Machine):
    """The machine, noting the largest SETTINGS_MAX_FRAME_SIZE the server ever set (frames
    it sends are checked against that, also when a later SETTINGS lowered it again)."""

    peer_frame_seen = h2wire.MIN_FRAME

    def _settings(self, flags: int, sid: int, payload: bytes) -> None:
        try:
            super()._settings(flags, sid, payload)
        finally:
            self.peer_frame_seen = max(self.peer_frame_seen, self._peer_max_frame)


class _PlainHpack(hpack.Encoder):
    """The client's HPACK encoder without Huffman coding: hpack's pure-Python coder takes
    time quadratic in a value's length, too slow for the header blocks long enough to need
    CONTINUATION (what is checked here is the framing, not the compression)."""

    def encode(self, headers: Any, huffman: bool = True) -> bytes:
        return super().encode(headers, huffman=False)


class _H2Run:
    """One input's run: drives the machine and checks, after every step, its events, what it
    queued for the server and its buffers. A violation is an AssertionError."""

    def __init__(self, config: int) -> None:
        small = bool(config & 4)
        self.settings = _H2_SMALL if small else H2Settings()
        self.tick = 0.25 if small else 20.0
        self.machine = _ObservedH2(self.settings, authority="x")
        self.machine._encoder = _PlainHpack()
        if config & 8:
            self.machine._gather = h2wire.gather_data_pure
        self.now = 0.0
        self.log: list[object] = []  # every event, in order
        self.calls: list[int] = []  # stream ids opened
        self.ended: set[int] = set()  # StreamEnded given
        self.cancelled: set[int] = set()  # reset() by the client returned True
        self.opened = False
        self.dead: ConnectionEnded | None = None
        self.dead_held = -1  # bytes in the input buffers once dead (they may not grow after)
        self.dead_drained = False
        # what went out: the preface, header blocks, each call's DATA against what it queued
        self.preface = False
        self.continuation: int | None = None
        self.last_headers = -1
        self.queued: dict[int, bytearray] = {}  # gRPC bytes queued and not yet seen sent
        self.half_closed: set[int] = set()  # END_STREAM sent
        self.rst_sent: set[int] = set()
        self.pads = 2  # header blocks long enough for CONTINUATION (slow to encode) left

    # --- steps ---------------------------------------------------------------------------

    def step(self, what: str, action: Callable[[], list[Any]]) -> None:
        """Run an action that returns events; it may not raise, whatever the server sent."""
        before = self.dead
        try:
            events: list[object] = list(action())
        except Exception as exc:
            raise AssertionError(f"{what} raised {exc!r}") from exc
        if before is not None and events:
            _fail(f"{what} after ConnectionEnded returned {events!r}")
        self.events(what, events)
        self.after(what)

    def call(self, what: str, action: Callable[[], object]) -> None:
        """Run an action documented not to raise."""
        try:
            action()
        except Exception as exc:
            raise AssertionError(f"{what} raised {exc!r}") from exc
        self.after(what)

    def receive(self, chunk: bytes) -> None:
        self.step(
            f"receive_data({len(chunk)} bytes)", lambda: self.machine.receive_data(chunk, self.now)
        )

    def open(self, request: bytes | None, pad: int = 0) -> None:
        m = self.machine
        if not m.can_open:
            return
        metadata = []
        if pad and self.pads:
            self.pads -= 1
            metadata.append(("x-pad", "a" * (h2wire.MIN_FRAME + pad)))  # > one frame
        try:
            sid = m.open_stream(
                "/p",
                lambda b: h2wire.split_messages(b, _H2_MESSAGE_LIMIT),
                request=request,
                metadata=metadata,
            )
        except Exception as exc:
            raise AssertionError(f"open_stream raised {exc!r} with can_open True") from exc
        if sid % 2 == 0 or sid in self.calls or (self.calls and sid < self.calls[-1]):
            _fail(f"open_stream gave stream id {sid} after {self.calls}")
        self.calls.append(sid)
        self.queued[sid] = bytearray()
        if request is not None:
            self.queued[sid] += len(request).to_bytes(5) + request
        self.after("open_stream")

    def bulk(self, frames: int) -> None:
        """DATA frames of 16 KiB (one whole gRPC message each) for a call, in one piece."""
        body = b"\x00" + (h2wire.MIN_FRAME - 5).to_bytes(4) + bytes(h2wire.MIN_FRAME - 5)
        self.receive(h2wire.encode_frame(h2wire.DATA, 0, self.pick(frames), body) * frames)

    def pick(self, arg: int) -> int:
        """A call opened (most args), or an id that may never have been one."""
        if arg >= 24 or not self.calls:
            return arg
        return self.calls[arg % len(self.calls)]

    def send(self, arg: int) -> None:
        sid, message = self.pick(arg), bytes((arg,)) * (arg * arg * 64)
        m = self.machine
        live, closing = sid in m._streams, sid in m._streams and m._streams[sid].closing
        try:
            m.send(sid, [message])
        except KeyError:
            if live:
                _fail(f"send raised KeyError for open call {sid}")
        except RuntimeError:
            if not closing:
                _fail(f"send raised RuntimeError for call {sid} not half-closed")
        except Exception as exc:
            raise AssertionError(f"send raised {exc!r}") from exc
        else:
            if sid not in self.queued or not live or closing:
                _fail(f"send accepted for call {sid} (open: {live}, closing: {closing})")
            self.queued[sid] += len(message).to_bytes(5) + message
        self.after("send")

    def reset(self, arg: int) -> None:
        sid = self.pick(arg)
        try:
            done = self.machine.reset(sid, arg)
        except Exception as exc:
            raise AssertionError(f"reset raised {exc!r}") from exc
        if done:
            if sid in self.ended or sid not in self.calls:
                _fail(f"reset of call {sid} returned True: it was over or never opened")
            self.cancelled.add(sid)
        self.after("reset")

    # --- checks --------------------------------------------------------------------------

    def events(self, what: str, events: list[object]) -> None:
        for ev in events:
            self.log.append(ev)
            if not isinstance(ev, _H2_KINDS):
                _fail(f"{what} returned {ev!r}, not an event")
            if self.dead is not None:
                _fail(f"{what}: {ev!r} after ConnectionEnded")
            if isinstance(ev, ConnectionEnded):
                left = [s for s in self.calls if s not in self.ended and s not in self.cancelled]
                if left:
                    _fail(f"{what}: ConnectionEnded before the StreamEnded of calls {left}")
                self.dead = ev
            elif isinstance(ev, Opened):
                if self.opened:
                    _fail(f"{what}: a second Opened")
                self.opened = True
            else:
                sid = ev.stream_id
                if sid not in self.calls or sid in self.cancelled:
                    _fail(f"{what}: {ev!r} for a stream not open (opened: {self.calls})")
                if sid in self.ended:
                    _fail(f"{what}: {ev!r} after the StreamEnded of stream {sid}")
                if isinstance(ev, StreamEnded):
                    self.ended.add(sid)
                elif isinstance(ev, Messages) and (
                    not ev.messages or ev.nbytes != sum(5 + len(b) for b in ev.messages)
                ):
                    _fail(f"{what}: {ev!r} counts wrong")
        if self.machine.ended is not self.dead:
            _fail(f"{what}: machine.ended is {self.machine.ended!r}, the event {self.dead!r}")

    def after(self, what: str) -> None:
        """What it queued for the server, and its buffers, after any step."""
        m = self.machine
        out = m.data_to_send()
        if not isinstance(out, bytes):
            _fail(f"data_to_send returned {type(out)}")
        if self.dead_drained and out:
            _fail(f"{what}: {out[:32].hex()}… queued after the connection ended")
        self.frames(what, out)
        live = [s for s in self.calls if s not in self.ended and s not in self.cancelled]
        if m.active != len(live) or m.opened != self.opened:
            _fail(f"{what}: active {m.active}, opened {m.opened}; the events say {live}")
        for sid in live:
            if m.buffered(sid) != len(m._streams[sid].out):
                _fail(f"{what}: buffered({sid}) is not what the call holds back")
            m.credit_owed(sid)
        held = len(m._inbuf) + len(m._header_block or b"")
        if self.dead is not None:
            # A connection error leaves what was being parsed in the buffers (at most the
            # bytes of that one receive_data): they may only not grow from then on.
            self.dead_drained = True
            if m.next_deadline() is not None:
                _fail(f"{what}: a deadline after the connection ended")
            if self.dead_held < 0:
                self.dead_held = held
            elif held > self.dead_held:
                _fail(f"{what}: the buffers grew after the connection ended")
        else:
            m.next_deadline()
            if len(m._inbuf) >= self.settings.max_frame + 9:
                _fail(f"{what}: {len(m._inbuf)} bytes left in the input buffer")
            if len(m._header_block or b"") > self.settings.max_header_block:
                _fail(f"{what}: a header block of {held - len(m._inbuf)} bytes kept")
        if m._conn_budget - m._conn_received > h2wire.MAX_WINDOW:
            _fail(f"{what}: the connection receive window went above 2**31-1")
        for st in m._streams.values():
            if len(st.msgbuf) >= _H2_MESSAGE_LIMIT + 5:
                _fail(f"{what}: {len(st.msgbuf)} bytes held for stream {st.id}")
            if st.budget - st.received > h2wire.MAX_WINDOW:
                _fail(f"{what}: the receive window of stream {st.id} went above 2**31-1")

    def frames(self, what: str, out: bytes) -> None:
        """``out`` is whole frames (after the preface, first) the client may send."""
        pos, end = 0, len(out)
        if not self.preface:
            if not out.startswith(h2wire.PREFACE):
                _fail(f"{what}: the first bytes sent are not the preface: {out[:32].hex()}")
            pos, self.preface = len(h2wire.PREFACE), True
        while pos < end:
            if end - pos < 9:
                _fail(f"{what}: a partial frame header sent: {out[pos:].hex()}")
            length, kind, flags = int.from_bytes(out[pos : pos + 3]), out[pos + 3], out[pos + 4]
            sid = int.from_bytes(out[pos + 5 : pos + 9])
            payload = out[pos + 9 : pos + 9 + length]
            if len(payload) < length:
                _fail(f"{what}: a partial frame sent ({len(payload)} of {length} bytes)")
            if length > self.machine.peer_frame_seen:
                _fail(f"{what}: a frame of {length} bytes > {self.machine.peer_frame_seen}")
            self.frame(what, kind, flags, sid, payload)
            pos += 9 + length

    def frame(self, what: str, kind: int, flags: int, sid: int, payload: bytes) -> None:
        where = f"{what}: frame {kind} flags {flags:#x} stream {sid}"
        if self.continuation is not None and (
            kind != h2wire.CONTINUATION or sid != self.continuation
        ):
            _fail(f"{where} inside the header block of stream {self.continuation}")
        if kind in (h2wire.HEADERS, h2wire.CONTINUATION):
            if kind == h2wire.HEADERS and (sid not in self.calls or sid <= self.last_headers):
                _fail(f"{where}: HEADERS out of order (opened {self.calls})")
            if kind == h2wire.CONTINUATION and self.continuation is None:
                _fail(f"{where}: CONTINUATION without HEADERS")
            self.last_headers = max(self.last_headers, sid)
            self.continuation = None if flags & h2wire.END_HEADERS else sid
        elif kind == h2wire.DATA:
            queued = self.queued.get(sid)
            if queued is None or sid in self.half_closed or sid in self.rst_sent:
                _fail(f"{where}: DATA on a stream not open for sending")
            if flags & ~h2wire.END_STREAM:
                _fail(f"{where}: unexpected DATA flags")
            if queued[: len(payload)] != payload:
                _fail(f"{where}: DATA is not what the call queued next")
            del queued[: len(payload)]
            if flags & h2wire.END_STREAM:
                if queued:
                    _fail(f"{where}: END_STREAM with {len(queued)} bytes queued unsent")
                self.half_closed.add(sid)
        elif kind == h2wire.RST_STREAM:
            if not sid or len(payload) != 4 or sid not in self.calls:
                _fail(f"{where}: bad RST_STREAM {payload.hex()}")
            self.rst_sent.add(sid)
        elif kind == h2wire.WINDOW_UPDATE:
            increment = int.from_bytes(payload) if len(payload) == 4 else 0
            if not 1 <= increment <= h2wire.MAX_WINDOW or (sid and sid not in self.calls):
                _fail(f"{where}: bad WINDOW_UPDATE {payload.hex()}")
        elif kind == h2wire.SETTINGS:
            if sid or len(payload) % 6 or (flags & h2wire.ACK and payload):
                _fail(f"{where}: bad SETTINGS {payload.hex()}")
        elif kind == h2wire.PING:
            if sid or len(payload) != 8:
                _fail(f"{where}: bad PING {payload.hex()}")
        elif kind == h2wire.GOAWAY:
            if sid or len(payload) < 8:
                _fail(f"{where}: bad GOAWAY {payload.hex()}")
        else:
            _fail(f"{where}: a frame type the client never sends")


def _h2_machine(data: bytes) -> list[object]:
    """The HTTP/2 client machine fed a server's bytes, cut and interleaved with the client's
    calls as the input says (layout above); returns the events it gave."""
    config = data[0] if data else 0
    n = data[1] if len(data) > 1 else 0
    control, wire = data[2 : 2 + n], data[2 + n :]
    run = _H2Run(config)
    m = run.machine
    run.call("start", lambda: m.start(0.0))
    if config & 3 in (0, 2):
        run.open(None)
    if config & 3 in (1, 2):
        run.open(b"r")
    if not config & 16:
        run.receive(h2wire.encode_frame(h2wire.SETTINGS, 0, 0))
    pos = 0
    for byte in control:
        kind, arg = byte & 7, byte >> 3
        if kind <= 2:
            chunk = wire[pos : pos + (arg + 1) * (1, 32, 1024)[kind]]
            pos += len(chunk)
            if chunk:
                run.receive(chunk)
        elif kind == 3:
            run.now += arg * run.tick
            run.step("advance_time", lambda: m.advance_time(run.now))
        elif kind == 4:
            run.call("credit", partial(m.credit, run.pick(arg)))
        elif kind == 5:
            run.send(arg)
        elif kind == 6:
            run.reset(arg)
        elif arg == 0:
            run.step("receive_data(b'')", lambda: m.receive_data(b"", run.now))
        elif arg == 1:
            run.call("goodbye", m.goodbye)
        elif arg == 2:
            run.step("lost", lambda: m.lost("fuzz"))
        elif arg % 2:
            run.open(b"r" if arg & 2 else None, pad=8 * arg if arg >= 16 else 0)
        elif arg % 4 == 2:
            run.bulk(arg >> 2)
        else:
            run.call("end_stream", partial(m.end_stream, run.pick(arg)))
    if pos < len(wire):
        run.receive(wire[pos:])
    for _ in range(3):  # a keepalive PING, then its timeout
        run.now += 16 * run.tick
        run.step("advance_time", lambda: m.advance_time(run.now))
    return run.log


def _h2_input(config: int, control: bytes, wire: bytes) -> bytes:
    return bytes((config, len(control))) + control + wire


def _op(kind: int, arg: int = 0) -> int:
    return kind | arg << 3


def _h2_seeds() -> list[bytes]:
    """Server byte streams a gRPC server sends (and some it should not), each with a few
    ways of cutting them and interleaving the client's calls."""
    frame, w = h2wire.encode_frame, h2wire
    message = b"\x00" + (3).to_bytes(4, "big") + b"abc"

    def headers(enc: hpack.Encoder, sid: int, *, continued: bool = False) -> bytes:
        head = enc.encode([(":status", "200"), ("content-type", "application/grpc")])
        if continued:
            return frame(w.HEADERS, 0, sid, head[:2]) + frame(
                w.CONTINUATION, w.END_HEADERS, sid, head[2:]
            )
        return frame(w.HEADERS, w.END_HEADERS, sid, head)

    def trailers(enc: hpack.Encoder, sid: int) -> bytes:
        block = enc.encode([("grpc-status", "0"), ("grpc-message", "")])
        return frame(w.HEADERS, w.END_HEADERS | w.END_STREAM, sid, block)

    def response(enc: hpack.Encoder, sid: int, *, continued: bool = False) -> list[bytes]:
        head = headers(enc, sid, continued=continued)
        return [head, frame(w.DATA, 0, sid, message), trailers(enc, sid)]

    settings = frame(
        w.SETTINGS,
        0,
        0,
        w.setting(w.SETTINGS_MAX_FRAME_SIZE, 32_768)
        + w.setting(w.SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)
        + w.setting(w.SETTINGS_MAX_CONCURRENT_STREAMS, 10)
        + w.setting(w.SETTINGS_HEADER_TABLE_SIZE, 0),
    )
    ack = frame(w.SETTINGS, w.ACK, 0)
    ping = frame(w.PING, 0, 0, b"pingpong")
    pong = frame(w.PING, w.ACK, 0, (1).to_bytes(8))

    def window(sid: int, increment: int) -> bytes:
        return frame(w.WINDOW_UPDATE, 0, sid, increment.to_bytes(4))

    def goaway(last: int, code: int, detail: bytes = b"") -> bytes:
        return frame(w.GOAWAY, 0, 0, last.to_bytes(4) + code.to_bytes(4) + detail)

    out: list[bytes] = []
    # one call, all at once; then byte by byte; then in 32-byte pieces with the client busy
    wire = ack + b"".join(response(hpack.Encoder(), 1))
    out.append(_h2_input(0, b"", wire))
    out.append(_h2_input(1, bytes(_op(0) for _ in range(len(wire))), wire))
    busy = bytes((_op(1), _op(4), _op(5, 3), _op(3, 1), _op(1), _op(7, 4), _op(2)))
    out.append(_h2_input(0, busy, wire))
    # the header block in HEADERS + CONTINUATION; DATA split and padded; a GOAWAY NO_ERROR
    enc = hpack.Encoder()
    head, data, tail = response(enc, 1, continued=True)
    padded = frame(w.DATA, w.PADDED, 1, b"\x02" + message[:4] + b"\x00\x00")
    rest = frame(w.DATA, 0, 1, message[4:])
    wire = ack + head + goaway(1, w.ErrorCode.NO_ERROR) + padded + rest + data + tail
    out.append(_h2_input(0, bytes((_op(0, 6), _op(1, 1), _op(4), _op(2))), wire))
    # two calls interleaved, the server's SETTINGS, PING, WINDOW_UPDATE, RST_STREAM
    enc = hpack.Encoder()  # header blocks encoded in the order they are sent
    wire = (
        ack
        + settings
        + headers(enc, 1)
        + headers(enc, 3)
        + ping
        + frame(w.DATA, 0, 3, message)
        + frame(w.DATA, 0, 1, message)
        + window(0, 1 << 16)
        + window(1, 1 << 16)
        + trailers(enc, 1)
        + frame(w.RST_STREAM, 0, 3, w.ErrorCode.CANCEL.to_bytes(4))
    )
    control = bytes((_op(5, 20), _op(1, 2), _op(4, 1), _op(5, 21), _op(1, 4), _op(6, 9)))
    out.append(_h2_input(2, control, wire))
    out.append(_h2_input(2 | 8, b"", wire))
    # GOAWAY ENHANCE_YOUR_CALM too_many_pings while two calls run
    enc = hpack.Encoder()
    wire = ack + response(enc, 1)[0] + goaway(3, w.ErrorCode.ENHANCE_YOUR_CALM, b"too_many_pings")
    out.append(_h2_input(2, b"", wire))
    # small windows: the client's sends wait for WINDOW_UPDATEs; keepalive PING answered
    enc = hpack.Encoder()
    call = response(enc, 1)
    wire = ack + call[0] + window(0, 1 << 20) + window(1, 1 << 20) + pong + call[1] + call[2]
    control = bytes((_op(5, 23), _op(5, 23), _op(5, 22), _op(0, 8), _op(3, 5), _op(2), _op(3, 9)))
    out.append(_h2_input(4, control, wire))
    # a stream's send window overflowed by SETTINGS; a header block above the limit
    raise_window = frame(
        w.SETTINGS, 0, 0, w.setting(w.SETTINGS_INITIAL_WINDOW_SIZE, h2wire.MAX_WINDOW)
    )
    wire = ack + headers(hpack.Encoder(), 1) + window(1, 0x7FFF0000) + raise_window
    out.append(_h2_input(0, b"", wire))
    big = hpack.Encoder().encode([(":status", "200"), ("x-big", "v" * 300)])
    out.append(_h2_input(4, b"", ack + frame(w.HEADERS, w.END_HEADERS, 1, big)))
    # small windows, receiving: the connection's WINDOW_UPDATE, a stream's window overrun,
    # then the connection's
    wire = ack + headers(hpack.Encoder(), 1) + headers(hpack.Encoder(), 3)
    control = bytes((_op(2), _op(7, 6), _op(4, 1), _op(7, 14), _op(7, 30)))
    out.append(_h2_input(4 | 2, control, wire))
    # no call at first: one opened by the input (with a large header block), then answered
    wire = ack + b"".join(response(hpack.Encoder(), 1))
    out.append(_h2_input(3, bytes((_op(7, 19), _op(2))), wire))
    # a run of DATA frames gathered at once, then trailers; through the pure gather
    enc = hpack.Encoder()
    head, data, tail = response(enc, 1)
    wire = ack + head + data * 5 + tail
    out.append(_h2_input(8, b"", wire))
    out.append(_h2_input(0, b"", wire))
    # not HTTP/2 at all; then a server that closes; then a keepalive that times out
    out.append(_h2_input(16, b"", b"HTTP/1.1 400 Bad Request\r\n\r\n"))
    out.append(_h2_input(0, bytes((_op(0, 8), _op(7, 0))), wire))
    out.append(_h2_input(4, bytes((_op(3, 8), _op(3, 16))), b""))
    # found by this target (2026-11-28): after a GOAWAY, the last call ending inside a run
    # of DATA ended the connection, and the frames after it ended it a second time
    out += [bytes.fromhex(h) for h in _H2_REGRESSIONS]
    return out


_H2_REGRESSIONS: Final = (
    "000000000004010000000000000e010400000001885f8b1d75d0620d263d4c4d656400000807000000"
    "000000000001000000000000060000000000010100000001610000080600000000053132333435363738",
    "000430090402000000040100000000000002010000000001885f00000c0904000000018b1d75d0620d"
    "263d4c4d6564000008070000000000000000010000000000000700f600000001020000000000000000"
    "040000000000fefc9e9d63000008000000000001000000000361626300001801050000000140889aca"
    "c8b21234da8f810740899acac8b5254207317f80",
)


TARGETS: dict[str, Callable[[bytes], object]] = {
    "rabbitmq-frame": _rabbitmq_frame,
    "rabbitmq-chunk": _rabbitmq_chunk,
    "rabbitmq-machine": _rabbitmq_machine,
    "framing": _framing,
    "amqp-message": _amqp_message,
    "amqp-value": _amqp_value,
    "header-value": _header_value,
    "liftbridge-envelope": _liftbridge,
    "iggy-frame": _iggy_frame,
    "iggy-batch": _iggy_batch,
    "iggy-tlv": _iggy_tlv,
    "h2-machine": _h2_machine,
}
SEEDS: dict[str, str] = {  # target -> vector folder (every *.hex in it seeds the corpus)
    "rabbitmq-frame": "rabbitmq",
    "rabbitmq-chunk": "rabbitmq",
    "rabbitmq-machine": "rabbitmq",
    "framing": "rabbitmq",
    "amqp-message": "rabbitmq",
    "amqp-value": "rabbitmq",
    "header-value": "rabbitmq",
    "liftbridge-envelope": "liftbridge",
    "iggy-frame": "iggy",
    "iggy-batch": "iggy",
    "iggy-tlv": "iggy",
}
BUILT_SEEDS: dict[str, Callable[[], list[bytes]]] = {  # target -> seeds built in code
    "h2-machine": _h2_seeds,
}


def seeds(target: str) -> list[bytes]:
    """The seed corpus of a target: the golden vectors of its protocol (hex files), or the
    inputs built in code for a target without vectors (:data:`BUILT_SEEDS`)."""
    if target in BUILT_SEEDS:
        return BUILT_SEEDS[target]()
    folder = VECTORS / SEEDS.get(target, "rabbitmq")
    out: list[bytes] = []
    for path in sorted(folder.glob("*.hex")):
        text = "".join(
            line.split("#", 1)[0] for line in path.read_text().splitlines() if line.strip()
        )
        try:
            out.append(bytes.fromhex("".join(text.replace("|", " ").split())))
        except ValueError:
            continue
    return out


def check(target: str, data: bytes) -> None:
    """Run one input; re-raise anything that is not a streamwire error."""
    with contextlib.suppress(StreamwireError):
        TARGETS[target](data)
