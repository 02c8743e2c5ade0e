"""The same transport event raises the same streamwire exception on all three brokers, through
``streamwire.connect``: nothing listening is a ``ConnectError``; a server that accepts and then
closes or resets the connection, before or after reading what the client sent, is
``ConnectionClosed``; one that accepts and says nothing is ``ConnectTimeout``. (RabbitMQ and
Iggy classify their sockets' errors in ``transport/_errors.py``; Liftbridge's control plane
reads grpc's status, ``liftbridge/_grpc.py`` ``peer_closed``.)"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator

import pytest

import streamwire
from streamwire.errors import ConnectError, ConnectionClosed, ConnectTimeout, StreamwireError

URLS = {
    "rabbitmq": "rabbitmq-stream://guest:guest@127.0.0.1:{port}/",
    "liftbridge": "liftbridge://127.0.0.1:{port}?nats=nats://127.0.0.1:1",
    "iggy": "iggy://iggy:iggy@127.0.0.1:{port}",
}
EVENTS: dict[str, type[StreamwireError]] = {
    "refused": ConnectError,
    "closed at once": ConnectionClosed,
    "reset at once": ConnectionClosed,
    "closed after reading": ConnectionClosed,
    "silent": ConnectTimeout,
}


async def _handle(event: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    if event == "reset at once":
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        return
    if event == "closed after reading":
        await reader.read(1)
    elif event == "silent":
        await reader.read()  # until the client gives up
    writer.close()


@pytest.fixture
async def port(request: pytest.FixtureRequest) -> AsyncIterator[int]:
    event: str = request.node.callspec.params["event"]
    if event == "refused":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            free: int = s.getsockname()[1]
        yield free  # nothing listens there once the socket is closed
        return
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        await _handle(event, reader, writer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for writer in writers:  # the server's side of every connection, closed here
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        await server.wait_closed()


@pytest.mark.parametrize("event", list(EVENTS))
@pytest.mark.parametrize("broker", list(URLS))
async def test_the_same_event_is_the_same_exception_on_every_broker(
    broker: str, event: str, port: int
) -> None:
    url = URLS[broker].format(port=port)
    with pytest.raises(StreamwireError) as caught:
        async with streamwire.connect(url, timeout=1.5, reconnect=None):
            pass
    assert type(caught.value) is EVENTS[event], repr(caught.value)
    assert f"127.0.0.1:{port}" in str(caught.value)  # says where
