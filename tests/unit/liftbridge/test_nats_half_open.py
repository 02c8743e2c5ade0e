"""A NATS connection half-way set up is not "connected" for the client.

The client opens NATS, then subscribes its ack inbox and flushes. Until that flush is answered
``nats_connected`` stays false: ``"auto"`` producers keep publishing over gRPC (nothing would
receive a NATS ack yet), and a client redialling NATS does not look connected while the error
of its previous attempt is still its ``nats_error`` (CI saw exactly that). A fake NATS server
answers the handshake's PING and then never the flush's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from streamwire.errors import ConnectTimeout
from streamwire.liftbridge.client import Client
from streamwire.transport.deadline import Deadline

INFO = (
    b'INFO {"server_id":"half","server_name":"half","version":"2.10.0","proto":1,'
    b'"host":"127.0.0.1","port":4222,"headers":true,"max_payload":1048576}\r\n'
)


class HalfNats:
    """Answers the first PING (the handshake) and stays silent after it."""

    def __init__(self) -> None:
        self.pings = 0
        self.second_ping = asyncio.Event()
        self.port = 0
        self._server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(INFO)
        try:
            while line := await reader.readline():
                if line.startswith(b"PING"):
                    self.pings += 1
                    if self.pings == 1:
                        writer.write(b"PONG\r\n")
                    else:
                        self.second_ping.set()
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()


@pytest.fixture
async def half_nats() -> AsyncIterator[HalfNats]:
    server = HalfNats()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def test_nats_is_not_connected_until_the_ack_inbox_is_flushed(half_nats: HalfNats) -> None:
    client = Client("127.0.0.1", 1, nats_servers=[f"nats://127.0.0.1:{half_nats.port}"])
    opening = asyncio.create_task(
        client._open_nats(Deadline(5.0, exc_type=ConnectTimeout, what="test"))
    )
    try:
        await asyncio.wait_for(half_nats.second_ping.wait(), 5)
        link = client._link
        assert link is not None
        assert link.is_connected  # NATS itself is up ...
        assert not client.nats_connected  # ... the client's use of it is not
    finally:
        opening.cancel()
        await asyncio.gather(opening, return_exceptions=True)
        await client.close()
