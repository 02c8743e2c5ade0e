"""streamwire's HTTP/2 gRPC client against an in-process ``grpc.aio`` server (grpc's own
C-core HTTP/2 stack on a loopback socket): server-streaming and bidirectional calls sharing
one connection of an :class:`~streamwire.transport.h2grpc.H2Pool`, error statuses with
their messages, messages of several MiB both ways, and a cancelled call that the server
sees cancelled while the other call on the connection goes on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

import grpc
import grpc.aio
import pytest

from streamwire.transport import h2grpc
from streamwire.transport.h2call import GrpcCall
from streamwire.transport.h2grpc import (
    CallEnded,
    GrpcStreamProtocol,
    H2Pool,
    H2Settings,
    Status,
    split_messages,
)

BUDGET = 10.0
BIG = 6 << 20


def plain_split(buf: bytearray) -> tuple[list[bytes], int, int]:
    return split_messages(buf, 16 << 20)


class Collect:
    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.arrived = asyncio.Event()

    def deliver(self, messages: list[bytes], nbytes: int) -> None:
        self.messages += messages
        self.arrived.set()

    def credit(self) -> bool:
        return True


class Service:
    """Raw-bytes handlers (no serializers): what the tests call."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.release = asyncio.Event()

    async def count(
        self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        """``request`` is b"n": n messages b"0" .. b"n-1", then OK."""
        for i in range(int(request)):
            yield str(i).encode()

    async def big(
        self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        yield request + b"!" * BIG

    async def fail(
        self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        yield b"before"
        await context.abort(grpc.StatusCode.NOT_FOUND, "no such thing: ü")

    async def hang(
        self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        yield b"started"
        try:
            await asyncio.sleep(BUDGET * 3)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise

    async def echo(
        self,
        requests: AsyncIterator[bytes],
        context: grpc.aio.ServicerContext[bytes, bytes],
    ) -> AsyncIterator[bytes]:
        async for request in requests:
            yield request[::-1]


def _handlers(service: Service) -> Iterable[grpc.GenericRpcHandler]:
    stream = grpc.unary_stream_rpc_method_handler
    methods = {
        "Count": stream(service.count),
        "Big": stream(service.big),
        "Fail": stream(service.fail),
        "Hang": stream(service.hang),
        "Echo": grpc.stream_stream_rpc_method_handler(service.echo),
    }
    return [grpc.method_handlers_generic_handler("test.Svc", methods)]


@pytest.fixture
async def grpc_server() -> AsyncIterator[tuple[Service, int]]:
    service = Service()
    options = [
        ("grpc.max_receive_message_length", 16 << 20),
        ("grpc.max_send_message_length", 16 << 20),
    ]
    server = grpc.aio.server(options=options)
    server.add_generic_rpc_handlers(tuple(_handlers(service)))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield service, port
    finally:
        await server.stop(grace=None)


async def _call(
    pool: H2Pool, port: int, method: str, request: bytes, sink: Collect
) -> GrpcStreamProtocol[bytes]:
    return await h2grpc.open_call(
        lambda: GrpcStreamProtocol(
            path=f"/test.Svc/{method}", request=request, split=plain_split, sink=sink
        ),
        "127.0.0.1",
        port,
        ssl_context=None,
        server_hostname=None,
        timeout=BUDGET,
        pool=pool,
    )


async def _hanging_call(pool: H2Pool, port: int) -> GrpcStreamProtocol[bytes]:
    """A call of "Hang" on ``pool``, once its first message arrived (then it waits)."""
    sink = Collect()
    call = await _call(pool, port, "Hang", b"", sink)
    async with asyncio.timeout(BUDGET):
        await sink.arrived.wait()
    return call


async def test_calls_share_one_connection_and_end_ok(grpc_server: tuple[Service, int]) -> None:
    _, port = grpc_server
    pool = H2Pool()
    try:
        first, second = Collect(), Collect()
        a = await _call(pool, port, "Count", b"500", first)
        b = await _call(pool, port, "Count", b"3", second)
        async with asyncio.timeout(BUDGET):
            ended = await asyncio.gather(a.ended, b.ended)
        assert [e.code for e in ended] == [Status.OK, Status.OK]
        assert first.messages == [str(i).encode() for i in range(500)]
        assert second.messages == [b"0", b"1", b"2"]
        assert a.channel is b.channel  # one connection, two streams
        assert (a.stream_id, b.stream_id) == (1, 3)
        assert len(pool.channels()) == 1
    finally:
        await pool.aclose()


async def test_a_bidirectional_call_beside_a_server_stream(
    grpc_server: tuple[Service, int],
) -> None:
    _, port = grpc_server
    pool = H2Pool()
    try:
        sink = Collect()
        streaming = await _call(pool, port, "Count", b"100", sink)
        bidi = await h2grpc.open_call(
            lambda: GrpcCall[bytes](path="/test.Svc/Echo", split=plain_split),
            "127.0.0.1",
            port,
            ssl_context=None,
            server_hostname=None,
            timeout=BUDGET,
            pool=pool,
        )
        assert bidi.channel is streaming.channel
        replies: list[bytes] = []
        async with asyncio.timeout(BUDGET):
            await bidi.write([b"abc", b"hello"])
            while len(replies) < 2:
                replies += await bidi.read_many()
            await bidi.write([b"x" * 100_000])  # more than the default 64 KiB windows
            bidi.done_writing()
            while True:
                more = await bidi.read_many()
                if not more:
                    break
                replies += more
            assert (await bidi.ended).code == Status.OK
            assert (await streaming.ended).code == Status.OK
        assert replies == [b"cba", b"olleh", b"x" * 100_000]
        assert len(sink.messages) == 100
    finally:
        await pool.aclose()


async def test_an_error_status_and_its_message(grpc_server: tuple[Service, int]) -> None:
    _, port = grpc_server
    pool = H2Pool()
    try:
        sink = Collect()
        call = await _call(pool, port, "Fail", b"", sink)
        async with asyncio.timeout(BUDGET):
            ended = await call.ended
        assert sink.messages == [b"before"]
        assert ended.code == grpc.StatusCode.NOT_FOUND.value[0]
        assert ended.message == "no such thing: ü"  # percent-decoded, UTF-8
        # the connection is still good for the next call
        again = await _call(pool, port, "Count", b"2", Collect())
        async with asyncio.timeout(BUDGET):
            assert (await again.ended).code == Status.OK
        assert again.channel is call.channel
    finally:
        await pool.aclose()


@pytest.mark.parametrize("frame", [16_384, 1 << 20])
async def test_messages_of_several_mib_both_ways(
    grpc_server: tuple[Service, int], frame: int
) -> None:
    _, port = grpc_server
    pool = H2Pool(H2Settings(max_frame=frame, window=1 << 16))
    try:
        sink = Collect()
        request = b"r" * BIG  # goes out as grpc's windows open
        call = await _call(pool, port, "Big", request, sink)
        async with asyncio.timeout(BUDGET * 2):
            ended = await call.ended
        assert ended.code == Status.OK
        assert sink.messages == [request + b"!" * BIG]
    finally:
        await pool.aclose()


async def test_a_cancelled_call_is_cancelled_at_the_server_and_the_other_goes_on(
    grpc_server: tuple[Service, int],
) -> None:
    service, port = grpc_server
    pool = H2Pool()
    try:
        hung = await _hanging_call(pool, port)
        hung.cancel()
        assert (await hung.ended).code == Status.CANCELLED
        async with asyncio.timeout(BUDGET):
            await service.cancelled.wait()  # RST_STREAM CANCEL reached grpc
        other = await _call(pool, port, "Count", b"10", Collect())
        async with asyncio.timeout(BUDGET):
            assert (await other.ended).code == Status.OK
        assert other.channel is hung.channel
        assert other.channel is not None
        assert other.channel.error is None
    finally:
        await pool.aclose()


async def test_a_closed_pool_ends_its_calls(grpc_server: tuple[Service, int]) -> None:
    _, port = grpc_server
    pool = H2Pool()
    sink = Collect()
    call = await _call(pool, port, "Hang", b"", sink)
    await pool.aclose()
    async with asyncio.timeout(BUDGET):
        ended = await call.ended
    assert ended.code == Status.UNAVAILABLE
    with pytest.raises(Exception, match="closed"):
        await _call(pool, port, "Count", b"1", Collect())
    assert isinstance(ended, CallEnded)


class Broken(Collect):
    """A sink with a bug: it raises on the first messages it gets."""

    def deliver(self, messages: list[bytes], nbytes: int) -> None:
        raise RuntimeError("sink bug")


async def test_a_failing_sink_ends_its_own_call_only(
    grpc_server: tuple[Service, int], caplog: pytest.LogCaptureFixture
) -> None:
    """One call's reader raising used to reach the connection's reader and end every call
    multiplexed on it; now its own call ends INTERNAL (RST_STREAM) and the others go on."""
    service, port = grpc_server
    pool = H2Pool()
    try:
        hanging = await _hanging_call(pool, port)
        bad = await _call(pool, port, "Count", b"50", Broken())
        assert bad.channel is hanging.channel
        async with asyncio.timeout(BUDGET):
            ended = await bad.ended
        assert ended.code == Status.INTERNAL
        assert "sink bug" in ended.message
        assert isinstance(bad.failure, RuntimeError)
        assert "its reader failed" in caplog.text
        # the other call on the connection is still open, and a new one works beside it
        assert not hanging.ended.done()
        after = Collect()
        third = await _call(pool, port, "Count", b"3", after)
        assert third.channel is hanging.channel
        async with asyncio.timeout(BUDGET):
            assert (await third.ended).code == Status.OK
        assert after.messages == [b"0", b"1", b"2"]
        hanging.cancel()
        async with asyncio.timeout(BUDGET):
            await service.cancelled.wait()
    finally:
        await pool.aclose()
