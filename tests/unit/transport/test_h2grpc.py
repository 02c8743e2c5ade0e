"""``streamwire.transport.h2grpc`` against a scripted in-process HTTP/2 server.

The server is hand framing plus ``hpack``: it reads the client's preface and frames, and
writes what each test scripts. Checked: the request (preface, SETTINGS, HEADERS, the
length-prefixed request), messages split across DATA frames (padded or not), PING acks,
header blocks continued, trailers and trailers-only responses, RST_STREAM/GOAWAY/a closed
connection as gRPC statuses, a peer that is not HTTP/2, flow control (credit only when the
sink has room; an overrun window is a connection error) and malformed input.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator, Awaitable, Callable

import hpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamwire.errors import ConnectError
from streamwire.transport import h2grpc
from streamwire.transport.h2grpc import (
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    PADDED,
    PING,
    PRIORITY_FLAG,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    CallEnded,
    GrpcStreamProtocol,
    NotHttp2,
    Status,
    encode_frame,
    split_messages,
)
from tests.proxy import wait_until

BUDGET = 5.0
Frame = tuple[int, int, int, bytes]  # type, flags, stream, payload


def grpc_message(body: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", len(body)) + body


class Peer:
    """One accepted connection of the scripted server."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.encoder = hpack.Encoder()
        self.frames: asyncio.Queue[Frame] = asyncio.Queue()

    async def read_frames(self) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await self.reader.readexactly(9)
                length = int.from_bytes(head[:3])
                payload = await self.reader.readexactly(length)
                stream = int.from_bytes(head[5:9]) & 0x7FFFFFFF
                await self.frames.put((head[3], head[4], stream, payload))

    async def expect(self, kind: int) -> Frame:
        """The next frame of ``kind`` the client sent (others before it are skipped)."""
        async with asyncio.timeout(BUDGET):
            while True:
                frame = await self.frames.get()
                if frame[0] == kind:
                    return frame

    def send(self, kind: int, flags: int, stream: int, payload: bytes = b"") -> None:
        self.writer.write(encode_frame(kind, flags, stream, payload))

    def settings(self) -> None:
        self.send(SETTINGS, 0, 0)

    def headers(self, headers: list[tuple[str, str]], flags: int = END_HEADERS) -> None:
        self.send(HEADERS, flags, 1, self.encoder.encode(headers))

    def response(self) -> None:
        self.headers([(":status", "200"), ("content-type", "application/grpc")])

    def trailers(self, status: int, message: str = "") -> None:
        fields = [("grpc-status", str(status))]
        if message:
            fields.append(("grpc-message", message))
        self.headers(fields, END_HEADERS | END_STREAM)


Script = Callable[[Peer], Awaitable[None]]


class Collect:
    """A sink that records what it gets."""

    def __init__(self, room: bool = True) -> None:
        self.messages: list[bytes] = []
        self.nbytes = 0
        self.room = room

    def deliver(self, messages: list[bytes], nbytes: int) -> None:
        self.messages += messages
        self.nbytes += nbytes

    def credit(self) -> bool:
        return self.room


def plain_split(buf: bytearray) -> tuple[list[bytes], int, int]:
    return split_messages(buf, 1 << 20)


@contextlib.asynccontextmanager
async def server(script: Script) -> AsyncIterator[tuple[list[Peer], int]]:
    peers: list[Peer] = []
    tasks: list[asyncio.Task[None]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(reader, writer)
        peers.append(peer)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            assert await reader.readexactly(len(h2grpc.PREFACE)) == h2grpc.PREFACE
            tasks.append(asyncio.create_task(peer.read_frames()))
            await script(peer)
            await writer.drain()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield peers, srv.sockets[0].getsockname()[1]
    finally:
        srv.close()
        for peer in peers:
            peer.writer.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await srv.wait_closed()


async def open_test_call(
    port: int, sink: Collect, *, window: int = 1 << 16
) -> GrpcStreamProtocol[bytes]:
    """One call to the scripted server on ``port``, its messages into ``sink``."""
    loop = asyncio.get_running_loop()
    return await h2grpc.open_call(
        lambda: GrpcStreamProtocol(
            loop=loop,
            authority="localhost",
            path="/pkg.Svc/Stream",
            request=b"req",
            split=plain_split,
            sink=sink,
            window=window,
        ),
        "127.0.0.1",
        port,
        ssl_context=None,
        server_hostname=None,
        timeout=BUDGET,
    )


async def call(
    script: Script,
    sink: Collect | None = None,
    *,
    window: int = 1 << 16,
    then: Callable[[Peer], Awaitable[object]] | None = None,
) -> tuple[GrpcStreamProtocol[bytes], Collect, list[Peer]]:
    """Open a call against a fresh scripted server, wait for it to end, then run ``then``
    on the server's side of the connection (before the server closes)."""
    sink = sink or Collect()
    async with server(script) as (peers, srv_port):
        proto = await open_test_call(srv_port, sink, window=window)
        async with asyncio.timeout(BUDGET):
            await proto.ended
            if then is not None:
                await then(peers[0])
        return proto, sink, peers


# --- the happy path ---------------------------------------------------------------------------


async def test_request_messages_across_frames_pings_and_trailers() -> None:
    bodies = [b"a" * 10, b"", b"b" * 3000, b"c"]
    wire = b"".join(grpc_message(b) for b in bodies)
    seen: dict[str, object] = {}

    async def script(peer: Peer) -> None:
        _, _, _, settings = await peer.expect(SETTINGS)
        seen["settings"] = settings
        _, hflags, hstream, block = await peer.expect(HEADERS)
        seen["headers"] = dict(hpack.Decoder().decode(block))
        seen["hflags"], seen["hstream"] = hflags, hstream
        _, dflags, _, request = await peer.expect(DATA)
        seen["request"], seen["dflags"] = request, dflags
        peer.settings()
        peer.send(PING, 0, 0, b"12345678")
        peer.response()
        peer.send(DATA, 0, 1, wire[:7])  # a prefix split across frames
        padded = wire[7:2000]
        peer.send(DATA, PADDED, 1, bytes([4]) + padded + b"\0" * 4)
        peer.send(DATA, 0, 1, wire[2000:])
        _, pflags, _, pong = await peer.expect(PING)
        seen["pong"] = (pflags, pong)
        peer.trailers(0)

    proto, sink, _ = await call(script)
    assert sink.messages == bodies
    assert sink.nbytes == len(wire)
    assert (await proto.ended).code == Status.OK
    headers = seen["headers"]
    assert isinstance(headers, dict)
    assert headers[":path"] == "/pkg.Svc/Stream"
    assert headers[":method"] == "POST"
    assert headers["content-type"] == "application/grpc"
    assert headers["te"] == "trailers"
    assert seen["hstream"] == 1
    assert seen["request"] == grpc_message(b"req")
    assert seen["dflags"] == END_STREAM
    assert seen["pong"] == (h2grpc.ACK, b"12345678")
    settings = seen["settings"]
    assert isinstance(settings, bytes)
    assert (h2grpc.SETTINGS_INITIAL_WINDOW_SIZE, 1 << 16) in struct.iter_unpack(">HI", settings)


async def test_a_continued_header_block_and_priority_flag() -> None:
    async def script(peer: Peer) -> None:
        peer.settings()
        block = peer.encoder.encode([(":status", "200"), ("content-type", "application/grpc")])
        peer.send(HEADERS, PRIORITY_FLAG, 1, b"\0\0\0\0\x10" + block[:2])
        peer.send(CONTINUATION, END_HEADERS, 1, block[2:])
        peer.send(DATA, 0, 1, grpc_message(b"x"))
        trailers = peer.encoder.encode([("grpc-status", "0")])
        peer.send(HEADERS, END_STREAM, 1, trailers[:1])
        peer.send(CONTINUATION, END_HEADERS, 1, trailers[1:])

    proto, sink, _ = await call(script)
    assert sink.messages == [b"x"]
    assert (await proto.ended).code == Status.OK


# --- how calls end ----------------------------------------------------------------------------


async def test_trailers_carry_the_status_and_its_percent_encoded_message() -> None:
    async def script(peer: Peer) -> None:
        peer.settings()
        peer.response()
        peer.send(DATA, 0, 1, grpc_message(b"x"))
        peer.trailers(5, "no such stream %C3%A9%25")

    proto, sink, _ = await call(script)
    ended = await proto.ended
    assert (ended.code, ended.message) == (5, "no such stream é%")
    assert sink.messages == [b"x"]


async def test_a_trailers_only_response() -> None:
    async def script(peer: Peer) -> None:
        peer.settings()
        fields = [(":status", "200"), ("content-type", "application/grpc")]
        peer.headers([*fields, ("grpc-status", "9"), ("grpc-message", "paused")], 5)

    proto, _, _ = await call(script)
    ended = await proto.ended
    assert (ended.code, ended.message) == (9, "paused")


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (h2grpc.ErrorCode.CANCEL, Status.CANCELLED),
        (h2grpc.ErrorCode.REFUSED_STREAM, Status.UNAVAILABLE),
        (2, 13),
    ],
)
async def test_rst_stream_maps_to_grpc_statuses(code: int, status: int) -> None:
    async def script(peer: Peer) -> None:
        peer.settings()
        peer.response()
        peer.send(RST_STREAM, 0, 1, struct.pack(">I", code))

    proto, _, _ = await call(script)
    assert (await proto.ended).code == status


async def test_goaway_with_an_error_and_a_closed_connection_are_unavailable() -> None:
    async def goaway(peer: Peer) -> None:
        peer.settings()
        peer.response()
        peer.send(GOAWAY, 0, 0, struct.pack(">II", 1, 2) + b"shutting down")

    proto, _, _ = await call(goaway)
    ended = await proto.ended
    assert ended.code == Status.UNAVAILABLE
    assert "shutting down" in ended.message

    async def closes(peer: Peer) -> None:
        peer.settings()
        peer.response()
        await peer.expect(SETTINGS)  # the client's (then its ack of ours)
        peer.writer.close()

    proto, _, _ = await call(closes)
    assert (await proto.ended).code == Status.UNAVAILABLE


async def test_a_graceful_goaway_lets_the_stream_finish() -> None:
    async def script(peer: Peer) -> None:
        peer.settings()
        peer.response()
        peer.send(GOAWAY, 0, 0, struct.pack(">II", 1, 0))
        peer.send(DATA, 0, 1, grpc_message(b"last"))
        peer.trailers(0)

    proto, sink, _ = await call(script)
    assert sink.messages == [b"last"]
    assert (await proto.ended).code == Status.OK


async def test_a_server_that_is_not_http2() -> None:
    async def script(peer: Peer) -> None:
        peer.writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    with pytest.raises(NotHttp2):
        await call(script)

    async def hangs_up(peer: Peer) -> None:
        peer.writer.close()

    with pytest.raises(NotHttp2):
        await call(hangs_up)


# --- malformed input and flow control ---------------------------------------------------------


async def expect_goaway(peer: Peer, code: int = h2grpc.ErrorCode.PROTOCOL_ERROR) -> None:
    """The client told the server why it hangs up: GOAWAY ``code``."""
    _, _, _, payload = await peer.expect(GOAWAY)
    assert struct.unpack(">II", payload[:8])[1] == code


async def expect_reset(peer: Peer, code: int) -> None:
    """The client ended stream 1 alone: RST_STREAM ``code`` (then, the call's own
    connection without a call, a GOAWAY NO_ERROR)."""
    _, _, stream, payload = await peer.expect(RST_STREAM)
    assert (stream, int.from_bytes(payload)) == (1, code)
    await expect_goaway(peer, h2grpc.ErrorCode.NO_ERROR)


E = h2grpc.ErrorCode


RESET = RST_STREAM  # the client ends the stream alone; the connection stays usable
AWAY = GOAWAY  # a connection error (or, for the call's own connection, its close)
INT, EXH = Status.INTERNAL, Status.RESOURCE_EXHAUSTED


@pytest.mark.parametrize(
    ("frames", "status", "text", "reply"),
    [
        # a call the client gives up on: RST_STREAM CANCEL
        ([(DATA, 0, 1, b"\x01\0\0\0\x01x")], INT, "compressed", (RESET, E.CANCEL)),
        ([(DATA, 0, 1, b"\0\x7f\0\0\0")], EXH, "bytes", (RESET, E.CANCEL)),
        # the server ended its side early (the client's is closed too: nothing to reset)
        ([(DATA, END_STREAM, 1, b"\0\0\0\0\x05ab")], INT, "inside", (AWAY, E.NO_ERROR)),
        ([(DATA, END_STREAM, 1, b"")], INT, "without trailers", (AWAY, E.NO_ERROR)),
        # connection errors: GOAWAY with the code RFC 9113 gives them
        ([(DATA, PADDED, 1, b"\x09abc")], INT, "padding", (AWAY, E.PROTOCOL_ERROR)),
        ([(DATA, 0, 3, grpc_message(b"x"))], INT, "stream 3", (AWAY, E.PROTOCOL_ERROR)),
        ([(PING, 0, 0, b"short")], INT, "PING", (AWAY, E.FRAME_SIZE_ERROR)),
        ([(SETTINGS, 0, 0, b"12345")], INT, "SETTINGS", (AWAY, E.FRAME_SIZE_ERROR)),
        ([(WINDOW_UPDATE, 0, 0, b"1")], INT, "WINDOW_UPDATE", (AWAY, E.FRAME_SIZE_ERROR)),
        ([(WINDOW_UPDATE, 0, 0, b"\0" * 4)], INT, "of 0", (AWAY, E.PROTOCOL_ERROR)),
        (
            [(HEADERS, END_HEADERS, 1, b"\xff" * 4)],
            INT,
            "header block",
            (AWAY, E.COMPRESSION_ERROR),
        ),
        ([(h2grpc.PUSH_PROMISE, 0, 1, b"\0\0\0\x02")], INT, "PUSH", (AWAY, E.PROTOCOL_ERROR)),
        ([(DATA, 0, 1, b"x" * ((1 << 20) + 1))], INT, "frame of", (AWAY, E.FRAME_SIZE_ERROR)),
    ],
)
async def test_malformed_input_ends_the_call_with_the_right_code(
    frames: list[Frame], status: int, text: str, reply: tuple[int, int]
) -> None:
    async def script(peer: Peer) -> None:
        peer.settings()
        peer.response()
        for frame in frames:
            peer.send(*frame)

    kind, code = reply

    async def then(peer: Peer) -> None:
        if kind == RST_STREAM:
            await expect_reset(peer, code)
        else:
            await expect_goaway(peer, code)

    proto, _, _ = await call(script, then=then)
    ended = await proto.ended
    assert ended.code == status
    assert text in ended.message


async def test_a_non_grpc_response() -> None:
    async def script(peer: Peer) -> None:
        peer.settings()
        peer.headers([(":status", "503"), ("content-type", "text/plain")])

    proto, _, _ = await call(script)
    assert (await proto.ended).code == Status.UNAVAILABLE


async def test_credit_is_given_only_while_the_sink_has_room() -> None:
    window = 1 << 16
    chunk = grpc_message(b"z" * (window // 2 - 5))  # two fill the window
    credited = asyncio.Event()
    increments: list[tuple[int, int]] = []

    async def script(peer: Peer) -> None:
        peer.settings()
        peer.response()
        peer.send(DATA, 0, 1, chunk)
        peer.send(DATA, 0, 1, chunk)
        for _ in range(2):
            _, _, stream, payload = await peer.expect(WINDOW_UPDATE)
            if stream:  # the connection's came first: WINDOW_UPDATE 0 at the start
                increments.append((stream, int.from_bytes(payload)))
        while len(increments) < 1:
            _, _, stream, payload = await peer.expect(WINDOW_UPDATE)
            if stream:
                increments.append((stream, int.from_bytes(payload)))
        credited.set()
        peer.send(DATA, 0, 1, chunk)  # allowed again
        peer.trailers(0)

    sink = Collect(room=False)
    async with server(script) as (peers, port):
        proto = await open_test_call(port, sink, window=window)
        await wait_until(lambda: len(sink.messages) == 2, BUDGET, "two messages")
        assert proto.credit_owed()
        assert not credited.is_set()
        sink.room = True
        proto.give_credit()
        async with asyncio.timeout(BUDGET):
            ended = await proto.ended
        assert ended.code == Status.OK
        assert len(sink.messages) == 3
        assert increments == [(1, 2 * len(chunk))]
        assert peers


async def test_a_server_that_overruns_the_window() -> None:
    window = 1 << 16

    async def script(peer: Peer) -> None:
        peer.settings()
        peer.response()
        for _ in range(3):
            peer.send(DATA, 0, 1, grpc_message(b"o" * (window // 2)))

    async def then(peer: Peer) -> None:  # (the call's own connection: its window is the same)
        await expect_goaway(peer, h2grpc.ErrorCode.FLOW_CONTROL_ERROR)

    proto, _, _ = await call(script, Collect(room=False), window=window, then=then)
    ended = await proto.ended
    assert ended.code == Status.INTERNAL
    assert "window" in ended.message


async def test_cancel_resets_the_stream_and_closes() -> None:
    async def script(peer: Peer) -> None:
        peer.settings()
        peer.response()

    async with server(script) as (peers, port):
        proto = await open_test_call(port, Collect())
        proto.cancel()
        proto.cancel()  # idempotent
        assert (await proto.ended).code == Status.CANCELLED
        _, _, stream, payload = await peers[0].expect(RST_STREAM)
        assert (stream, int.from_bytes(payload)) == (1, h2grpc.ErrorCode.CANCEL)


async def test_connecting_to_nothing_raises_connect_error() -> None:
    srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    srv.close()
    await srv.wait_closed()
    with pytest.raises(ConnectError, match="ConnectionRefusedError"):
        await open_test_call(port, Collect())


# --- split_messages ---------------------------------------------------------------------------


@given(
    bodies=st.lists(st.binary(max_size=300), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=7000), max_size=10),
)
def test_split_messages_finds_every_message_however_the_bytes_arrive(
    bodies: list[bytes], cuts: list[int]
) -> None:
    wire = b"".join(grpc_message(b) for b in bodies)
    points = sorted({min(c, len(wire)) for c in cuts} | {len(wire)})
    buf = bytearray()
    got: list[bytes] = []
    total = 0
    start = 0
    for point in points:
        buf += wire[start:point]
        start = point
        messages, consumed, nbytes = split_messages(buf, 1 << 20)
        assert consumed == nbytes
        del buf[:consumed]
        got += messages
        total += nbytes
    assert got == bodies
    assert total == len(wire)
    assert not buf


@given(
    body=st.binary(max_size=50),
    flag=st.integers(min_value=1, max_value=255),
    before=st.lists(st.binary(max_size=20), min_size=1, max_size=3),
)
def test_split_messages_refuses_compressed_and_oversized_messages_after_the_good_ones(
    body: bytes, flag: int, before: list[bytes]
) -> None:
    """What comes before a bad message is handed out; the bad one raises once it is first."""
    good = b"".join(grpc_message(b) for b in before)
    limit = 1 << 10
    for bad, code in [
        (bytes([flag]) + grpc_message(body)[1:], Status.INTERNAL),
        (b"\0" + struct.pack(">I", limit + 1) + body, Status.RESOURCE_EXHAUSTED),
    ]:
        got, consumed, nbytes = split_messages(good + bad, limit)
        assert (got, consumed, nbytes) == (before, len(good), len(good))
        with pytest.raises(CallEnded) as info:
            split_messages(bad, limit)
        assert info.value.code == code
