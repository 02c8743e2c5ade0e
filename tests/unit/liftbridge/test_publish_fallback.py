"""``publish_transport``: ``auto`` carries PublishAsync on grpc.aio for a broker that does not
speak HTTP/2 (and remembers it), ``http2`` refuses it, ``grpcio`` never tries; a client made
with gRPC credentials alone publishes with grpcio. The server is the in-process grpc.aio
server of ``test_grpc_resend``; a server that does not speak HTTP/2 is played by failing the
HTTP/2 connection where a TLS server without ALPN ``h2`` fails it (``alpn``: the call is not
opened), or by replacing the server's first bytes with an HTTP/1.1 answer (``first frame``:
requests are written before the server's first frame, so the call opens, breaks once, and
the next stream goes over grpcio)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

import streamwire.liftbridge as lb
from streamwire.errors import ConfigurationError, ConnectError
from streamwire.liftbridge._publish_calls import GrpcioPublishCall, H2PublishCall
from streamwire.liftbridge.client import Client
from streamwire.transport import h2grpc
from streamwire.transport.h2machine import Event, H2Machine
from tests.unit.liftbridge.fake_api import dead_port
from tests.unit.liftbridge.test_grpc_resend import FAST, FlakyServer

BUDGET = 10.0


@pytest.fixture
async def server() -> AsyncIterator[FlakyServer]:
    srv = FlakyServer()
    await srv.start()
    try:
        yield srv
    finally:
        await srv.server.stop(None)


async def connect(srv: FlakyServer, transport: str, **kwargs: object) -> lb.Client:
    url = f"liftbridge://127.0.0.1:{srv.port}?nats=nats://127.0.0.1:{dead_port()}"
    return await lb.connect(
        url,
        timeout=5,
        require_nats=False,
        publish_transport=transport,
        **kwargs,  # type: ignore[arg-type]
    )


class Attempts(list[int]):
    """HTTP/2 connections tried, and how the server refused them."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode


@pytest.fixture(params=["alpn", "first frame"])
def no_http2(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Attempts:
    """Every HTTP/2 connection meets a server that does not speak it; counts the attempts."""
    attempts = Attempts(str(request.param))

    async def alpn(cls: type[h2grpc.H2Channel], /, *args: object, **kwargs: object) -> None:
        attempts.append(1)  # where a TLS server without ALPN h2 stops the connection
        raise h2grpc.NotHttp2("the server did not agree to HTTP/2 (ALPN h2)")

    received = H2Machine.receive_data
    answered: set[int] = set()

    def http1(self: H2Machine, data: bytes, now: float) -> list[Event]:
        if id(self) not in answered:  # the server's first bytes: an HTTP/1.1 answer
            answered.add(id(self))
            attempts.append(1)
            data = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
        return received(self, data, now)

    if request.param == "alpn":
        monkeypatch.setattr(h2grpc.H2Channel, "connect", classmethod(alpn))
    else:
        monkeypatch.setattr(H2Machine, "receive_data", http1)
    return attempts


async def test_auto_falls_back_to_grpcio_and_remembers_the_broker(
    server: FlakyServer, no_http2: Attempts
) -> None:
    client = await connect(server, "auto", reconnect=FAST)
    # alpn: the HTTP/2 call is not opened; first frame: it opens, breaks, and the next
    # stream goes over grpcio
    streams = [1 if no_http2.mode == "alpn" else 2, 1]
    try:
        for value, opened in zip((b"one", b"two"), streams, strict=True):
            async with client.producer("orders", transport="grpc") as producer:
                async with asyncio.timeout(BUDGET):
                    confirmation = await producer.send_and_wait(value)
                assert producer._grpc is not None
                assert isinstance(producer._grpc._call, GrpcioPublishCall)
                assert producer._grpc.streams_opened == opened
            assert confirmation.offset is not None
            assert server.stored[confirmation.offset] == value
    finally:
        await client.close()
    assert len(no_http2) == 1  # the second producer went straight to grpcio
    # (first frame: the real server may have stored the first request of the HTTP/2 call
    # too; at-least-once)
    assert set(server.stored) == {b"one", b"two"}


async def test_http2_only_refuses_a_server_without_it(
    server: FlakyServer, no_http2: Attempts
) -> None:
    client = await connect(server, "http2", reconnect=None)
    try:
        async with client.producer("orders", transport="grpc") as producer:
            with pytest.raises(ConnectError, match="does not speak HTTP/2"):
                async with asyncio.timeout(BUDGET):
                    await producer.send_and_wait(b"never")
    finally:
        await client.close()
    assert no_http2
    assert server.stored == []


async def call_of_one_publish(client: Client) -> object:
    """The PublishAsync call a gRPC producer of ``client`` carried one message on."""
    async with client.producer("orders", transport="grpc") as producer:
        async with asyncio.timeout(BUDGET):
            await producer.send_and_wait(b"x")
        return producer._grpc._call if producer._grpc else None


@pytest.mark.parametrize(
    ("transport", "kind"),
    [("grpcio", GrpcioPublishCall), ("auto", H2PublishCall), ("http2", H2PublishCall)],
)
async def test_the_transport_chooses_the_call(
    server: FlakyServer, transport: str, kind: type
) -> None:
    client = await connect(server, transport)
    try:
        assert isinstance(await call_of_one_publish(client), kind)
    finally:
        await client.close()


async def test_credentials_alone_publish_with_grpcio_and_bad_values_are_refused() -> None:
    creds = grpc.ssl_channel_credentials()
    client = Client("127.0.0.1", 1, nats_servers=["nats://127.0.0.1:1"], grpc_credentials=creds)
    assert client.publish_transport == "grpcio"
    await client.close()
    with pytest.raises(ConfigurationError, match="publish_transport"):
        Client("127.0.0.1", 1, nats_servers=["nats://x:1"], publish_transport="h3")


async def test_http2_tries_a_broker_that_auto_fell_back_for(server: FlakyServer) -> None:
    """The brokers ``auto`` fell back for (publishing or subscribing) are shared by the
    client; ``http2`` still tries them."""
    client = await connect(server, "http2")
    client._h2_refused.add(("127.0.0.1", server.port))
    try:
        assert isinstance(await call_of_one_publish(client), H2PublishCall)
    finally:
        await client.close()
