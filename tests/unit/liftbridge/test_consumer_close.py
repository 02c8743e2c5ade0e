"""The Liftbridge consumer's subscriptions against a scripted in-process gRPC server.

Every test runs with both readers of a Subscribe call: a thread per call over grpc's
synchronous API (``subscribe_transport="grpcio"``, ``streamwire.liftbridge._stream_reader``)
and streamwire's own HTTP/2 reader on the event loop (``"http2"``,
``streamwire.liftbridge._h2_subscription``), which this grpcio server also checks for
interoperability. The server here is a real gRPC server (threads, not
this event loop): FetchMetadata names one stream ``s`` whose partition 0 it leads, and every
Subscribe call plays the next script. What is checked:

* closing cancels the call, ends the thread within a bounded time, and drops every reference
  to the call: grpc keeps a call's HTTP/2 connection open while the call is alive, which
  ``tests/integration/liftbridge/test_faults.py`` found twice with grpc.aio (a reader task's
  traceback, an error chained to grpc's ``AioRpcError``), and once more with the synchronous
  API (a cancelled call's last event left unconsumed);
* a broken stream is subscribed again right after the last message received; the end of a
  stream, a stop position and an undecodable message end consumption as before;
* ``start`` fails with the same streamwire errors as before (NotFound, no handshake in time,
  its own deadline), and no thread is left when it does;
* the thread waits while ``max_buffered_messages`` are buffered.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

import streamwire.liftbridge._h2_subscription as h2_subscription
import streamwire.liftbridge._stream_reader as stream_reader
import streamwire.liftbridge.consumer as consumer_module
from streamwire.codec.offset import Offset
from streamwire.errors import (
    ConnectionClosed,
    DecodeError,
    RequestTimeout,
)
from streamwire.liftbridge import ReconnectPolicy, StreamNotFound
from streamwire.liftbridge._h2_subscription import H2Subscription
from streamwire.liftbridge._stream_reader import THREAD_NAME
from streamwire.liftbridge.client import Client
from streamwire.liftbridge.consumer import Consumer
from streamwire.liftbridge.protocol import messages
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.transport import h2grpc
from tests.proxy import wait_until

BUDGET = 10.0
"""``asyncio.timeout`` around waits that must end on their own."""

Script = Callable[["Call"], Iterator[bytes]]


TRANSPORTS = ("grpcio", "http2")
transport = TRANSPORTS[0]  # set by the autouse fixture below


@pytest.fixture(autouse=True, params=TRANSPORTS)
def subscribe_transport(request: pytest.FixtureRequest) -> Iterator[str]:
    global transport
    transport = request.param
    yield transport
    transport = TRANSPORTS[0]


def reader_threads() -> list[Any]:
    """The readers still running: grpcio's threads, or the HTTP/2 subscriptions' tasks."""
    threads = [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]
    tasks = [t for t in asyncio.all_tasks() if t.get_name().startswith("streamwire h2 ")]
    return [*threads, *tasks]


def handshake() -> bytes:
    return pb.Message().SerializeToString()  # the server's empty first message


def message(offset: int, value: bytes | None = None) -> bytes:
    value = b"m%d" % offset if value is None else value
    return pb.Message(offset=offset, value=value, stream="s").SerializeToString()


class Call:
    """What a script sees of one Subscribe call."""

    def __init__(self, request: pb.SubscribeRequest, context: grpc.ServicerContext) -> None:
        self.request = request
        self.context = context
        self.ended = threading.Event()
        context.add_callback(self.ended.set)

    def hang(self) -> Iterator[bytes]:
        """Send nothing more until the client cancels (bounded)."""
        self.ended.wait(30)
        return iter(())

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.context.abort(code, details)


class FakeApi:
    """A gRPC server on loopback answering FetchMetadata and playing ``scripts`` (one per
    Subscribe call, in order; the last one again when they run out)."""

    def __init__(self, scripts: list[Script]) -> None:
        self.scripts = scripts
        self.calls: list[Call] = []
        self.port = 0
        self._server: Any = None

    def __enter__(self) -> FakeApi:
        handlers = {
            "FetchMetadata": grpc.unary_unary_rpc_method_handler(self._metadata),
            "Subscribe": grpc.unary_stream_rpc_method_handler(self._subscribe),
        }
        generic = grpc.method_handlers_generic_handler("proto.API", handlers)
        self._server = grpc.server(ThreadPoolExecutor(max_workers=4), handlers=(generic,))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(None).wait(5)

    def _metadata(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        partition = pb.PartitionMetadata(id=0, leader="b1", replicas=["b1"], isr=["b1"])
        stream = pb.StreamMetadata(name="s", subject="s", partitions={0: partition})
        broker = pb.Broker(id="b1", host="127.0.0.1", port=self.port)
        reply = pb.FetchMetadataResponse(brokers=[broker], streamMetadata=[stream])
        return reply.SerializeToString()

    def _subscribe(self, request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        call = Call(pb.SubscribeRequest.FromString(request), context)
        self.calls.append(call)
        script = self.scripts[min(len(self.calls), len(self.scripts)) - 1]
        yield from script(call)


@contextlib.asynccontextmanager
async def client_of(api: FakeApi, **kwargs: Any) -> AsyncIterator[Client]:
    kwargs.setdefault("reconnect", ReconnectPolicy(initial_delay=0.01, max_elapsed=5.0))
    kwargs.setdefault("request_timeout", 5.0)
    kwargs.setdefault("subscribe_transport", transport)
    client = Client("127.0.0.1", api.port, nats_servers=["nats://127.0.0.1:1"], **kwargs)
    try:
        yield client
    finally:
        async with asyncio.timeout(BUDGET):
            await client.close()
        assert not reader_threads(), "a reading thread outlived its client"


async def started(client: Client, **kwargs: Any) -> Consumer:
    consumer = client.consumer("s", **kwargs)
    async with asyncio.timeout(BUDGET):
        await consumer.start()
    return consumer


async def expect_value(consumer: Consumer, value: bytes) -> None:
    """The consumer's next message arrives within the budget and carries ``value``."""
    got = await consumer.next(timeout=BUDGET)
    assert got is not None, "no message within the budget"
    assert got.value == value


# --- closing --------------------------------------------------------------------------------


async def test_close_ends_the_thread_cancels_the_call_and_drops_it() -> None:
    def script(call: Call) -> Iterator[bytes]:
        yield handshake()
        yield message(0)
        yield from call.hang()

    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumer = await started(client)
            await expect_value(consumer, b"m0")
            sub = consumer._subscription
            assert sub is not None
            channel: h2grpc.H2Channel | None = None
            if isinstance(sub, H2Subscription):
                proto = sub._proto
                assert proto is not None
                channel = proto.channel  # the client's HTTP/2 connection, shared
                assert channel is not None
                ref = weakref.ref(proto)
                del proto
            else:
                ref = weakref.ref(sub._call)
            assert reader_threads()
            del sub
            gc.disable()  # only plain references count: what the application holds keeps it
            try:
                async with asyncio.timeout(BUDGET):
                    await consumer.close()
                assert not reader_threads(), "the reader outlived close()"
                if channel is not None:  # the stream is reset; the connection is the client's
                    assert not channel.calls, "the connection still carries the closed call"
                assert ref() is None, "the closed consumer still holds the gRPC call"
            finally:
                gc.enable()
            assert api.calls[0].ended.wait(BUDGET), "the server never saw the cancellation"
            assert await consumer.next(timeout=0) is None  # closed: iteration is over
            assert await consumer.next_batch(10, timeout=0) == []


@pytest.mark.parametrize("subscribe_transport", ["http2"], indirect=True)
async def test_close_does_not_wait_forever_for_a_reader_that_lost_its_cancellation(
    subscribe_transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task can lose a cancellation (Python 3.11's ``wait_for`` did, inside nats-py):
    close() waits for its cancelled reader a bounded time, then returns."""
    monkeypatch.setattr(consumer_module, "_READER_STOP_TIMEOUT", 0.2)
    release = asyncio.Event()

    async def stubborn() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(BUDGET)  # the cancellation is lost here
        async with asyncio.timeout(BUDGET):
            await release.wait()

    def script(call: Call) -> Iterator[bytes]:
        yield handshake()
        yield from call.hang()

    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumer = await started(client)
            real, consumer._reader = consumer._reader, asyncio.create_task(stubborn())
            stuck = consumer._reader
            await asyncio.sleep(0)  # the stubborn task is in its sleep
            try:
                async with asyncio.timeout(BUDGET):
                    await consumer.close()
                assert not stuck.done(), "the reader was meant to outlive the wait"
            finally:
                release.set()
                for task in (real, stuck):
                    if task is not None:
                        task.cancel()
                        await asyncio.wait({task}, timeout=BUDGET)


@pytest.mark.parametrize("subscribe_transport", ["grpcio"], indirect=True)
async def test_close_while_the_thread_waits_for_room(subscribe_transport: str) -> None:
    """grpcio: the thread waits for room (http2: ``test_h2_holds_the_server_back``)."""

    def script(call: Call) -> Iterator[bytes]:
        yield handshake()
        for offset in range(100):
            yield message(offset)
        yield from call.hang()

    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumer = await started(client, max_buffered_messages=3)
            sub = consumer._subscription
            assert sub is not None
            await wait_until(lambda: len(consumer._handover) == 3, BUDGET, "3 buffered")
            await asyncio.sleep(0.2)  # the thread waits for room, nothing is taken
            assert len(consumer._handover) == 3
            assert sub.delivered == 3
            async with asyncio.timeout(BUDGET):
                await consumer.close()
            assert not reader_threads()
            # what was buffered can still be read after close
            got = await consumer.next_batch(10, timeout=0)
            assert [m.offset for m in got] == [0, 1, 2]
            assert await consumer.next(timeout=0) is None


async def test_closing_the_client_ends_its_consumers_threads() -> None:
    def script(call: Call) -> Iterator[bytes]:
        yield handshake()
        yield from call.hang()

    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumers = [await started(client) for _ in range(3)]
            assert len(reader_threads()) == 3
            # grpcio: the three share the client's one synchronous channel to the broker;
            # http2: a connection each
            channels = client._channels
            assert channels is not None
            assert len(channels._stream_channels) == (transport == "grpcio")
        assert all(c._subscription is None for c in consumers)
        assert all(call.ended.wait(BUDGET) for call in api.calls)


# --- the stream ending ----------------------------------------------------------------------


async def test_a_broken_stream_is_subscribed_again_after_the_last_message() -> None:
    def breaks(call: Call) -> Iterator[bytes]:
        yield handshake()
        yield message(0)
        call.abort(grpc.StatusCode.UNAVAILABLE, "connection reset")

    def fresh(call: Call) -> Iterator[bytes]:
        yield handshake()
        yield message(1)
        yield from call.hang()

    with FakeApi([breaks, fresh]) as api:
        async with client_of(api) as client:
            consumer = await started(client)
            got = [await consumer.next(timeout=BUDGET), await consumer.next(timeout=BUDGET)]
            assert [m.value for m in got if m is not None] == [b"m0", b"m1"]
            assert consumer.resubscriptions == 1
            second = api.calls[1].request
            assert second.startPosition == pb.StartPosition.OFFSET
            assert second.startOffset == 1  # right after the last message received
            assert len(reader_threads()) == 1  # the broken subscription's thread ended
            await consumer.close()


async def test_the_end_of_the_stream_ends_iteration() -> None:
    def script(call: Call) -> Iterator[bytes]:
        yield handshake()
        yield message(0)
        yield message(1)

    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumer = await started(client)
            async with asyncio.timeout(BUDGET):
                got = [m.offset async for m in consumer]
            assert got == [0, 1]
            assert consumer.resubscriptions == 0
            # the reader task joins the ended thread
            await wait_until(lambda: not reader_threads(), BUDGET, "the thread ended")


async def test_a_stop_position_ends_iteration() -> None:
    """The server ends a subscription at its stop position with RESOURCE_EXHAUSTED."""

    def script(call: Call) -> Iterator[bytes]:
        yield handshake()
        yield message(0)
        call.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "stop position reached")

    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumer = await started(client, stop_offset=0)
            assert api.calls[0].request.stopOffset == 0
            async with asyncio.timeout(BUDGET):
                assert [m.offset async for m in consumer] == [0]
            assert await consumer.next_batch(10, timeout=0) == []


async def test_an_undecodable_message_fails_the_consumer_with_a_decode_error() -> None:
    def script(call: Call) -> Iterator[bytes]:
        yield handshake()
        yield message(0)
        yield b"\xff\xff\xff\xff\x0f"  # a truncated varint: no protobuf message decodes
        yield from call.hang()

    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumer = await started(client)
            await expect_value(consumer, b"m0")
            with pytest.raises(DecodeError, match="subscription"):
                await consumer.next(timeout=BUDGET)
            with pytest.raises(DecodeError):  # it stays failed
                await consumer.next_batch(10, timeout=0)
            assert api.calls[0].ended.wait(BUDGET), "the undecodable stream was not cancelled"
            await consumer.close()


async def test_next_batch_delivers_what_came_before_an_error() -> None:
    def script(call: Call) -> Iterator[bytes]:
        yield handshake()
        yield message(0)
        yield message(1)
        call.abort(grpc.StatusCode.NOT_FOUND, "stream deleted")

    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumer = await started(client)
            # the error is queued after both messages
            await wait_until(lambda: consumer._handover._final is not None, BUDGET, "the end")
            got = await consumer.next_batch(10, timeout=0)
            assert [m.offset for m in got] == [0, 1]
            with pytest.raises(StreamNotFound):
                await consumer.next_batch(10, timeout=0)
            assert consumer.resubscriptions == 0  # a deleted stream is not retried


async def test_messages_below_the_requested_offset_are_dropped() -> None:
    """Asked for an offset beyond the high watermark, v1.9.0 starts earlier."""

    def script(call: Call) -> Iterator[bytes]:
        yield handshake()
        for offset in range(1, 6):
            yield message(offset)
        yield from call.hang()

    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumer = await started(client, offset=Offset.at(3))
            got = await consumer.next_batch(10, timeout=BUDGET)
            while len(got) < 3:
                got += await consumer.next_batch(10, timeout=BUDGET)
            assert [m.offset for m in got] == [3, 4, 5]
            assert consumer.last_offset == 5
            await consumer.close()


async def test_a_bug_in_the_reading_thread_fails_the_consumer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def script(call: Call) -> Iterator[bytes]:
        yield handshake()
        yield message(0)
        yield from call.hang()

    decode = messages.decode_message

    def broken(raw: bytes, *, server_headers: bool = False) -> Any:
        if raw == handshake():
            return decode(raw, server_headers=server_headers)
        raise RuntimeError("boom")

    monkeypatch.setattr(stream_reader, "decode_message", broken)
    walk = h2_subscription.split_subscribed

    def broken_walk(server_headers: bool) -> Any:
        real = walk(server_headers)

        def walking(buf: bytearray) -> Any:
            out = real(buf)
            if len(out[0]) > 1 and not out[0][0].value:  # the handshake (5 bytes) first, alone
                return out[0][:1], 5, 5
            if any(m.value for m in out[0]):  # not the handshake
                raise RuntimeError("boom")
            return out

        return walking

    monkeypatch.setattr(h2_subscription, "split_subscribed", broken_walk)
    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumer = await started(client)
            with pytest.raises(ConnectionClosed, match="boom"):
                await consumer.next(timeout=BUDGET)
            assert api.calls[0].ended.wait(BUDGET)
            assert consumer.resubscriptions == 0


# --- start ----------------------------------------------------------------------------------


def not_found(call: Call) -> Iterator[bytes]:
    call.abort(grpc.StatusCode.NOT_FOUND, "no such stream")
    yield b""  # pragma: no cover - abort raises


def silent(call: Call) -> Iterator[bytes]:
    yield from call.hang()


def ends_at_once(call: Call) -> Iterator[bytes]:
    return iter(())


@pytest.mark.parametrize(
    ("script", "error", "match"),
    [
        (not_found, StreamNotFound, "no such stream"),
        (silent, RequestTimeout, "no handshake in time"),
        (ends_at_once, ConnectionClosed, "ended at once"),
    ],
)
async def test_start_fails_with_streamwire_errors_and_leaves_no_thread(
    script: Script, error: type[Exception], match: str
) -> None:
    with FakeApi([script]) as api:
        async with client_of(api, request_timeout=0.5) as client:
            consumer = client.consumer("s")
            with pytest.raises(error, match=match):
                async with asyncio.timeout(BUDGET):
                    await consumer.start()
            assert not reader_threads()
            assert consumer._subscription is None
            assert all(call.ended.wait(BUDGET) for call in api.calls)


async def test_start_honours_its_own_timeout() -> None:
    with FakeApi([silent]) as api:
        async with client_of(api, request_timeout=30.0) as client:
            consumer = client.consumer("s")
            with pytest.raises(RequestTimeout):
                async with asyncio.timeout(BUDGET):
                    await consumer.start(timeout=0.3)
            assert not reader_threads()
            assert api.calls[0].ended.wait(BUDGET)


async def test_cancelling_start_cancels_the_subscription() -> None:
    with FakeApi([silent]) as api:
        async with client_of(api) as client:
            consumer = client.consumer("s")
            task = asyncio.create_task(consumer.start())
            await wait_until(lambda: bool(api.calls), BUDGET, "subscribed")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not reader_threads()
            assert api.calls[0].ended.wait(BUDGET)


@pytest.mark.parametrize("subscribe_transport", ["http2"], indirect=True)
async def test_h2_holds_the_server_back(subscribe_transport: str) -> None:
    """HTTP/2: with the buffer full, nothing is credited back, so the server stops after one
    flow-control window; taking messages credits it and the rest arrives in order."""
    value = b"v" * 60_000
    count = 100  # 6 MB: several windows (1 MiB) beyond what is taken

    def script(call: Call) -> Iterator[bytes]:
        yield handshake()
        for offset in range(count):
            yield message(offset, value)
        yield from call.hang()

    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumer = await started(client, max_buffered_messages=3)
            sub = consumer._subscription
            assert isinstance(sub, H2Subscription)
            await wait_until(lambda: sub.delivered >= 3, BUDGET, "3 buffered")
            await asyncio.sleep(0.3)  # the server could send all 6 MB if nothing held it
            window = h2_subscription.WINDOW
            held = sub.delivered
            assert held * len(value) <= 2 * window, f"{held} messages in, the server ran on"
            got: list[int] = []
            async with asyncio.timeout(BUDGET * 3):
                while len(got) < count:
                    got += [m.offset or 0 for m in await consumer.next_batch(10, BUDGET)]
            assert got == list(range(count))
            await consumer.close()


async def test_both_readers_count_the_bytes_of_the_messages_alike() -> None:
    """``stats.bytes_consumed``: the messages as the server sent them (no gRPC prefixes)."""
    sent = [message(0), message(1, b"x" * 300)]

    def script(call: Call) -> Iterator[bytes]:
        yield handshake()
        yield from sent
        yield from call.hang()

    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumer = await started(client)
            got = await consumer.next_batch(10, timeout=BUDGET)
            while len(got) < 2:
                got += await consumer.next_batch(10, timeout=BUDGET)
            assert consumer.stats.consumed == 2
            assert consumer.stats.bytes_consumed == sum(len(raw) for raw in sent)
            await consumer.close()
