"""Hostile Liftbridge peers on loopback: a fake NATS server and a fake gRPC port.

``streamwire.liftbridge.connect`` asks the gRPC port for metadata, then opens NATS (INFO,
CONNECT, PING/PONG), subscribes the ack inbox and flushes. Each scenario must end in a typed
streamwire error within the client's timeout (``asyncio.timeout`` around each call enforces the
bound), the event loop keeps running other work, and no task or socket of the client is left
(:class:`tests.proxy.LeakCheck`, checked while the hostile server still holds its end open).

NATS side (the gRPC side is a well-behaved in-process server): garbage or ``-ERR`` instead of
PONG, an oversized control line, a bad INFO, no INFO at all, a hang-up, and a ``MSG`` with a
wrong size or cut mid-payload. What nats-py allows, and therefore what is asserted:

* nats-py reads the handshake with ``StreamReader.readline`` (64 KiB limit): an oversized line
  there is refused from the limit alone, as :class:`RemoteProtocolError`.
* A ``MSG`` that breaks the protocol *after* the handshake is not reported to the caller by
  nats-py: it drops the connection and reconnects on its own (``allow_reconnect``). During
  ``connect`` the ack-inbox flush then never completes, so the honest guarantee is
  :class:`ConnectTimeout` at the client's deadline; on an established client the break shows
  as a disconnect/reconnect in ``client.stats.nats`` and the client keeps working once the
  server behaves again.

gRPC side: garbage instead of HTTP/2, an immediate hang-up, silence, and a well-formed gRPC
reply whose protobuf payload is garbage, both through ``connect`` and through control-plane
calls (FetchMetadata, CreateStream) of a client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

import streamwire.liftbridge as lb
from streamwire.errors import (
    ConnectError,
    ConnectionClosed,
    ConnectTimeout,
    DecodeError,
    RemoteProtocolError,
    RequestTimeout,
    StreamwireError,
)
from streamwire.liftbridge.client import Client
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from tests.hostile import Evil, Script, hostile_server, released
from tests.proxy import LeakCheck, wait_until

Expected = type[StreamwireError] | tuple[type[StreamwireError], ...]

BUDGET = 8.0
"""``asyncio.timeout`` around every client call: far above the client's own timeouts."""

TIMEOUT = 1.0
"""The client's own ``timeout`` in the scenarios that end in a timeout."""

INFO = (
    b'INFO {"server_id":"evil","server_name":"evil","version":"2.10.0","proto":1,'
    b'"host":"127.0.0.1","port":4222,"headers":true,"max_payload":1048576}\r\n'
)


# --- fake servers ---------------------------------------------------------------------------


def _metadata(request: bytes, context: grpc.ServicerContext) -> bytes:
    return pb.FetchMetadataResponse().SerializeToString()


def _undecodable(request: bytes, context: grpc.ServicerContext) -> bytes:
    return b"\xff\xff\xff\xff\x0f"  # a truncated varint: no protobuf message decodes from it


@contextlib.contextmanager
def grpc_server(reply: Callable[[bytes, grpc.ServicerContext], bytes]) -> Iterator[int]:
    """A real gRPC server (threads, not this event loop) answering every ``proto.API`` unary
    call with ``reply``'s bytes."""
    handler = grpc.unary_unary_rpc_method_handler(reply)  # raw bytes both ways
    names = ("FetchMetadata", "CreateStream")
    generic = grpc.method_handlers_generic_handler("proto.API", dict.fromkeys(names, handler))
    server = grpc.server(ThreadPoolExecutor(max_workers=2), handlers=(generic,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(None).wait(5)


def _tcp(port: int | None = None) -> set[str]:
    """This host's TCP sockets (``socket:[inode]``), or those connected to ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            for row in list(rows)[1:]:
                cols = row.split()
                if port is None or int(cols[2].rsplit(":", 1)[1], 16) == port:
                    found.add(f"socket:[{cols[9]}]")
    return found


async def lb_released(check: LeakCheck, state: Evil, *, connecting_ok: bool) -> None:
    """Wait (bounded) until the client holds no task and no TCP socket, the hostile server's
    own handlers and accepted sockets excepted (and, with ``connecting_ok``, gRPC's connection
    attempts to it: see the module notes)."""
    await released(
        check,
        state,
        allowed=lambda: _tcp(state.port) if connecting_ok else set(),
        counted=lambda sockets: [s for s in sockets if s in _tcp()],
    )


def evil(
    script: Script, *, connecting_ok: bool = False
) -> contextlib.AbstractAsyncContextManager[Evil]:
    """A TCP server playing ``script`` to every connection, then holding the line open.

    On exit: the loop must still have run a ticker; the client must have let go of every task
    and socket while the server still holds its end, and of everything once it is gone."""

    async def while_open(check: LeakCheck, state: Evil) -> None:
        await lb_released(check, state, connecting_ok=connecting_ok)

    async def after(check: LeakCheck, state: Evil) -> None:
        await lb_released(check, state, connecting_ok=False)

    return hostile_server(script, budget=BUDGET, while_open=while_open, after=after)


async def connect(grpc_port: int, nats_port: int, **kwargs: Any) -> lb.Client:
    url = f"liftbridge://127.0.0.1:{grpc_port}?nats=nats://127.0.0.1:{nats_port}"
    kwargs.setdefault("timeout", TIMEOUT)
    async with asyncio.timeout(BUDGET):
        return await lb.connect(url, reconnect=None, **kwargs)


# --- NATS scripts ---------------------------------------------------------------------------


async def read_until_ping(reader: asyncio.StreamReader) -> list[bytes]:
    """Read protocol lines up to and including the next PING."""
    lines = []
    while not (line := await reader.readline()).startswith(b"PING"):
        if not line:
            raise ConnectionError("the client hung up")
        lines.append(line)
    return lines


async def nats_garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(INFO)
    await read_until_ping(reader)
    writer.write(b"\x00\xffHELLO GARBAGE\r\n" * 3)  # neither PONG nor -ERR


async def nats_err(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(INFO)
    await read_until_ping(reader)
    writer.write(b"-ERR 'Authorization Violation'\r\n")


async def nats_oversized_line(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(INFO)
    await read_until_ping(reader)
    writer.write(b"PONG" + b"A" * (1 << 20))  # a 1 MiB control line, no end in sight


async def nats_oversized_info(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b'INFO {"server_id":"' + b"A" * (1 << 20))


async def nats_bad_info(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"INFO {this is not json\r\n")


async def nats_not_info(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")


async def nats_no_info(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(100)  # accepts, reads, says nothing


async def nats_hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()


async def read_ack_inbox_sub(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """After the handshake: read up to the ack inbox's SUB and the PING of the flush that
    follows it (nats-py may write them in either order); return the subject and sid."""
    pinged = False
    while not (line := await reader.readline()).startswith(b"SUB"):
        if not line:
            raise ConnectionError("the client hung up")
        pinged = pinged or line.startswith(b"PING")
    if not pinged:
        await read_until_ping(reader)
    _, subject, sid = line.split()
    return subject, sid


async def _handshake_then(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, message: bytes, *, close: bool
) -> None:
    """A correct handshake; then, instead of the PONG to the ack-inbox flush, ``message``
    (``{}`` stands for the ack inbox's subject and sid)."""
    writer.write(INFO)
    await read_until_ping(reader)
    writer.write(b"PONG\r\n")
    subject, sid = await read_ack_inbox_sub(reader)
    writer.write(message.replace(b"{}", subject + b" " + sid))
    await writer.drain()
    if close:
        writer.close()


async def nats_msg_wrong_size(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _handshake_then(reader, writer, b"MSG {} 3\r\nhello world\r\nPONG\r\n", close=False)


async def nats_msg_cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _handshake_then(reader, writer, b"MSG {} 100\r\nhello", close=True)


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (nats_garbage, RemoteProtocolError),
        (nats_err, ConnectError),
        (nats_oversized_line, RemoteProtocolError),
        (nats_oversized_info, RemoteProtocolError),
        (nats_bad_info, ConnectError),
        (nats_not_info, ConnectError),
        (nats_hang_up, ConnectError),
        (nats_no_info, ConnectTimeout),
        (nats_msg_wrong_size, ConnectTimeout),  # nats-py reconnects instead of failing
        (nats_msg_cut, ConnectTimeout),  # ditto
    ],
)
async def test_hostile_nats_servers_fail_connect_with_typed_errors(
    script: Script, error: Expected
) -> None:
    with grpc_server(_metadata) as grpc_port:
        async with evil(script) as nats:
            with pytest.raises(error):
                await connect(grpc_port, nats.port)


async def test_a_broken_msg_after_connect_is_survived() -> None:
    """The first connection sends a MSG whose payload is longer than announced once the client
    is up; nats-py drops it and reconnects to the (now well-behaved) server."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(INFO)
        await read_until_ping(reader)
        writer.write(b"PONG\r\n")
        if nats.connections == 1:
            subject, sid = await read_ack_inbox_sub(reader)
            writer.write(b"PONG\r\n")  # connect() completes
            await read_until_ping(reader)  # the test's first flush
            writer.write(b"MSG " + subject + b" " + sid + b" 3\r\nhello world\r\n")
            await writer.drain()
        while True:
            await read_until_ping(reader)
            writer.write(b"PONG\r\n")

    with grpc_server(_metadata) as grpc_port:
        async with evil(script) as nats:
            options = {"reconnect_time_wait": 0.05}
            client = await connect(grpc_port, nats.port, nats_options=options)
            try:
                with contextlib.suppress(RequestTimeout):  # the PONG never comes
                    async with asyncio.timeout(BUDGET):
                        await client._flush_nats(0.5)
                await wait_until(lambda: client.stats.nats.reconnects == 1, BUDGET, "reconnect")
                assert client.stats.nats.disconnects >= 1
                async with asyncio.timeout(BUDGET):
                    await client._flush_nats(2.0)
            finally:
                async with asyncio.timeout(BUDGET):
                    await client.close()
            assert nats.connections == 2


# --- gRPC side ------------------------------------------------------------------------------


async def grpc_garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(100)
    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" + b"\xde\xad" * 512)


async def grpc_hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()


async def grpc_silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while await reader.read(65536):  # swallows the HTTP/2 preface and SETTINGS, answers nothing
        pass


async def real_nats(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    raise AssertionError("the gRPC failure must come before NATS is dialled")


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (grpc_garbage, ConnectError),
        (grpc_hang_up, ConnectionClosed),  # as on RabbitMQ and Iggy: test_transport_events.py
        (grpc_silent, ConnectTimeout),
    ],
)
async def test_hostile_grpc_ports_fail_connect_with_typed_errors(
    script: Script, error: Expected
) -> None:
    silent = script is grpc_silent
    async with evil(real_nats) as nats, evil(script, connecting_ok=silent) as port:
        with pytest.raises(error):
            await connect(port.port, nats.port)
        assert port.connections >= 1
        assert nats.connections == 0


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (grpc_garbage, ConnectError),
        (grpc_hang_up, ConnectError),
        (grpc_silent, RequestTimeout),
    ],
)
async def test_control_plane_calls_to_a_hostile_port_fail_with_typed_errors(
    script: Script, error: Expected
) -> None:
    async with evil(script, connecting_ok=script is grpc_silent) as port:
        client = Client("127.0.0.1", port.port, nats_servers=["nats://127.0.0.1:1"])
        try:
            with pytest.raises(error):
                async with asyncio.timeout(BUDGET):
                    await client.fetch_metadata(timeout=TIMEOUT)
            with pytest.raises(error):
                async with asyncio.timeout(BUDGET):
                    await client.create_stream("s", timeout=TIMEOUT)
        finally:
            async with asyncio.timeout(BUDGET):
                await client.close()


async def test_an_undecodable_grpc_reply_fails_with_a_decode_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """grpc.aio logs a response that does not deserialize and returns None: the client must
    not hand that on (it used to fail with AttributeError in metadata_from_pb).

    grpc logs the protobuf error with ``exc_info``; pytest's log capture keeps that record, and
    its traceback keeps the call and so the (closed) channel's connection open until the test
    ends. The logger is silenced here so that the leak check sees what an application sees."""
    monkeypatch.setattr(logging.getLogger("grpc._common"), "disabled", True)
    with grpc_server(_undecodable) as grpc_port:
        async with evil(real_nats) as nats:
            with pytest.raises(DecodeError, match="FetchMetadataResponse"):
                await connect(grpc_port, nats.port)
            client = Client("127.0.0.1", grpc_port, nats_servers=["nats://127.0.0.1:1"])
            try:
                with pytest.raises(DecodeError, match="CreateStreamResponse"):
                    async with asyncio.timeout(BUDGET):
                        await client.create_stream("s", timeout=TIMEOUT)
            finally:
                async with asyncio.timeout(BUDGET):
                    await client.close()
