"""``subscribe_transport``: ``auto`` falls back to grpcio's reading thread for a broker that
does not negotiate HTTP/2 (and remembers it), ``http2`` refuses it, ``grpcio`` never tries;
a client made with gRPC credentials alone reads with grpcio. The server is the scripted
gRPC server of ``test_consumer_close``; a server that does not agree to HTTP/2 is played by
failing the HTTP/2 connection where a TLS server without ALPN ``h2`` fails it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import grpc
import pytest

from streamwire.errors import ConfigurationError, ConnectError
from streamwire.liftbridge._h2_subscription import H2Subscription
from streamwire.liftbridge._stream_reader import Subscription
from streamwire.liftbridge.client import Client
from streamwire.transport import h2grpc
from tests.unit.liftbridge.test_consumer_close import (
    BUDGET,
    Call,
    FakeApi,
    client_of,
    handshake,
    message,
)


def script(call: Call) -> Iterator[bytes]:
    yield handshake()
    yield message(0)
    yield from call.hang()


@pytest.fixture
def no_http2(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every HTTP/2 connection is refused as not HTTP/2; counts the attempts."""
    attempts: list[int] = []

    async def refuse(cls: type[h2grpc.H2Channel], /, *args: object, **kwargs: object) -> None:
        attempts.append(1)  # where a TLS server without ALPN h2 stops the connection
        raise h2grpc.NotHttp2("the server did not agree to HTTP/2 (ALPN h2)")

    monkeypatch.setattr(h2grpc.H2Channel, "connect", classmethod(refuse))
    return attempts


async def test_auto_falls_back_to_grpcio_and_remembers_the_broker(no_http2: list[int]) -> None:
    with FakeApi([script]) as api:
        async with client_of(api, subscribe_transport="auto") as client:
            for _ in range(2):
                consumer = client.consumer("s")
                async with asyncio.timeout(BUDGET):
                    await consumer.start()
                    got = await consumer.next(timeout=BUDGET)
                assert got is not None
                assert got.value == b"m0"
                assert isinstance(consumer._subscription, Subscription)
                await consumer.close()
    assert len(no_http2) == 1  # the second consumer went straight to grpcio


async def test_http2_only_refuses_a_server_without_it(no_http2: list[int]) -> None:
    with FakeApi([script]) as api:
        async with client_of(api, subscribe_transport="http2") as client:
            consumer = client.consumer("s")
            with pytest.raises(ConnectError, match="does not speak HTTP/2"):
                async with asyncio.timeout(BUDGET):
                    await consumer.start()
    assert no_http2


@pytest.mark.parametrize(
    ("transport", "kind"), [("grpcio", Subscription), ("auto", H2Subscription)]
)
async def test_the_transport_chooses_the_reader(transport: str, kind: type) -> None:
    with FakeApi([script]) as api:
        async with client_of(api, subscribe_transport=transport) as client:
            consumer = client.consumer("s")
            async with asyncio.timeout(BUDGET):
                await consumer.start()
            assert isinstance(consumer._subscription, kind)
            await consumer.close()


async def test_credentials_alone_read_with_grpcio() -> None:
    creds = grpc.ssl_channel_credentials()
    client = Client("127.0.0.1", 1, nats_servers=["nats://127.0.0.1:1"], grpc_credentials=creds)
    assert client.subscribe_transport == "grpcio"
    await client.close()
    with pytest.raises(ConfigurationError, match="subscribe_transport"):
        Client("127.0.0.1", 1, nats_servers=["nats://x:1"], subscribe_transport="h3")
