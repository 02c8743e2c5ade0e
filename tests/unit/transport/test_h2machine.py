"""``streamwire.transport.h2machine.H2Machine`` (the sans-IO HTTP/2 client of gRPC calls)
against an independent HTTP/2 peer: the ``h2`` package's server-side ``H2Connection``, also
sans-IO. Bytes are pumped between the two in memory and time is a float passed in, so
there are no sockets and no sleeps.

Checked: two calls sharing one connection (a server-streaming one and a bidirectional one,
answered interleaved); per-stream flow control (the connection window credited as DATA
arrives, a stream's window only by ``credit``, a stalled call not blocking another); large
messages both ways (a 5 MiB response in many DATA frames, a request larger than the
server's windows); header blocks continued in CONTINUATION frames; GOAWAY (graceful and
with an error code, "too_many_pings"); the server's RST_STREAM codes as gRPC statuses; the
codes of the client's own RST_STREAM and GOAWAY, read by h2; keepalive PINGs and their
timeout; SETTINGS_MAX_CONCURRENT_STREAMS; a peer that does not answer in HTTP/2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import h2.events
import h2.exceptions
import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.settings import SettingCodes

from streamwire.transport import h2wire as w
from streamwire.transport.h2machine import (
    ConnectionEnded,
    Event,
    Flushed,
    H2Machine,
    H2Settings,
    Messages,
    Opened,
    StreamEnded,
)
from streamwire.transport.h2wire import Status, split_messages

E = TypeVar("E", bound=h2.events.Event)

RESPONSE = [(":status", "200"), ("content-type", "application/grpc")]


def split(buf: bytearray) -> tuple[list[Any], int, int]:
    """The plain ``split`` of a call: whole messages of up to 16 MiB."""
    return split_messages(buf, 1 << 24)


def grpc(body: bytes) -> bytes:
    """One length-prefixed gRPC message (not compressed)."""
    return b"\x00" + len(body).to_bytes(4, "big") + body


def messages_of(events: Sequence[Event], stream_id: int) -> list[Any]:
    """The messages the events hand out for one call, in order."""
    return [
        m
        for e in events
        if isinstance(e, Messages) and e.stream_id == stream_id
        for m in e.messages
    ]


def can_open(m: H2Machine) -> bool:
    """``m.can_open``, read afresh (an attribute asserted once stays narrowed for mypy)."""
    return m.can_open


def connection_end(m: H2Machine) -> ConnectionEnded | None:
    """``m.ended``, read afresh (as :func:`can_open`)."""
    return m.ended


def header_map(headers: Sequence[tuple[bytes | str, bytes | str]]) -> dict[str, str]:
    """Headers h2 decoded (str with ``header_encoding``; typed as bytes too) by name."""
    return {as_text(n): as_text(v) for n, v in headers}


def as_text(value: bytes | str) -> str:
    return value if isinstance(value, str) else value.decode()


def ended_of(events: Sequence[Event]) -> dict[int, StreamEnded]:
    return {e.stream_id: e for e in events if isinstance(e, StreamEnded)}


class Pair:
    """An :class:`H2Machine` and an h2 server connection, wired together in memory."""

    def __init__(
        self,
        settings: H2Settings | None = None,
        *,
        server_settings: dict[SettingCodes | int, int] | None = None,
        auto_ack: bool = False,
    ) -> None:
        self.machine = H2Machine(settings or H2Settings(), authority="localhost")
        self.server = H2Connection(H2Configuration(client_side=False, header_encoding="utf-8"))
        self.server.initiate_connection()
        if server_settings:
            self.server.update_settings(server_settings)
        self.now = 0.0
        self.auto_ack = auto_ack
        self.seen: list[h2.events.Event] = []
        """What h2 made of the machine's bytes."""
        self.frames: list[tuple[int, int, int, int]] = []
        """The frames h2 sent: (type, flags, stream, length)."""
        self.machine.start(self.now)

    def to_server(self) -> bool:
        """Feed the machine's pending bytes to h2; whether there were any."""
        out = self.machine.data_to_send()
        if not out:
            return False
        events = self.server.receive_data(out)
        self.seen += events
        if self.auto_ack:
            for e in events:
                if isinstance(e, h2.events.DataReceived) and e.flow_controlled_length:
                    self.server.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        return True

    def from_server(self) -> bytes:
        """h2's pending bytes (whole frames), recorded in :attr:`frames`, not delivered."""
        data = self.server.data_to_send()
        pos = 0
        while pos < len(data):
            length = int.from_bytes(data[pos : pos + 3], "big")
            sid = int.from_bytes(data[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
            self.frames.append((data[pos + 3], data[pos + 4], sid, length))
            pos += 9 + length
        assert pos == len(data)
        return data

    def deliver(self, data: bytes) -> list[Event]:
        return self.machine.receive_data(data, self.now)

    def pump(self) -> list[Event]:
        """Move bytes both ways until neither side has any; the machine's events."""
        events: list[Event] = []
        while True:
            moved = self.to_server()
            back = self.from_server()
            if back:
                events += self.deliver(back)
            if not moved and not back:
                return events

    def seen_of(self, kind: type[E]) -> list[E]:
        return [e for e in self.seen if isinstance(e, kind)]

    def bodies(self) -> dict[int, bytes]:
        """The request bytes h2 received, per stream."""
        out: dict[int, bytes] = {}
        for e in self.seen_of(h2.events.DataReceived):
            out[e.stream_id] = out.get(e.stream_id, b"") + e.data
        return out

    def send_body(self, stream_id: int, data: bytes) -> int:
        """Send as much of ``data`` as h2's windows and frame size allow; how much."""
        sent = 0
        view = memoryview(data)
        while sent < len(data):
            room = min(
                len(data) - sent,
                self.server.local_flow_control_window(stream_id),
                self.server.max_outbound_frame_size,
            )
            if room <= 0:
                break
            self.server.send_data(stream_id, bytes(view[sent : sent + room]))
            sent += room
        return sent

    def finish(self, stream_id: int, status: str = "0", message: str | None = None) -> None:
        trailers = [("grpc-status", status)]
        if message is not None:
            trailers.append(("grpc-message", message))
        self.server.send_headers(stream_id, trailers, end_stream=True)


def connect(
    settings: H2Settings | None = None,
    *,
    server_settings: dict[SettingCodes | int, int] | None = None,
    auto_ack: bool = False,
) -> Pair:
    """A pair past the SETTINGS exchange, with what h2 saw of it forgotten."""
    pair = Pair(settings, server_settings=server_settings, auto_ack=auto_ack)
    events = pair.pump()
    assert events == [Opened()]
    assert pair.machine.opened
    pair.seen.clear()
    pair.frames.clear()
    return pair


# --- several calls ---------------------------------------------------------------------


def test_two_calls_on_one_connection() -> None:
    p = connect()
    m = p.machine
    sub = m.open_stream("/pkg.Svc/Subscribe", split, request=b"subscribe-me")
    bidi = m.open_stream("/pkg.Svc/Bidi", split, metadata=[("x-tag", "t1")])
    assert (sub, bidi) == (1, 3)
    m.send(bidi, [b"one", b"", b"three"])
    m.end_stream(bidi)
    assert m.active == 2

    assert p.pump() == []
    requests = {e.stream_id: header_map(e.headers) for e in p.seen_of(h2.events.RequestReceived)}
    assert set(requests) == {1, 3}
    for sid, path in ((1, "/pkg.Svc/Subscribe"), (3, "/pkg.Svc/Bidi")):
        headers = requests[sid]
        assert headers[":method"] == "POST"
        assert headers[":path"] == path
        assert headers[":scheme"] == "http"
        assert headers[":authority"] == "localhost"
        assert headers["content-type"] == "application/grpc"
        assert headers["te"] == "trailers"
    assert requests[3]["x-tag"] == "t1"
    assert p.bodies() == {1: grpc(b"subscribe-me"), 3: grpc(b"one") + grpc(b"") + grpc(b"three")}
    assert {e.stream_id for e in p.seen_of(h2.events.StreamEnded)} == {1, 3}

    s = p.server
    s.send_headers(1, RESPONSE)
    s.send_headers(3, RESPONSE)
    s.send_data(3, grpc(b"r3a"))
    s.send_data(1, grpc(b"r1a"))
    s.send_data(1, grpc(b"r1b") + grpc(b"r1c"))
    s.send_data(3, grpc(b"r3b"))
    p.finish(3)
    p.finish(1)
    events = p.pump()

    assert messages_of(events, 1) == [b"r1a", b"r1b", b"r1c"]
    assert messages_of(events, 3) == [b"r3a", b"r3b"]
    nbytes = sum(e.nbytes for e in events if isinstance(e, Messages) and e.stream_id == 1)
    assert nbytes == len(grpc(b"r1a") + grpc(b"r1b") + grpc(b"r1c"))
    ends = [e for e in events if isinstance(e, StreamEnded)]
    assert [(e.stream_id, e.ended.code, e.failure) for e in ends] == [(3, 0, None), (1, 0, None)]
    # each call's messages came before its end
    for e in ends:
        assert all(
            events.index(x) < events.index(e)
            for x in events
            if isinstance(x, Messages) and x.stream_id == e.stream_id
        )
    assert m.active == 0
    assert m.ended is None
    assert p.seen_of(h2.events.StreamReset) == []
    assert p.seen_of(h2.events.ConnectionTerminated) == []


# --- flow control ----------------------------------------------------------------------


def test_stream_window_is_credited_only_by_credit() -> None:
    # connection window 128 KiB so that its credit (at a quarter of it) shows early
    p = connect(H2Settings(window=65536, connection_window=131072))
    m, s = p.machine, p.server
    m.open_stream("/pkg.Svc/A", split, request=b"a")
    m.open_stream("/pkg.Svc/B", split, request=b"b")
    p.pump()
    assert s.remote_settings.initial_window_size == 65536
    assert s.outbound_flow_control_window == 131072
    s.send_headers(1, RESPONSE)
    s.send_headers(3, RESPONSE)
    parts = [bytes([i]) * 30000 for i in range(4)]
    body = b"".join(grpc(x) for x in parts)  # 120020 bytes: more than a stream window

    sent = p.send_body(1, body)
    assert sent == 65536  # h2 holds the rest back
    assert s.local_flow_control_window(1) == 0
    with pytest.raises(h2.exceptions.FlowControlError):
        s.send_data(1, b"x")
    events = p.pump()
    assert messages_of(events, 1) == parts[:2]
    updates = [(e.stream_id, e.delta) for e in p.seen_of(h2.events.WindowUpdated)]
    assert updates == [(0, 65536)]  # the connection's, as DATA arrived; not stream 1's
    assert m.credit_owed(1)
    assert s.local_flow_control_window(1) == 0

    # the stalled call does not hold back the other
    assert p.send_body(3, grpc(b"three")) == len(grpc(b"three"))
    p.finish(3)
    events = p.pump()
    assert messages_of(events, 3) == [b"three"]
    assert [(e.stream_id, e.ended.code) for e in events if isinstance(e, StreamEnded)] == [(3, 0)]
    assert s.local_flow_control_window(1) == 0

    p.seen.clear()
    m.credit(1)
    assert not m.credit_owed(1)
    p.pump()
    assert [(e.stream_id, e.delta) for e in p.seen_of(h2.events.WindowUpdated)] == [(1, 65536)]
    assert s.local_flow_control_window(1) == 65536
    rest = body[sent:]
    assert p.send_body(1, rest) == len(rest)
    p.finish(1)
    events = p.pump()
    assert messages_of(events, 1) == parts[2:]
    assert [(e.stream_id, e.ended.code) for e in events if isinstance(e, StreamEnded)] == [(1, 0)]


# --- large messages --------------------------------------------------------------------


def test_five_mib_message_in_many_frames_arrives_whole() -> None:
    p = connect(H2Settings(max_frame=16384))
    m, s = p.machine, p.server
    sid = m.open_stream("/pkg.Svc/Big", split, request=b"")
    p.pump()
    assert s.max_outbound_frame_size == 16384
    payload = bytes(range(256)) * (5 * 4096)  # 5 MiB
    body = grpc(payload)
    s.send_headers(sid, RESPONSE)
    events: list[Event] = []
    pos = 0
    while pos < len(body):
        n = p.send_body(sid, body[pos:])
        assert n > 0
        pos += n
        events += p.pump()
        m.credit(sid)
        events += p.pump()
    p.finish(sid)
    events += p.pump()

    data_frames = [f for f in p.frames if f[0] == w.DATA and f[2] == sid]
    assert len(data_frames) > 300
    assert all(f[3] <= 16384 for f in data_frames)
    got = [e for e in events if isinstance(e, Messages)]
    assert len(got) == 1
    assert got[0].nbytes == len(body)
    assert got[0].messages == [payload]
    assert ended_of(events)[sid].ended.code == 0


def test_request_larger_than_the_servers_windows() -> None:
    p = connect(auto_ack=True)
    m, s = p.machine, p.server
    assert s.local_settings.initial_window_size == 65535
    request = bytes(range(251)) * 800  # 200800 bytes
    sid = m.open_stream("/pkg.Svc/Upload", split, request=request)
    # the server's windows (64 KiB - 1) hold back the rest
    assert m.buffered(sid) == len(grpc(request)) - 65535
    events = p.pump()
    assert m.buffered(sid) == 0
    assert Flushed(sid) in events
    assert p.bodies() == {sid: grpc(request)}
    assert all(len(e.data) <= 16384 for e in p.seen_of(h2.events.DataReceived))
    assert [e.stream_id for e in p.seen_of(h2.events.StreamEnded)] == [sid]
    s.send_headers(sid, RESPONSE)
    p.finish(sid)
    assert ended_of(p.pump())[sid].ended.code == 0


# --- CONTINUATION ----------------------------------------------------------------------


def test_header_blocks_continued() -> None:
    p = connect(H2Settings(max_frame=16384))
    m, s = p.machine, p.server
    sid = m.open_stream("/pkg.Svc/Cont", split, request=b"q")
    p.pump()
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    big = "".join(letters[(i * 7) % len(letters)] for i in range(40000))
    text = " ".join(f"part {i} of a long plain status message." for i in range(1500))
    s.send_headers(sid, [*RESPONSE, ("x-big", big)])
    s.send_data(sid, grpc(b"payload"))
    p.finish(sid, "9", text)
    events = p.pump()

    kinds = [(f[0], f[1] & w.END_HEADERS) for f in p.frames if f[2] == sid]
    data_at = kinds.index((w.DATA, 0))
    # the response headers, then the trailers: each a HEADERS without END_HEADERS, then
    # CONTINUATION frames, the last with END_HEADERS
    for block in (kinds[:data_at], kinds[data_at + 1 :]):
        assert block[0] == (w.HEADERS, 0)
        assert len(block) >= 2
        assert block[1:-1] == [(w.CONTINUATION, 0)] * (len(block) - 2)
        assert block[-1] == (w.CONTINUATION, w.END_HEADERS)
    assert all(f[3] <= 16384 for f in p.frames)
    assert messages_of(events, sid) == [b"payload"]
    ended = ended_of(events)[sid].ended
    assert ended.code == 9
    assert ended.message == text


# --- GOAWAY ----------------------------------------------------------------------------


def test_graceful_goaway() -> None:
    p = connect()
    m, s = p.machine, p.server
    m.open_stream("/pkg.Svc/A", split, request=b"a")
    m.open_stream("/pkg.Svc/B", split, request=b"b")
    p.pump()
    s.send_headers(1, RESPONSE)
    s.send_data(1, grpc(b"before"))
    first = p.from_server()
    # what finishes call 1 is made now (h2 sends nothing once it sent GOAWAY) and
    # delivered after the GOAWAY, as a server finishing its last call would
    s.send_data(1, grpc(b"after"))
    p.finish(1)
    rest = p.from_server()
    s.close_connection(error_code=0, last_stream_id=1)
    goaway = p.from_server()

    assert messages_of(p.deliver(first), 1) == [b"before"]
    events = p.deliver(goaway)
    assert len(events) == 1
    assert isinstance(events[0], StreamEnded)
    assert events[0].stream_id == 3
    assert events[0].ended.code == Status.UNAVAILABLE
    assert "GOAWAY" in events[0].ended.message
    assert m.ended is None
    assert m.active == 1
    assert not can_open(m)
    with pytest.raises(RuntimeError):
        m.open_stream("/pkg.Svc/C", split, request=b"c")

    events = p.deliver(rest)
    assert messages_of(events, 1) == [b"after"]
    assert [type(e) for e in events if not isinstance(e, Messages)] == [
        StreamEnded,
        ConnectionEnded,
    ]
    assert ended_of(events)[1].ended.code == 0
    end = events[-1]
    assert isinstance(end, ConnectionEnded)
    assert end.error_code == 0
    assert not end.too_many_pings
    assert not end.not_http2
    assert connection_end(m) is end
    assert not can_open(m)


def test_goaway_with_an_error_ends_every_call() -> None:
    p = connect()
    m, s = p.machine, p.server
    m.open_stream("/pkg.Svc/A", split, request=b"a")
    m.open_stream("/pkg.Svc/B", split, request=b"b")
    p.pump()
    s.send_headers(1, RESPONSE)
    s.close_connection(
        error_code=ErrorCodes.ENHANCE_YOUR_CALM, additional_data=b"too_many_pings", last_stream_id=3
    )
    events = p.pump()
    assert [type(e) for e in events] == [StreamEnded, StreamEnded, ConnectionEnded]
    ends = ended_of(events)
    assert sorted(ends) == [1, 3]  # even the calls the server had taken (error code)
    assert all(e.ended.code == Status.UNAVAILABLE for e in ends.values())
    end = events[-1]
    assert isinstance(end, ConnectionEnded)
    assert end.error_code == w.ErrorCode.ENHANCE_YOUR_CALM
    assert end.too_many_pings
    assert end.ended.code == Status.UNAVAILABLE
    assert "too_many_pings" in end.ended.message
    assert m.ended is end
    assert not can_open(m)
    assert m.active == 0
    assert m.next_deadline() is None


# --- RST_STREAM from the server --------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ErrorCodes.CANCEL, Status.CANCELLED),
        (ErrorCodes.REFUSED_STREAM, Status.UNAVAILABLE),
        (ErrorCodes.INTERNAL_ERROR, Status.INTERNAL),
        (ErrorCodes.PROTOCOL_ERROR, Status.INTERNAL),
        (ErrorCodes.NO_ERROR, Status.INTERNAL),
        (ErrorCodes.ENHANCE_YOUR_CALM, Status.RESOURCE_EXHAUSTED),
        (ErrorCodes.INADEQUATE_SECURITY, Status.PERMISSION_DENIED),
    ],
)
def test_server_reset_stream(code: ErrorCodes, status: int) -> None:
    p = connect()
    m, s = p.machine, p.server
    m.open_stream("/pkg.Svc/A", split, request=b"a")
    m.open_stream("/pkg.Svc/B", split, request=b"b")
    p.pump()
    s.send_headers(1, RESPONSE)
    s.send_headers(3, RESPONSE)
    s.reset_stream(1, error_code=code)
    events = p.pump()
    assert list(ended_of(events)) == [1]
    assert ended_of(events)[1].ended.code == status
    assert m.active == 1

    s.send_data(3, grpc(b"still here"))
    p.finish(3)
    events = p.pump()
    assert messages_of(events, 3) == [b"still here"]
    assert ended_of(events)[3].ended.code == 0
    assert m.ended is None
    assert p.seen_of(h2.events.StreamReset) == []


# --- the client's own errors, as h2 reads them -----------------------------------------


def test_client_reset_is_cancel() -> None:
    p = connect()
    m, s = p.machine, p.server
    sid = m.open_stream("/pkg.Svc/Bidi", split)
    p.pump()
    s.send_headers(sid, RESPONSE)
    s.send_data(sid, grpc(b"in flight"))
    in_flight = p.from_server()

    assert m.reset(sid)
    assert not m.reset(sid)
    assert m.active == 0
    assert p.deliver(in_flight) == []  # frames of a call the client reset: ignored
    p.pump()
    resets = p.seen_of(h2.events.StreamReset)
    assert [(e.stream_id, e.error_code) for e in resets] == [(sid, ErrorCodes.CANCEL)]
    # the connection goes on (HPACK still in step)
    sid2 = m.open_stream("/pkg.Svc/Next", split, request=b"n")
    p.pump()
    s.send_headers(sid2, RESPONSE)
    p.finish(sid2, "5", "not found")
    ended = ended_of(p.pump())[sid2].ended
    assert (ended.code, ended.message) == (5, "not found")


def test_message_over_the_split_limit_is_cancel() -> None:
    p = connect()
    m, s = p.machine, p.server
    sid = m.open_stream("/pkg.Svc/A", lambda b: split_messages(b, 10), request=b"a")
    p.pump()
    s.send_headers(sid, RESPONSE)
    s.send_data(sid, grpc(b"x" * 100))
    events = p.pump()
    assert messages_of(events, sid) == []
    end = ended_of(events)[sid]
    assert end.ended.code == Status.RESOURCE_EXHAUSTED
    assert end.failure is None
    resets = p.seen_of(h2.events.StreamReset)
    assert [(e.stream_id, e.error_code) for e in resets] == [(sid, ErrorCodes.CANCEL)]


def test_incomplete_message_over_max_message_is_cancel() -> None:
    p = connect()
    m, s = p.machine, p.server
    sid = m.open_stream("/pkg.Svc/A", split, request=b"a", max_message=100)
    p.pump()
    s.send_headers(sid, RESPONSE)
    s.send_data(sid, grpc(b"y" * 1000)[:300])  # announced 1000 bytes, 295 of them so far
    events = p.pump()
    end = ended_of(events)[sid]
    assert end.ended.code == Status.RESOURCE_EXHAUSTED
    resets = p.seen_of(h2.events.StreamReset)
    assert [(e.stream_id, e.error_code) for e in resets] == [(sid, ErrorCodes.CANCEL)]


def test_undecodable_message_is_cancel_with_the_failure() -> None:
    bad = ValueError("not a valid message")

    def refuse(buf: bytearray) -> tuple[list[Any], int, int]:
        raise bad

    p = connect()
    m, s = p.machine, p.server
    sid = m.open_stream("/pkg.Svc/A", refuse)
    other = m.open_stream("/pkg.Svc/B", split, request=b"b")
    p.pump()
    s.send_headers(sid, RESPONSE)
    s.send_data(sid, grpc(b"garbage"))
    events = p.pump()
    end = ended_of(events)[sid]
    assert end.failure is bad
    assert end.ended.code == Status.INTERNAL
    assert "not a valid message" in end.ended.message
    resets = p.seen_of(h2.events.StreamReset)
    assert [(e.stream_id, e.error_code) for e in resets] == [(sid, ErrorCodes.CANCEL)]
    assert m.active == 1
    s.send_headers(other, RESPONSE)
    p.finish(other)
    assert ended_of(p.pump())[other].ended.code == 0


def test_frame_larger_than_max_frame_is_frame_size_error() -> None:
    p = connect(H2Settings(max_frame=16384))
    m, s = p.machine, p.server
    sid = m.open_stream("/pkg.Svc/A", split, request=b"a")
    p.pump()
    s.send_headers(sid, RESPONSE)
    p.pump()
    events = p.deliver(w.encode_frame(w.DATA, 0, sid, grpc(b"z" * 16380)))  # 16385 bytes
    assert [type(e) for e in events] == [StreamEnded, ConnectionEnded]
    assert ended_of(events)[sid].ended.code == Status.INTERNAL
    end = events[-1]
    assert isinstance(end, ConnectionEnded)
    assert end.error_code == w.ErrorCode.FRAME_SIZE_ERROR
    assert p.to_server()
    terminated = p.seen_of(h2.events.ConnectionTerminated)
    assert [e.error_code for e in terminated] == [ErrorCodes.FRAME_SIZE_ERROR]
    assert not can_open(m)


@pytest.mark.parametrize("how", ["data", "trailers"])
def test_server_ending_while_the_client_sends_is_no_error(how: str) -> None:
    p = connect()
    m, s = p.machine, p.server
    sid = m.open_stream("/pkg.Svc/Bidi", split)
    m.send(sid, [b"hello"])
    p.pump()
    s.send_headers(sid, RESPONSE)
    if how == "data":
        s.send_data(sid, grpc(b"bye"), end_stream=True)
    else:
        s.send_data(sid, grpc(b"bye"))
        p.finish(sid)
    events = p.pump()
    assert messages_of(events, sid) == [b"bye"]
    end = ended_of(events)[sid]
    assert end.ended.code == (Status.INTERNAL if how == "data" else 0)
    resets = p.seen_of(h2.events.StreamReset)
    assert [(e.stream_id, e.error_code) for e in resets] == [(sid, ErrorCodes.NO_ERROR)]
    with pytest.raises(KeyError):
        m.send(sid, [b"more"])
    assert m.ended is None


# --- keepalive -------------------------------------------------------------------------


def keepalive_pair() -> tuple[Pair, int]:
    """A pair with a call open whose response headers arrived at t=2."""
    p = connect(H2Settings(keepalive_time=10, keepalive_timeout=5))
    sid = p.machine.open_stream("/pkg.Svc/Quiet", split, request=b"q")
    p.pump()
    p.now = 2.0
    p.server.send_headers(sid, RESPONSE)
    assert p.pump() == []
    return p, sid


def pings(p: Pair) -> list[bytes]:
    return [e.ping_data for e in p.seen_of(h2.events.PingReceived)]


def test_keepalive_ping_and_its_ack() -> None:
    p, _ = keepalive_pair()
    m = p.machine
    assert m.next_deadline() == 12.0
    assert m.advance_time(11.9) == []
    assert m.data_to_send() == b""
    assert m.advance_time(12.0) == []
    assert p.to_server()
    assert len(pings(p)) == 1
    assert m.next_deadline() == 17.0
    p.now = 13.0
    assert p.pump() == []  # h2's PING ACK
    assert m.next_deadline() == 23.0
    assert m.advance_time(17.0) == []
    assert m.data_to_send() == b""
    assert m.ended is None


def test_keepalive_timeout_ends_the_connection() -> None:
    p, sid = keepalive_pair()
    m = p.machine
    other = m.open_stream("/pkg.Svc/Other", split, request=b"o")
    p.to_server()
    p.from_server()
    assert m.advance_time(12.0) == []
    p.to_server()
    assert len(pings(p)) == 1
    p.from_server()  # the ACK is lost
    assert m.advance_time(16.9) == []
    events = m.advance_time(17.0)
    assert [type(e) for e in events] == [StreamEnded, StreamEnded, ConnectionEnded]
    ends = ended_of(events)
    assert sorted(ends) == [sid, other]
    assert all(e.ended.code == Status.UNAVAILABLE for e in ends.values())
    end = events[-1]
    assert isinstance(end, ConnectionEnded)
    assert end.ended.code == Status.UNAVAILABLE
    assert "keepalive" in end.ended.message
    assert m.ended is end
    assert m.next_deadline() is None


def test_any_bytes_after_the_ping_count_as_alive() -> None:
    p, sid = keepalive_pair()
    m, s = p.machine, p.server
    assert m.advance_time(12.0) == []
    p.to_server()
    first = pings(p)
    assert len(first) == 1
    p.from_server()  # the ACK is lost
    p.now = 14.0
    s.send_data(sid, grpc(b"news"))
    assert messages_of(p.pump(), sid) == [b"news"]
    assert m.advance_time(17.0) == []
    assert m.ended is None
    assert m.data_to_send() == b""
    assert m.next_deadline() == 24.0
    assert m.advance_time(24.0) == []
    p.to_server()
    again = pings(p)
    assert len(again) == 2
    assert again[1] != again[0]


def test_no_keepalive_without_calls() -> None:
    p = connect(H2Settings(keepalive_time=10, keepalive_timeout=5))
    m, s = p.machine, p.server
    assert m.next_deadline() is None
    assert m.advance_time(1000.0) == []
    assert m.data_to_send() == b""
    sid = m.open_stream("/pkg.Svc/A", split, request=b"a")
    p.pump()
    assert m.next_deadline() == 10.0
    p.now = 3.0
    s.send_headers(sid, RESPONSE)
    p.finish(sid)
    assert ended_of(p.pump())[sid].ended.code == 0
    assert m.next_deadline() is None
    assert m.advance_time(2000.0) == []
    assert m.data_to_send() == b""
    assert pings(p) == []


# --- SETTINGS_MAX_CONCURRENT_STREAMS ---------------------------------------------------


def test_max_concurrent_streams() -> None:
    p = Pair(server_settings={SettingCodes.MAX_CONCURRENT_STREAMS: 1})
    m = p.machine
    assert p.pump() == [Opened()]
    assert can_open(m)
    sid = m.open_stream("/pkg.Svc/A", split, request=b"a")
    assert not can_open(m)
    with pytest.raises(RuntimeError):
        m.open_stream("/pkg.Svc/B", split, request=b"b")
    p.pump()
    assert [e.stream_id for e in p.seen_of(h2.events.RequestReceived)] == [sid]
    p.server.send_headers(sid, RESPONSE)
    p.finish(sid)
    assert ended_of(p.pump())[sid].ended.code == 0
    assert can_open(m)
    assert m.open_stream("/pkg.Svc/B", split, request=b"b") == 3
    assert not can_open(m)


# --- not HTTP/2 ------------------------------------------------------------------------


def test_first_frame_not_settings_is_not_http2() -> None:
    m = H2Machine(H2Settings(), authority="localhost")
    m.start(0.0)
    sid = m.open_stream("/pkg.Svc/A", split, request=b"a")
    assert m.data_to_send().startswith(w.PREFACE)
    events = m.receive_data(b"HTTP/1.1 400 Bad Request\r\n\r\n", 1.0)
    assert [type(e) for e in events] == [StreamEnded, ConnectionEnded]
    assert ended_of(events)[sid].ended.code == Status.UNAVAILABLE
    end = events[-1]
    assert isinstance(end, ConnectionEnded)
    assert end.not_http2
    assert end.error_code is None
    assert end.ended.code == Status.UNAVAILABLE
    assert not m.opened
    assert not can_open(m)
    assert m.data_to_send() == b""
