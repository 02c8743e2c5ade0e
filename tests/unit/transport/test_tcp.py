"""open_tcp / TcpStream against real asyncio servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import builtins
import random
import socket
import struct
from collections.abc import Iterator

import pytest

from streamwire.codec.framing import LENGTH_PREFIX_U32
from streamwire.errors import (
    ClosedError,
    ConnectionClosed,
    StreamwireError,
    TimeoutError,
    TransportError,
    WriteError,
)
from streamwire.transport import ByteStream, TcpStream, open_tcp

from .helpers import LocalServer, ServerFactory

#: How :func:`connect` receives (every test here runs the three ways): asyncio's stream
#: reader, ``receive_into``, or ``frames=`` (length-prefixed frames; the random bytes these
#: tests send mostly announce sizes over the bound, so that lane also passes them through).
RECEIVE_INTO = ["streamreader"]


@pytest.fixture(autouse=True, params=["streamreader", "receive_into", "frames"])
def receive_into(request: pytest.FixtureRequest) -> Iterator[bool]:
    RECEIVE_INTO[0] = request.param
    yield request.param != "streamreader"
    RECEIVE_INTO[0] = "streamreader"


def needs_read_exactly() -> None:
    if RECEIVE_INTO[0] == "frames":
        pytest.skip("read_exactly() is refused on a frames= stream (test_receive_frames.py)")


async def connect(server: LocalServer, *, read_size: int = 65536) -> TcpStream:
    return await open_tcp(
        server.host,
        server.port,
        timeout=5.0,
        read_size=read_size,
        receive_into=RECEIVE_INTO[0] == "receive_into",
        frames=LENGTH_PREFIX_U32 if RECEIVE_INTO[0] == "frames" else None,
        max_frame_size=1 << 20,
    )


async def read_n(stream: TcpStream, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = await stream.read(timeout=10.0)
        assert chunk, f"EOF after {len(buf)} of {n} bytes"
        buf += chunk
    return bytes(buf)


# --- basics ----------------------------------------------------------------------------


async def test_echo_round_trip(echo_server: LocalServer) -> None:
    async with await connect(echo_server) as stream:
        assert isinstance(stream, ByteStream)
        await stream.send(b"hello, ")
        await stream.send([b"wor", bytearray(b"ld"), memoryview(b"!")])
        assert await read_n(stream, 13) == b"hello, world!"
        assert stream.peer == (echo_server.host, echo_server.port)
        assert stream.local[0] == "127.0.0.1"
        assert stream.local[1] > 0
        assert stream.ssl_object is None
        assert not stream.is_closing
        assert "127.0.0.1" in repr(stream)
    assert stream.is_closing


async def test_write_writelines_drain(echo_server: LocalServer) -> None:
    needs_read_exactly()
    async with await connect(echo_server) as stream:
        stream.write(b"ab")
        stream.writelines([b"c", b"de"])
        await stream.drain(timeout=5.0)
        assert await stream.read_exactly(5, timeout=5.0) == b"abcde"


async def test_tcp_nodelay_is_set(echo_server: LocalServer) -> None:
    async with await connect(echo_server) as stream:
        sock = stream._writer.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


@pytest.mark.parametrize("read_size", [1024, 65536])
async def test_large_payload_is_read_in_bounded_chunks(
    echo_server: LocalServer, read_size: int
) -> None:
    payload = random.Random(7).randbytes(6 * 1024 * 1024)
    chunks: list[int] = []

    async def receive() -> bytes:
        buf = bytearray()
        while len(buf) < len(payload):
            chunk = await stream.read(timeout=30.0)
            assert chunk
            chunks.append(len(chunk))
            buf += chunk
        return bytes(buf)

    async with await connect(echo_server, read_size=read_size) as stream:
        assert stream.read_size == read_size
        _, received = await asyncio.gather(stream.send(payload, timeout=30.0), receive())
    assert received == payload
    assert max(chunks) <= read_size
    assert len(chunks) >= len(payload) // read_size


async def test_read_exactly_spans_segments(start_server: ServerFactory) -> None:
    needs_read_exactly()

    async def dribble(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for byte in b"0123456789":
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.001)
        await reader.read()

    async with await connect(await start_server(dribble)) as stream:
        assert await stream.read_exactly(0) == b""
        assert await stream.read_exactly(4) == b"0123"
        assert await stream.read_exactly(6) == b"456789"


async def test_clean_eof_reads_empty(start_server: ServerFactory) -> None:
    async def bye(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"bye")
        await writer.drain()

    async with await connect(await start_server(bye)) as stream:
        assert await read_n(stream, 3) == b"bye"
        assert await stream.read(timeout=5.0) == b""
        assert await stream.read(timeout=5.0) == b""  # EOF is sticky


async def test_read_exactly_at_eof_is_connection_closed(start_server: ServerFactory) -> None:
    needs_read_exactly()

    async def short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"\x00\x00")
        await writer.drain()

    async with await connect(await start_server(short)) as stream:
        with pytest.raises(ConnectionClosed) as info:
            await stream.read_exactly(4, timeout=5.0)
        assert isinstance(info.value.__cause__, asyncio.IncompleteReadError)


async def test_peer_reset_is_connection_closed(start_server: ServerFactory) -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(1)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # SO_LINGER 0: close sends RST

    async with await connect(await start_server(reset)) as stream:
        await stream.send(b"x")
        with pytest.raises(ConnectionClosed) as info:
            await stream.read(timeout=5.0)
        assert isinstance(info.value.__cause__, ConnectionResetError)
        assert "127.0.0.1" in str(info.value)


async def send_until_it_fails(stream: TcpStream) -> None:
    for _ in range(1000):
        await stream.send(b"x" * 65536, timeout=5.0)
        await asyncio.sleep(0.001)


async def test_writes_after_peer_vanished_fail(start_server: ServerFactory) -> None:
    async def vanish(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async with await connect(await start_server(vanish)) as stream:
        with pytest.raises(TransportError) as info:
            await send_until_it_fails(stream)
        assert isinstance(info.value, ConnectionClosed | WriteError)
        assert info.value.__cause__ is not None


# --- concurrency, timeouts, cancellation -----------------------------------------------


async def test_concurrent_sends_never_interleave(start_server: ServerFactory) -> None:
    received = bytearray()
    eof = asyncio.Event()

    async def slow_sink(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(16384):
            received.extend(data)
            await asyncio.sleep(0)  # read slowly so that the client's drain() blocks
        eof.set()

    server = await start_server(slow_sink)
    frames = {tag: struct.pack(">BI", tag, 200_000) + bytes([tag]) * 200_000 for tag in range(24)}
    async with await connect(server) as stream:
        await asyncio.gather(*(stream.send(frame, timeout=30.0) for frame in frames.values()))
    await asyncio.wait_for(eof.wait(), 10.0)
    assert len(received) == sum(map(len, frames.values()))

    seen: list[int] = []
    view = memoryview(received)
    while view:
        tag, size = struct.unpack_from(">BI", view)
        body = view[5 : 5 + size]
        assert bytes(body) == bytes([tag]) * size, f"frame {tag} was interleaved"
        seen.append(tag)
        view = view[5 + size :]
    assert sorted(seen) == sorted(frames)


async def test_read_timeout_leaves_stream_usable(echo_server: LocalServer) -> None:
    needs_read_exactly()
    async with await connect(echo_server) as stream:
        with pytest.raises(TimeoutError) as info:
            await stream.read(timeout=0.05)
        assert isinstance(info.value, builtins.TimeoutError)
        with pytest.raises(TimeoutError):
            await stream.read_exactly(3, timeout=0.05)
        await stream.send(b"abc")
        assert await stream.read_exactly(3, timeout=5.0) == b"abc"


async def test_cancelled_read_leaves_stream_usable(echo_server: LocalServer) -> None:
    needs_read_exactly()
    async with await connect(echo_server) as stream:
        for reader in (stream.read(), stream.read_exactly(2)):
            task = asyncio.create_task(reader)
            await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        await stream.send(b"ok")
        assert await stream.read_exactly(2, timeout=5.0) == b"ok"
        assert not stream.is_closing


async def test_cancelled_send_while_waiting_for_lock_writes_nothing(
    start_server: ServerFactory,
) -> None:
    received = bytearray()
    eof = asyncio.Event()

    async def sink(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            received.extend(data)
        eof.set()

    server = await start_server(sink)
    async with await connect(server) as stream:
        async with stream._send_lock:  # hold the lock, as a slow concurrent send would
            task = asyncio.create_task(stream.send(b"never"))
            await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        await stream.send(b"after")
    await asyncio.wait_for(eof.wait(), 5.0)
    assert bytes(received) == b"after"


# --- closing ---------------------------------------------------------------------------


async def test_aclose_is_idempotent_and_use_after_close_fails(echo_server: LocalServer) -> None:
    stream = await connect(echo_server)
    await asyncio.gather(stream.aclose(), stream.aclose())
    await stream.aclose()
    assert stream.is_closing
    with pytest.raises(ClosedError):
        stream.write(b"x")
    with pytest.raises(ClosedError):
        stream.writelines([b"x"])
    with pytest.raises(ClosedError):
        await stream.send(b"x")
    with pytest.raises(ClosedError):
        await stream.drain()
    with pytest.raises(ClosedError):
        await stream.read()
    with pytest.raises(ClosedError) as info:
        await stream.read_exactly(1)
    assert isinstance(info.value, StreamwireError)


async def test_abort_is_immediate_and_idempotent(echo_server: LocalServer) -> None:
    stream = await connect(echo_server)
    stream.abort()
    stream.abort()
    assert stream.is_closing
    with pytest.raises(ClosedError):
        stream.write(b"x")
    await stream.aclose()  # still fine after abort


async def test_pending_read_returns_eof_on_local_close(echo_server: LocalServer) -> None:
    stream = await connect(echo_server)
    task = asyncio.create_task(stream.read())
    await asyncio.sleep(0.01)
    await stream.aclose()
    assert await asyncio.wait_for(task, 5.0) == b""


async def test_aclose_aborts_when_flush_takes_too_long(start_server: ServerFactory) -> None:
    async def never_reads(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(3600)

    stream = await connect(await start_server(never_reads))
    stream.write(b"x" * (64 * 1024 * 1024))  # far more than the kernel buffers hold
    async with asyncio.timeout(10.0):  # hang guard only
        await stream.aclose(timeout=0.05)
    assert stream.is_closing
    assert stream._writer.transport.is_closing()


async def test_backlogged_while_the_send_buffer_is_over_its_high_water_mark(
    start_server: ServerFactory,
) -> None:
    release = asyncio.Event()

    async def reads_when_released(reader: asyncio.StreamReader, _: asyncio.StreamWriter) -> None:
        await release.wait()
        while await reader.read(1 << 20):
            pass

    async with await connect(await start_server(reads_when_released)) as stream:
        seen = [stream.backlogged]
        stream.write(b"x" * (64 * 1024 * 1024))  # far more than the kernel buffers hold
        seen.append(stream.backlogged)  # what drain() would wait for
        release.set()
        await stream.drain(timeout=30.0)
        seen.append(stream.backlogged)
    assert seen == [False, True, False]


async def test_receive_into_reuses_one_buffer_and_reads_the_same_bytes(
    start_server: ServerFactory, receive_into: bool
) -> None:
    """Many receives through one reused buffer: every read is its own bytes, unchanged by
    the receives after it."""
    pieces = [bytes([i]) * random.randint(1, 200_000) for i in range(1, 30)]

    async def burst(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
        writer.close()

    server = await start_server(burst)
    stream = await connect(server)
    protocol = stream._writer.transport.get_protocol()
    assert isinstance(protocol, asyncio.BufferedProtocol) is receive_into
    reads: list[bytes] = []
    while chunk := await stream.read(timeout=10.0):
        assert type(chunk) is bytes
        assert len(chunk) <= stream.read_size
        reads.append(chunk)
    assert b"".join(reads) == b"".join(pieces)
    await stream.aclose()
