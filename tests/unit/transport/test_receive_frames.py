"""open_tcp(frames=...): large frames received into a buffer of their size, handed out whole;
the same bytes as a plain stream, in order, whatever the chunking, natively and in pure
Python (the frame buffer of the native core or a bytearray)."""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from typing import Any

import pytest

from streamwire import _native
from streamwire.codec.framing import GATHER_ABOVE, IGGY_HEADER, LENGTH_PREFIX_U32, FrameSpec
from streamwire.errors import ConfigurationError, ConnectionClosed, TimeoutError
from streamwire.transport import TcpStream, _receive, open_tcp

from .helpers import LocalServer, ServerFactory

MAX = 1 << 20


@pytest.fixture(
    autouse=True,
    params=["native", "pure"] if _native.core is not None else ["pure"],
)
def buffers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test with the native core's frame buffer and with the pure-Python one."""
    if request.param == "pure":
        monkeypatch.setattr(_receive, "_core", None)
    return str(request.param)


def prefixed(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def random_frames(rng: random.Random, count: int) -> list[bytes]:
    sizes = [0, 1, 3, 200, GATHER_ABOVE - 4, GATHER_ABOVE - 3, 300_000, 70_000, 5]
    out = []
    for i in range(count):
        size = rng.choice(sizes) if i % 2 else rng.randint(0, 400_000)
        out.append(prefixed(bytes([i % 251]) * size))
    return out


async def serve_chunks(
    server_factory: ServerFactory, data: bytes, rng: random.Random
) -> LocalServer:
    """A server that writes ``data`` in random pieces (1 byte to 200 KB), then closes."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pos = 0
        while pos < len(data):
            n = rng.choice([1, 2, 3, 7, 100, 4096, 65536, 200_000])
            writer.write(data[pos : pos + n])
            pos += n
            if rng.random() < 0.3:
                await writer.drain()
                await asyncio.sleep(0)
        await writer.drain()

    return await server_factory(handler)


async def connect(server: LocalServer, spec: FrameSpec = LENGTH_PREFIX_U32) -> TcpStream:
    return await open_tcp(server.host, server.port, timeout=5.0, frames=spec, max_frame_size=MAX)


async def gated(start_server: ServerFactory, payload: bytes) -> tuple[asyncio.Event, TcpStream]:
    """A stream whose server writes ``payload`` once the event returned is set."""
    go = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await go.wait()
        writer.write(payload)
        await writer.drain()

    return go, await connect(await start_server(handler))


async def release_and_read(go: asyncio.Event, stream: TcpStream, payload: bytes) -> None:
    """Let the gated server write, then read until ``payload`` came whole; close."""
    go.set()
    got = b""
    while len(got) < len(payload):
        got += await stream.read(timeout=10.0)
    assert got == payload
    await stream.aclose()


async def read_all(stream: TcpStream) -> list[bytes]:
    reads = []
    while chunk := await stream.read(timeout=10.0):
        assert type(chunk) is bytes
        reads.append(chunk)
    return reads


@pytest.mark.parametrize("seed", range(6))
async def test_same_bytes_and_large_frames_whole(start_server: ServerFactory, seed: int) -> None:
    rng = random.Random(seed)
    frames = random_frames(rng, 24)
    data = b"".join(frames)
    stream = await connect(await serve_chunks(start_server, data, rng))
    reads = await read_all(stream)
    await stream.aclose()
    assert b"".join(reads) == data
    large = {f for f in frames if len(f) >= GATHER_ABOVE}
    for chunk in reads:  # at most read_size, or one whole large frame
        assert len(chunk) <= stream.read_size or chunk in large
    # a large frame whose header arrived in one piece with nothing of it missing comes whole
    assert any(chunk in large for chunk in reads)


async def test_a_frame_too_large_is_passed_through_unchanged(start_server: ServerFactory) -> None:
    """A size over max_frame_size stops the tracking: everything goes through as plain
    reads (the decoder refuses the frame), nothing is buffered for it."""
    data = prefixed(b"a" * 100_000) + struct.pack(">I", MAX + 1) + b"b" * 300_000
    stream = await connect(await serve_chunks(start_server, data, random.Random(1)))
    reads = await read_all(stream)
    await stream.aclose()
    assert b"".join(reads) == data
    assert all(len(c) <= stream.read_size for c in reads[1:])


async def test_a_frame_cut_short_by_the_end_is_read_as_far_as_it_came(
    start_server: ServerFactory,
) -> None:
    data = prefixed(b"x" * 10) + prefixed(b"y" * 200_000)[:150_000]
    stream = await connect(await serve_chunks(start_server, data, random.Random(2)))
    reads = await read_all(stream)
    await stream.aclose()
    assert b"".join(reads) == data


async def test_iggy_frames_whole(start_server: ServerFactory) -> None:
    """The Iggy layout: the size (header included) at offset 48 of a 256-byte header."""

    def frame(size: int, fill: int) -> bytes:
        header = bytearray(256)
        struct.pack_into("<I", header, 48, size)
        return bytes(header) + bytes([fill]) * (size - 256)

    frames = [frame(300_000, 1), frame(256, 2), frame(90_000, 3), frame(1000, 4)]
    data = b"".join(frames)
    stream = await connect(await serve_chunks(start_server, data, random.Random(3)), IGGY_HEADER)
    reads = await read_all(stream)
    await stream.aclose()
    assert b"".join(reads) == data


async def test_cancelled_read_consumes_nothing(start_server: ServerFactory) -> None:
    big = prefixed(b"z" * 250_000)
    go, stream = await gated(start_server, big)
    pending = asyncio.ensure_future(stream.read())
    await asyncio.sleep(0.01)
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    await release_and_read(go, stream, big)


async def test_queued_frames_pause_reading(start_server: ServerFactory) -> None:
    """Frames nobody reads are bounded like the stream reader's buffer: the transport is
    paused once more than twice the limit is queued, and resumed as they are read."""
    frames = [prefixed(bytes([i]) * 200_000) for i in range(30)]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for f in frames:
            writer.write(f)
            await writer.drain()

    stream = await connect(await start_server(handler))
    reader = stream._reader
    assert isinstance(reader, _receive.FrameReader)
    state: Any = reader  # StreamReader's own flow-control flag
    for _ in range(1000):  # up to 10 s: a hang guard only
        if state._paused:
            break
        await asyncio.sleep(0.01)
    assert state._paused
    assert reader._queued <= 2 * 65536 + 200_004
    got = b""
    while len(got) < sum(map(len, frames)):
        got += await stream.read(timeout=10.0)
    assert got == b"".join(frames)
    assert not state._paused
    await stream.aclose()


async def test_read_exactly_is_refused(start_server: ServerFactory) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    stream = await connect(await start_server(handler))
    with pytest.raises(ConfigurationError):
        await stream.read_exactly(4)
    await stream.aclose()


async def test_frames_need_a_max_frame_size(start_server: ServerFactory) -> None:
    with pytest.raises(ConfigurationError):
        await open_tcp("127.0.0.1", 1, timeout=1.0, frames=IGGY_HEADER)


async def test_reset_mid_frame_is_an_error(start_server: ServerFactory) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(prefixed(b"q" * 300_000)[:100_000])
        await writer.drain()
        await asyncio.sleep(0.05)
        sock = writer.get_extra_info("socket")  # linger 0: the close is a reset
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    stream = await connect(await start_server(handler))
    got: list[bytes] = []

    async def read_to_the_end() -> None:
        while chunk := await stream.read(timeout=10.0):
            got.append(chunk)

    with pytest.raises(ConnectionClosed):
        await read_to_the_end()
    assert len(b"".join(got)) <= 100_000
    stream.abort()


def test_frame_buffer_gives_bytes_once_filled() -> None:
    frame, view = _receive.frame_buffer(5)
    view[:] = b"abcde"
    view.release()
    assert bytes(frame) == b"abcde"
    if _receive._core is not None:
        assert type(frame) is bytes
        with pytest.raises(ValueError, match="positive"):
            _receive._core.frame_buffer(0)


async def test_read_timeout_leaves_the_stream_usable(start_server: ServerFactory) -> None:
    big = prefixed(b"t" * 120_000)
    go, stream = await gated(start_server, big)
    with pytest.raises(TimeoutError):
        await stream.read(timeout=0.05)
    await release_and_read(go, stream, big)
