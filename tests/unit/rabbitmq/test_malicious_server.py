"""A hostile "broker" on loopback: garbage, truncated, oversized and out-of-order frames after
accept. The client must raise a typed streamwire error within its timeout, allocate nothing
for an oversized frame, and leave the event loop healthy (a ticker keeps running)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

import streamwire.rabbitmq as rmq
from streamwire.errors import (
    ClosedError,
    ConnectionClosed,
    ConnectTimeout,
    FrameTooLargeError,
    RemoteProtocolError,
    StreamwireError,
)
from streamwire.rabbitmq.protocol.connection import (
    OpenResponse,
    PeerPropertiesResponse,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
    Tune,
)
from streamwire.rabbitmq.protocol.frames import decode_frame, encode_frame
from streamwire.rabbitmq.protocol.streams import CreateRequest

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_frame(reader: asyncio.StreamReader) -> object:
    size = int.from_bytes(await reader.readexactly(4), "big")
    return decode_frame(await reader.readexactly(size))


async def handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Play a well-behaved broker up to Open (server version 3.10: no command versions)."""
    replies = [
        lambda c: PeerPropertiesResponse(c, 1, {"product": "evil", "version": "3.10.0"}),
        lambda c: SaslHandshakeResponse(c, 1, ("PLAIN",)),
        lambda c: SaslAuthenticateResponse(c, 1),
    ]
    for reply in replies:
        frame = await read_frame(reader)
        writer.write(encode_frame(reply(frame.correlation_id)))  # type: ignore[attr-defined,no-untyped-call]
    writer.write(encode_frame(Tune(1 << 20, 60)))
    await read_frame(reader)  # TuneResponse
    frame = await read_frame(reader)  # Open
    writer.write(encode_frame(OpenResponse(frame.correlation_id, 1, {})))  # type: ignore[attr-defined]
    await writer.drain()


@contextlib.asynccontextmanager
async def evil(script: Script) -> AsyncIterator[str]:
    writers: list[asyncio.StreamWriter] = []
    handlers: list[asyncio.Task[None]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        task = asyncio.current_task()
        if task is not None:
            handlers.append(task)
        with contextlib.suppress(Exception):
            await script(reader, writer)
            await asyncio.sleep(30)  # then hold the line open, saying nothing
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    tick_task = asyncio.create_task(ticker())
    try:
        yield f"rabbitmq-stream://guest:guest@127.0.0.1:{port}/"
    finally:
        await asyncio.sleep(0.05)  # the loop still runs other tasks after the failure
        assert ticks > 0, "the event loop was blocked"
        tick_task.cancel()
        for handler in handlers:
            handler.cancel()
        for writer in writers:
            writer.transport.abort()
        server.close()
        await server.wait_closed()
        await asyncio.sleep(0)


async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(100)
    writer.write(b"\x00\x00\x00\x08HTTP/1.1 400 Bad Request\r\n\r\n" * 3)


async def oversized(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(100)
    writer.write((0x7FFFFFF0).to_bytes(4, "big") + b"\x80\x11\x00\x01")  # ~2 GiB announced


async def truncated(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(100)
    writer.write(encode_frame(PeerPropertiesResponse(1, 1, {"a": "b"}))[:-3])


async def out_of_order(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(100)
    writer.write(encode_frame(OpenResponse(1, 1, {})))


async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(100)
    writer.close()


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (garbage, RemoteProtocolError),
        (oversized, FrameTooLargeError),
        (truncated, ConnectTimeout),
        (out_of_order, RemoteProtocolError),
        (hang_up, (ClosedError, ConnectionClosed)),
    ],
)
async def test_hostile_handshakes_fail_with_typed_errors(
    script: Script, error: type[StreamwireError] | tuple[type[StreamwireError], ...]
) -> None:
    async with evil(script) as url:
        with pytest.raises(error):
            async with asyncio.timeout(5):  # the client's own budget is 1 s
                await rmq.connect(url, timeout=1.0, reconnect=None)


async def test_garbage_after_open_fails_pending_requests_quickly() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handshake(reader, writer)
        frame = await read_frame(reader)  # the Create request
        assert isinstance(frame, CreateRequest)
        writer.write(b"\x00\x00\x00\x06\xde\xad\xbe\xef\x00\x01")  # unknown key 0xdead
        await writer.drain()

    async with evil(script) as url:
        client = await rmq.connect(url, timeout=2.0, reconnect=None)
        try:
            with pytest.raises(ConnectionClosed, match="protocol violation") as info:
                async with asyncio.timeout(5):
                    await client.create_stream("s")
            assert isinstance(info.value.__cause__, RemoteProtocolError)
        finally:
            await client.close()


async def test_a_silent_broker_times_the_request_out() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handshake(reader, writer)

    async with evil(script) as url:
        client = await rmq.connect(url, timeout=2.0, reconnect=None)
        try:
            conn = await client._locator_connection()
            with pytest.raises(TimeoutError):
                await conn.request(
                    lambda c: CreateRequest(c, "s", {}), PeerPropertiesResponse, timeout=0.2
                )
            assert conn.is_open  # a timeout alone does not kill the connection
        finally:
            await client.close()


async def test_close_leaves_no_tasks_behind() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handshake(reader, writer)

    async with evil(script) as url:
        before = {t for t in asyncio.all_tasks() if not t.done()}
        client = await rmq.connect(url, timeout=2.0, reconnect=None)
        await client.close()
        await asyncio.sleep(0)
        leftover = {t for t in asyncio.all_tasks() if not t.done()} - before
        assert not {t for t in leftover if "streamwire" in t.get_name()}
