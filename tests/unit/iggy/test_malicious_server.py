"""A hostile Iggy "server" on loopback: garbage, an oversized header, truncated frames,
replies nobody asked for, malformed login payloads, reflected requests and silence.

Iggy 0.9 frames are a 256-byte header carrying the total size (u32 LE at offset 48), the frame
kind (offset 60) and, in a reply, the echoed client id, request number and operation. The
client must raise a typed streamwire error within its timeout (``asyncio.timeout`` around each
call enforces the bound), refuse an oversized frame from its header alone
(``MachineSettings.max_frame_size``), keep the event loop running other work, and leave no
task and no socket behind (:class:`tests.proxy.LeakCheck`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

import streamwire.iggy as iggy
from streamwire.errors import (
    ConnectError,
    ConnectionClosed,
    ConnectTimeout,
    DecodeError,
    FrameTooLargeError,
    RemoteProtocolError,
    RequestTimeout,
    StreamwireError,
)
from streamwire.iggy.protocol import system as sy
from streamwire.iggy.protocol.constants import HEADER_SIZE, Operation
from streamwire.iggy.protocol.errors import InvalidCredentials
from streamwire.iggy.protocol.framing import (
    Request,
    decode_request,
    encode_eviction,
    encode_reply,
    encode_result_section,
)
from streamwire.iggy.protocol.machine import MachineSettings
from tests.hostile import Evil, Script, hostile_server, released
from tests.proxy import LeakCheck, wait_until

MAX_FRAME = 64 * 1024
"""The inbound frame bound the hostile tests use (``MachineSettings.max_frame_size``)."""

BUDGET = 5.0
"""``asyncio.timeout`` around every client call: far above the client's own timeouts."""


def settings(request_timeout: float = 5.0) -> MachineSettings:
    return MachineSettings(
        request_timeout=request_timeout, heartbeat_interval=None, max_frame_size=MAX_FRAME
    )


async def read_request(reader: asyncio.StreamReader) -> Request:
    header = await reader.readexactly(HEADER_SIZE)
    size = int.from_bytes(header[48:52], "little")
    return decode_request(header + await reader.readexactly(size - HEADER_SIZE))


def reply_to(req: Request, body: bytes = b"", **overrides: int) -> bytes:
    """A reply echoing ``req`` (client id, request number, operation) unless overridden."""
    fields = {"client": req.client, "request": req.request, "operation": req.operation}
    fields.update(overrides)
    return encode_reply(body, **fields)


def login_body(server_version: str = "0.9.0") -> bytes:
    reply = sy.LoginReply(
        user_id=1, session=7, server_protocol_version=11264, server_version=server_version
    )
    return encode_result_section() + reply.encode()


async def login(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Request:
    """Play a well-behaved server up to a successful login."""
    request = await read_request(reader)
    assert request.operation == Operation.REGISTER
    writer.write(reply_to(request, login_body()))
    await writer.drain()
    return request


def evil(script: Script) -> contextlib.AbstractAsyncContextManager[Evil]:
    """Serve ``script`` to every connection, then hold the line open, saying nothing.

    On exit: the loop must still have run a ticker, and the client may hold no task or
    socket, while the server still holds its end and once it is torn down."""

    async def after(check: LeakCheck, state: Evil) -> None:
        await check.verify(timeout=3.0)

    return hostile_server(script, budget=BUDGET, while_open=released, after=after)


async def connect(port: int, *, timeout: float = 1.0, request_timeout: float = 5.0) -> iggy.Client:
    async with asyncio.timeout(BUDGET):
        return await iggy.connect(
            host="127.0.0.1",
            port=port,
            timeout=timeout,
            reconnect=None,
            settings=settings(request_timeout),
        )


@contextlib.asynccontextmanager
async def connected(port: int, *, request_timeout: float = 5.0) -> AsyncIterator[iggy.Client]:
    """A client logged in to the hostile server, closed (within the budget) afterwards."""
    client = await connect(port, request_timeout=request_timeout)
    try:
        yield client
    finally:
        async with asyncio.timeout(BUDGET):
            await client.close()


# --- scripts: hostile answers to the login ------------------------------------------------


async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    # a header-sized blob with a plausible size but a frame kind that does not exist
    blob = bytearray(b"\xa5" * HEADER_SIZE)
    blob[48:52] = HEADER_SIZE.to_bytes(4, "little")
    writer.write(bytes(blob))


async def http_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(100)
    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 8)


async def undersized(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await read_request(reader)
    frame = bytearray(reply_to(request, login_body()))
    frame[48:52] = (16).to_bytes(4, "little")  # a total size below the header's own
    writer.write(bytes(frame))


async def oversized(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await read_request(reader)
    header = bytearray(reply_to(request))
    header[48:52] = (0x7FFFFFF0).to_bytes(4, "little")  # ~2 GiB announced, never sent
    writer.write(bytes(header))


async def truncated_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await read_request(reader)
    writer.write(reply_to(request, login_body())[:-5])
    await writer.drain()
    writer.close()


async def truncated_then_silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await read_request(reader)
    writer.write(reply_to(request, login_body())[:-5])


async def wrong_request_number(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await read_request(reader)
    writer.write(reply_to(request, login_body(), request=request.request + 41))


async def someone_elses_reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await read_request(reader)
    writer.write(reply_to(request, login_body(), client=request.client ^ 0xFFFF))


async def reflected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await reader.readexactly(HEADER_SIZE)
    size = int.from_bytes(request[48:52], "little")
    writer.write(request + await reader.readexactly(size - HEADER_SIZE))  # our request back


async def login_payload_cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await read_request(reader)
    writer.write(reply_to(request, login_body()[:-3]))  # server_version string cut short


async def login_payload_bad_utf8(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    request = await read_request(reader)
    body = bytearray(login_body("0.9.0"))
    body[-5:] = b"\xff\xfe\xfd\xfc\xfb"
    writer.write(reply_to(request, bytes(body)))


async def login_payload_empty(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await read_request(reader)
    writer.write(reply_to(request, encode_result_section()))  # success, but no LoginReply


async def login_result_section_lies(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    request = await read_request(reader)
    writer.write(reply_to(request, (0x0FFFFFFF).to_bytes(4, "little") + b"\x00" * 8))


async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(100)
    writer.close()


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)


async def evicted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await read_request(reader)
    writer.write(encode_eviction(client=request.client, reason=9))


Expected = type[StreamwireError] | tuple[type[StreamwireError], ...]


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (garbage, DecodeError),
        (http_answer, ConnectError),  # an HTTP server is named (transport/peers.py)
        (undersized, DecodeError),
        (oversized, FrameTooLargeError),
        (truncated_then_close, ConnectionClosed),
        (truncated_then_silent, ConnectTimeout),
        (wrong_request_number, RemoteProtocolError),
        (reflected, DecodeError),
        (login_payload_cut, DecodeError),
        (login_payload_bad_utf8, DecodeError),
        (login_payload_empty, RemoteProtocolError),
        (login_result_section_lies, DecodeError),
        (hang_up, ConnectionClosed),
        (silent, ConnectTimeout),
        (evicted, InvalidCredentials),
    ],
)
async def test_hostile_logins_fail_with_typed_errors(script: Script, error: Expected) -> None:
    async with evil(script) as server:
        with pytest.raises(error):
            await connect(server.port)
        assert server.connections == 1  # reconnect=None: no second attempt


async def test_a_login_reply_under_another_client_id_is_tolerated() -> None:
    # Real servers stamp a client id of their own on replies; the official SDK never checks
    # it, so neither do we: the reply is counted, not refused (docs/iggy.md).
    async with evil(someone_elses_reply) as server:
        client = await connect(server.port)
        try:
            assert client.reply_stats.foreign_client == 1
        finally:
            await client.close()


async def test_an_oversized_header_is_refused_from_the_header_alone() -> None:
    async with evil(oversized) as server:
        # the client's login timeout is far away: the refusal cannot be a timeout
        with pytest.raises(FrameTooLargeError) as info:
            await connect(server.port, timeout=30.0)
    assert info.value.size == 0x7FFFFFF0
    assert info.value.limit == MAX_FRAME


async def test_a_silent_server_times_the_login_out_by_the_request_timeout() -> None:
    async with evil(silent) as server:
        with pytest.raises(RequestTimeout):
            await connect(server.port, timeout=30.0, request_timeout=0.3)


# --- after a successful login -------------------------------------------------------------


async def unsolicited_reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await login(reader, writer)
    writer.write(reply_to(request, b"", request=99, operation=Operation.NON_REPLICATED))


async def stray_bytes_then_ping(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    request = await read_request(reader)
    writer.write(reply_to(request, login_body()) + b"junk")  # 4 stray bytes after the reply
    ping = await read_request(reader)
    writer.write(reply_to(ping))  # a correct reply, but now misaligned by the junk


async def garbage_reply_to_ping(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await login(reader, writer)
    ping = await read_request(reader)
    frame = bytearray(reply_to(ping, b"x" * 8))
    frame[60] = 99  # an unknown frame kind, in an otherwise correct reply
    writer.write(bytes(frame))


async def silent_after_login(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await login(reader, writer)


async def close_after_login(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await login(reader, writer)
    await read_request(reader)
    writer.close()


async def test_an_unsolicited_reply_ends_the_connection() -> None:
    async with evil(unsolicited_reply) as server, connected(server.port) as client:
        conn = client._conn
        assert conn is not None
        await wait_until(lambda: conn.error is not None, BUDGET, "the connection failed")
        assert isinstance(conn.error, RemoteProtocolError)
        assert "nobody asked for" in str(conn.error)
        with pytest.raises(RemoteProtocolError):
            async with asyncio.timeout(BUDGET):
                await conn.ping()


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (stray_bytes_then_ping, DecodeError),
        (garbage_reply_to_ping, DecodeError),
        (close_after_login, ConnectionClosed),
    ],
)
async def test_hostile_replies_after_login_fail_the_request(
    script: Script, error: Expected
) -> None:
    async with evil(script) as server:
        async with connected(server.port) as client:
            with pytest.raises(error):
                async with asyncio.timeout(BUDGET):
                    await client.ping(timeout=2.0)
            assert client._conn is not None
            assert not client._conn.is_open
        assert server.connections == 1


async def test_a_silent_server_times_the_request_out() -> None:
    async with (
        evil(silent_after_login) as server,
        connected(server.port, request_timeout=0.3) as client,
    ):
        with pytest.raises(RequestTimeout):
            async with asyncio.timeout(BUDGET):
                await client.ping()
