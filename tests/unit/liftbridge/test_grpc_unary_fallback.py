"""A server without PublishAsync (an in-process grpc.aio server that implements only
FetchMetadata and Publish): the producer's gRPC transport finds out at start and sends every
message as a unary Publish call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest

import streamwire.liftbridge as lb
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from tests.unit.liftbridge.fake_api import dead_port, one_node_metadata, start_api


class OldServer:
    """FetchMetadata (one stream, one partition on this server) and Publish only."""

    def __init__(self) -> None:
        self.published: list[pb.PublishRequest] = []
        self.server = grpc.aio.server()
        self.port = 0

    def metadata(self, request: pb.FetchMetadataRequest, context: Any) -> Any:
        return one_node_metadata(self.port, list(request.streams or ["orders"]))

    async def publish(self, request: pb.PublishRequest, context: Any) -> Any:
        if request.expectedOffset not in (-1, len(self.published)):
            await context.abort(grpc.StatusCode.UNKNOWN, "incorrect expected offset")
        self.published.append(request)
        ack = pb.Ack(
            stream=request.stream, offset=len(self.published) - 1, ackPolicy=request.ackPolicy
        )
        return pb.PublishResponse(ack=ack)

    async def start(self) -> None:
        self.port = await start_api(
            self.server, {"FetchMetadata": self.metadata, "Publish": self.publish}
        )


@pytest.fixture
async def old_server() -> AsyncIterator[OldServer]:
    server = OldServer()
    await server.start()
    try:
        yield server
    finally:
        await server.server.stop(None)


@pytest.mark.parametrize("transport", ["http2", "grpcio"])
async def test_unimplemented_publish_async_moves_to_unary_publish(
    old_server: OldServer, transport: str
) -> None:
    url = f"liftbridge://127.0.0.1:{old_server.port}?nats=nats://127.0.0.1:{dead_port()}"
    client = await lb.connect(url, timeout=5, require_nats=False, publish_transport=transport)
    try:
        async with client.producer("orders", transport="grpc") as producer:
            futures = [await producer.send(b"m%d" % i, key=b"k") for i in range(50)]
            confirmations = await asyncio.wait_for(asyncio.gather(*futures), 10)
            assert producer._grpc is not None
            assert producer._grpc.unary
            assert producer._grpc.streams_opened == 0  # known at start: no stream opened
            assert sorted(c.offset for c in confirmations) == list(range(50))  # type: ignore[type-var]
            with pytest.raises(lb.IncorrectOffset):
                await producer.send_and_wait(b"x", expected_offset=3)
        assert sorted(r.value for r in old_server.published) == sorted(
            b"m%d" % i for i in range(50)
        )
        assert all(r.key == b"k" for r in old_server.published)
    finally:
        await client.close()


class RefusingServer(OldServer):
    """Answers the producer's start probe on PublishAsync, then refuses every PublishAsync
    stream with UNIMPLEMENTED once a request arrived (as a server whose PublishAsync went
    away): what was written on it must go out again as unary Publish calls. Over HTTP/2
    only: grpc.aio reports such a refusal mid-write as INTERNAL "Internal error from Core"
    (why the producer probes at start, ``GrpcPublisher.start``)."""

    def __init__(self) -> None:
        super().__init__()
        self.streams = 0

    async def publish_async(self, requests: Any, context: Any) -> AsyncIterator[Any]:
        self.streams += 1
        async for _ in requests:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "no PublishAsync here")
        for _ in ():  # an async generator that yields nothing: the probe ends with OK
            yield pb.PublishResponse()

    async def start(self) -> None:
        self.port = await start_api(
            self.server,
            {"FetchMetadata": self.metadata, "Publish": self.publish},
            {"PublishAsync": self.publish_async},
        )


async def test_unimplemented_on_a_stream_sends_what_was_written_as_unary_publish() -> None:
    server = RefusingServer()
    await server.start()
    url = f"liftbridge://127.0.0.1:{server.port}?nats=nats://127.0.0.1:{dead_port()}"
    client = await lb.connect(url, timeout=5, require_nats=False, publish_transport="http2")
    try:
        async with client.producer("orders", transport="grpc") as producer:
            publisher = producer._grpc
            assert publisher is not None
            at_start = publisher.unary
            assert not at_start  # the probe found PublishAsync
            futures = [await producer.send(b"u%d" % i) for i in range(30)]
            confirmations = await asyncio.wait_for(asyncio.gather(*futures), 10)
            assert publisher.unary
            assert publisher.streams_opened == 1
        assert sorted(c.offset for c in confirmations) == list(range(30))  # type: ignore[type-var]
        assert sorted(r.value for r in server.published) == sorted(b"u%d" % i for i in range(30))
        assert server.streams == 2  # the probe and the refused stream
    finally:
        await client.close()
        await server.server.stop(None)
