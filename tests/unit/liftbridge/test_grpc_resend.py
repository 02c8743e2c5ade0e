"""The gRPC publish path's bookkeeping when a PublishAsync stream breaks, against an
in-process grpc.aio server whose streams break as each test scripts: what waited is written
again on a new stream (first sent first, nothing acked twice), within the client's reconnect
policy; past it, or with ``reconnect=None``, or on an error that is not transient, what waits
fails; a message that timed out while waiting is not written again. Over both
``publish_transport``s (streamwire's HTTP/2 client, grpc.aio)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
import pytest

import streamwire.liftbridge as lb
from streamwire import ConnectError, ConnectionClosed
from streamwire.liftbridge import ReconnectPolicy
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import Unauthenticated
from tests.proxy import wait_until
from tests.unit.liftbridge.fake_api import dead_port, one_node_metadata, start_api

FAST = ReconnectPolicy(initial_delay=0.01, max_delay=0.05, max_elapsed=10)


@dataclass
class Plan:
    """What one PublishAsync stream does: ack the first ``acks`` requests (all: ``None``),
    and after ``abort_after`` requests (never: ``None``), once ``release`` is set, end with
    status ``code``."""

    acks: int | None = None
    abort_after: int | None = None
    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.release.set()


class FlakyServer:
    """FetchMetadata (stream ``orders``, one partition here) and PublishAsync following
    :class:`Plan`s, one per stream that carries a request (then: ack everything)."""

    def __init__(self, *plans: Plan) -> None:
        self.plans = list(plans)
        self.received: list[list[bytes]] = []
        """The values each stream carried, by stream."""
        self.stored: list[bytes] = []
        """The acked values, in offset order."""
        self.server = grpc.aio.server()
        self.port = 0

    def metadata(self, request: pb.FetchMetadataRequest, context: Any) -> Any:
        return one_node_metadata(self.port, list(request.streams or ["orders"]))

    async def publish_async(self, requests: Any, context: Any) -> AsyncIterator[Any]:
        plan: Plan | None = None
        carried: list[bytes] = []
        async for request in requests:
            if plan is None:
                plan = self.plans.pop(0) if self.plans else Plan()
                self.received.append(carried)
            carried.append(request.value)
            if plan.acks is None or len(carried) <= plan.acks:
                self.stored.append(request.value)
                ack = pb.Ack(stream=request.stream, offset=len(self.stored) - 1)
                yield pb.PublishResponse(correlationId=request.correlationId, ack=ack)
            if plan.abort_after is not None and len(carried) >= plan.abort_after:
                await plan.release.wait()
                await context.abort(plan.code, "the stream broke (scripted)")

    async def start(self) -> None:
        self.port = await start_api(
            self.server, {"FetchMetadata": self.metadata}, {"PublishAsync": self.publish_async}
        )


class Servers(list[FlakyServer]):
    """The servers a test started, and how its clients carry PublishAsync streams."""

    def __init__(self, transport: str) -> None:
        super().__init__()
        self.transport = transport


@pytest.fixture(params=["http2", "grpcio"])
async def serve(request: pytest.FixtureRequest) -> AsyncIterator[list[FlakyServer]]:
    """Every test runs with both ``publish_transport``s."""
    servers = Servers(request.param)
    try:
        yield servers
    finally:
        for server in servers:
            await server.server.stop(None)


async def client_of(
    servers: list[FlakyServer], *plans: Plan, reconnect: ReconnectPolicy | None = FAST
) -> tuple[FlakyServer, lb.Client]:
    server = FlakyServer(*plans)
    await server.start()
    servers.append(server)
    url = f"liftbridge://127.0.0.1:{server.port}?nats=nats://127.0.0.1:{dead_port()}"
    transport = servers.transport if isinstance(servers, Servers) else "auto"
    client = await lb.connect(
        url, timeout=5, require_nats=False, reconnect=reconnect, publish_transport=transport
    )
    return server, client


async def test_what_waited_on_a_broken_stream_is_sent_again_in_order(
    serve: list[FlakyServer],
) -> None:
    server, client = await client_of(serve, Plan(acks=3, abort_after=10))
    values = [b"m%02d" % i for i in range(20)]
    try:
        async with client.producer("orders", transport="grpc") as producer:
            futures = [await producer.send(v) for v in values]
            confirmed = await asyncio.wait_for(asyncio.gather(*futures), 10)
            publisher = producer._grpc
            assert publisher is not None
            assert publisher.streams_opened == 2
            # m03..m09 reached the server on the first stream, unacked: written again
            assert publisher.resent >= 7
    finally:
        await client.close()
    assert [c.offset for c in confirmed] == list(range(20))
    assert server.stored == values  # each acked once, in the order first sent
    assert server.received[0][:10] == values[:10]
    assert server.received[1] == values[3:]  # from the first unacked one, in order


async def test_after_the_policys_attempts_what_waits_fails_chained_to_the_last_error(
    serve: list[FlakyServer],
) -> None:
    broken = [Plan(acks=0, abort_after=1, code=grpc.StatusCode.UNAVAILABLE) for _ in range(9)]
    policy = ReconnectPolicy(initial_delay=0.01, max_delay=0.02, max_attempts=3, max_elapsed=None)
    server, client = await client_of(serve, *broken, reconnect=policy)
    try:
        async with client.producer("orders", transport="grpc") as producer:
            with pytest.raises(ConnectionClosed) as info:
                await producer.send_and_wait(b"x", timeout=10)
    finally:
        await client.close()
    assert "gave up sending again after 4 broken streams" in str(info.value)
    assert isinstance(info.value.__cause__, ConnectError)  # UNAVAILABLE, each time
    assert server.received == [[b"x"]] * 4  # the first try and three more
    assert server.stored == []


async def test_without_a_reconnect_policy_what_waits_fails_at_once(
    serve: list[FlakyServer],
) -> None:
    server, client = await client_of(serve, Plan(acks=0, abort_after=1), reconnect=None)
    try:
        async with client.producer("orders", transport="grpc") as producer:
            with pytest.raises(ConnectionClosed) as info:
                await producer.send_and_wait(b"x", timeout=10)
            assert "the stream broke" in str(info.value)
            assert (await producer.send_and_wait(b"y", timeout=10)).offset == 0  # a new stream
    finally:
        await client.close()
    assert server.received == [[b"x"], [b"y"]]


async def test_an_error_that_is_not_transient_is_not_retried(serve: list[FlakyServer]) -> None:
    plan = Plan(acks=0, abort_after=1, code=grpc.StatusCode.UNAUTHENTICATED)
    server, client = await client_of(serve, plan)
    try:
        async with client.producer("orders", transport="grpc") as producer:
            with pytest.raises(Unauthenticated):
                await producer.send_and_wait(b"x", timeout=10)
    finally:
        await client.close()
    assert server.received == [[b"x"]]


async def test_a_message_that_timed_out_is_not_written_again(serve: list[FlakyServer]) -> None:
    held = Plan(acks=0, abort_after=5)
    held.release.clear()  # the stream stays open, silent, until the test breaks it
    server, client = await client_of(serve, held)
    try:
        async with client.producer("orders", transport="grpc", ack_timeout=0.2) as producer:
            futures = [await producer.send(b"late%d" % i) for i in range(5)]
            results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 10)
            assert all(isinstance(r, lb.AckTimeout) for r in results), results
            publisher = producer._grpc
            assert publisher is not None
            held.release.set()  # now the stream breaks: nothing waits any more
            await wait_until(lambda: publisher.streams_broken == 1, 10, "the stream broke")
            confirmation = await producer.send_and_wait(b"next", timeout=10)
            assert publisher.resent == 0
    finally:
        await client.close()
    assert server.received == [[b"late%d" % i for i in range(5)], [b"next"]]
    assert confirmation.offset == 0


async def test_a_stream_cancelled_by_the_client_close_is_not_kept_by_the_producer(
    serve: list[FlakyServer],
) -> None:
    """The client closes while a message waits for its ack (the server never acks): the
    reader is cancelled mid-read. The producer object the caller still holds must not keep
    the gRPC call alive (a live call keeps its HTTP/2 connection open after the channel
    closed): not through the cancelled reader task, its exception or the half-close."""
    _, client = await client_of(serve, Plan(acks=0))
    producer = await client.producer("orders", transport="grpc", ack_timeout=30)
    future = await producer.send(b"never acked")
    publisher = producer._grpc
    assert publisher is not None
    await wait_until(lambda: publisher._call is not None, 5, "the stream opened")
    call = weakref.ref(publisher._call)
    reader = publisher._reader
    assert reader is not None
    await wait_until(lambda: serve[0].received == [[b"never acked"]], 5, "the request written")
    await producer.close(flush=False)
    await client.close()
    with pytest.raises(ConnectionClosed, match="the client closed before the ack"):
        await future
    assert reader.cancelled()
    del reader, future
    gc.collect()
    assert call() is None
