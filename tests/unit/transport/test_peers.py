"""A wrong port says what it reached: servers of other kinds (scripted on loopback) greet
the RabbitMQ Streams and Iggy clients, which fail with a ConnectError naming what answered
and where the protocol listens; a server that closes during the handshake gives the same
ConnectionClosed on both."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

import streamwire
from streamwire.errors import (
    ConnectError,
    ConnectionClosed,
    FrameTooLargeError,
    TransportError,
)
from streamwire.transport.peers import handshake_failure, other_service

GREETINGS = {
    b'INFO {"server_id":"N","version":"2.15.1","max_payload":1048576}\r\n': "a NATS server",
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n": "an HTTP server",
    b"AMQP\x00\x00\x09\x01": "an AMQP 0-9-1 broker",
    b"SSH-2.0-OpenSSH_9.6\r\n": "an SSH server",
    b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64": "an HTTP/2 server",
    b"-ERR 'Unknown Protocol Operation'\r\n": "a NATS or Redis server",
}


@contextlib.asynccontextmanager
async def greeter(greeting: bytes | None) -> AsyncIterator[int]:
    """A loopback server that sends ``greeting`` (None: nothing) and closes after a read;
    every connection it accepted is closed and its handler done on the way out."""
    handlers: list[asyncio.Task[None]] = []

    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if greeting is not None:
                writer.write(greeting)
                await writer.drain()
            await asyncio.wait_for(reader.read(64), 5)
        except (ConnectionError, TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.append(asyncio.ensure_future(greet(reader, writer)))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()
        await asyncio.gather(*handlers, return_exceptions=True)


URLS = {
    "RabbitMQ Streams": "rabbitmq-stream://guest:guest@127.0.0.1:{port}/",
    "Iggy": "iggy://iggy:iggy@127.0.0.1:{port}",
}


@pytest.mark.parametrize("greeting", list(GREETINGS))
@pytest.mark.parametrize("protocol", list(URLS))
async def test_a_server_of_another_kind_is_named(greeting: bytes, protocol: str) -> None:
    async with greeter(greeting) as port:
        with pytest.raises(ConnectError) as caught:
            await streamwire.connect(URLS[protocol].format(port=port), timeout=5)
    message = str(caught.value)
    assert GREETINGS[greeting] in message
    assert f"where {protocol} was expected" in message
    assert "check the URL's port" in message


@pytest.mark.parametrize("protocol", list(URLS))
async def test_a_server_that_closes_during_the_handshake_is_the_same_error_everywhere(
    protocol: str,
) -> None:
    async with greeter(None) as port:
        with pytest.raises(ConnectionClosed, match="closed the connection during the") as caught:
            await streamwire.connect(URLS[protocol].format(port=port), timeout=5)
    assert isinstance(caught.value, TransportError)  # retry code catches one type
    assert f"{protocol} listens on" in str(caught.value)


def test_unknown_bytes_and_other_errors_are_left_alone() -> None:
    assert other_service(b"\x00\x00\x00\x10garbage") is None
    assert handshake_failure("h:1", "Iggy", FrameTooLargeError(9, 1, head=b"\x7f" * 8)) is None
    assert handshake_failure("h:1", "Iggy", streamwire.AuthenticationError("no")) is None
