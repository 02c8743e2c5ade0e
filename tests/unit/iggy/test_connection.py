"""The asyncio driver over a ScriptedStream: the test plays the server frame by frame.

Covers login, one-request-at-a-time with cancellation, transient-rejection retries, evictions
while idle, end of stream, and closing."""

from __future__ import annotations

import asyncio

import pytest

from streamwire.errors import ClosedError, ConnectionClosed, StreamwireError
from streamwire.iggy._connection import Connection, Credentials
from streamwire.iggy.protocol import streams as st
from streamwire.iggy.protocol import system as sy
from streamwire.iggy.protocol.constants import Operation
from streamwire.iggy.protocol.errors import InvalidCredentials, StaleClient
from streamwire.iggy.protocol.framing import (
    Request,
    decode_request,
    encode_eviction,
    encode_reply,
    encode_result_section,
)
from streamwire.iggy.protocol.identifiers import Identifier
from streamwire.iggy.protocol.machine import MachineSettings
from streamwire.transport.scripted import ScriptedStream

CREDENTIALS = Credentials(username="iggy", password="iggy")
SETTINGS = MachineSettings(request_timeout=5.0, heartbeat_interval=None)


class Server:
    """Reads request frames written by the driver and feeds replies back."""

    def __init__(self) -> None:
        self.stream = ScriptedStream(name="iggy")
        self.seen = 0

    async def next_request(self) -> Request:
        frames = await self.stream.wait_frames(self.seen + 1, timeout=2.0)
        self.seen += 1
        return decode_request(frames[self.seen - 1])

    def reply(self, request: Request, body: bytes = b"", status: int = 0) -> None:
        self.stream.feed(
            encode_reply(
                body,
                client=request.client,
                request=request.request,
                operation=request.operation,
                status=status,
            )
        )

    async def accept_login(self) -> None:
        request = await self.next_request()
        assert request.operation == Operation.REGISTER
        body = sy.LoginReply(
            user_id=0, session=5, server_protocol_version=11264, server_version="0.9.0"
        ).encode()
        self.reply(request, encode_result_section() + body)


async def connect(server: Server, settings: MachineSettings = SETTINGS) -> Connection:
    login = asyncio.create_task(server.accept_login())
    conn = await Connection.start(server.stream, "iggy", CREDENTIALS, settings=settings)
    await login
    return conn


async def test_login_and_a_request() -> None:
    server = Server()
    conn = await connect(server)
    assert conn.login is not None
    assert conn.login.session == 5
    task = asyncio.create_task(conn.request(st.GetStreams()))
    request = await server.next_request()
    assert (request.operation, request.code, request.session) == (2, 201, 5)
    server.reply(request, st.StreamsList().encode())
    assert await task == st.StreamsList()
    await conn.close(timeout=0.05)


async def test_cancelled_request_keeps_the_connection_in_step() -> None:
    server = Server()
    conn = await connect(server)
    first = asyncio.create_task(conn.request(st.GetStreams()))
    first_request = await server.next_request()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    second = asyncio.create_task(conn.request(st.GetStream(Identifier("s"))))
    await asyncio.sleep(0.01)
    assert len(server.stream.frames) == 2  # the second waits for the first reply
    server.reply(first_request, st.StreamsList().encode())  # dropped: nobody waits
    second_request = await server.next_request()
    assert second_request.code == 200
    server.reply(second_request)
    assert await second is None
    assert conn.is_open
    await conn.close(timeout=0.05)


async def test_transient_rejection_is_retried_with_the_same_number() -> None:
    server = Server()
    conn = await connect(server)
    task = asyncio.create_task(conn.request(st.PurgeStream(Identifier("s"))))
    first = await server.next_request()
    server.reply(first, encode_result_section(58))
    second = await server.next_request()
    assert (second.request, second.body) == (first.request, first.body)
    server.reply(second, encode_result_section())
    await task
    await conn.close(timeout=0.05)


async def test_eviction_while_idle_fails_the_next_request() -> None:
    server = Server()
    conn = await connect(server)
    lost: list[StreamwireError] = []
    conn.on_lost.append(lost.append)
    server.stream.feed(encode_eviction(client=conn.machine.client_id, reason=13))
    for _ in range(100):
        if lost:
            break
        await asyncio.sleep(0.01)
    assert isinstance(lost[0], StaleClient)
    with pytest.raises(StaleClient):
        await conn.request(sy.Ping())
    await conn.close(timeout=0.05)


async def test_end_of_stream_fails_the_pending_request() -> None:
    server = Server()
    conn = await connect(server)
    task = asyncio.create_task(conn.request(st.GetStreams()))
    await server.next_request()
    server.stream.feed_eof()
    with pytest.raises(ConnectionClosed):
        await task
    assert not conn.is_open
    await conn.close(timeout=0.05)


async def test_close_logs_out_and_is_idempotent() -> None:
    server = Server()
    conn = await connect(server)

    async def answer_logout() -> None:
        request = await server.next_request()
        assert request.operation == Operation.LOGOUT
        server.reply(request)

    answering = asyncio.create_task(answer_logout())
    await conn.close(timeout=0.05)
    await answering
    await conn.close(timeout=0.05)
    assert server.stream.closed
    with pytest.raises(ClosedError):
        await conn.request(sy.Ping())


async def test_refused_login_raises_the_eviction_error() -> None:
    server = Server()

    async def refuse() -> None:
        request = await server.next_request()
        server.stream.feed(encode_eviction(client=request.client, reason=9))

    refusing = asyncio.create_task(refuse())
    with pytest.raises(InvalidCredentials):
        await Connection.start(server.stream, "iggy", CREDENTIALS, settings=SETTINGS)
    await refusing
    assert server.stream.closed
