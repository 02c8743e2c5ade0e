"""The producer's gRPC publish path on the real server: ``transport="grpc"`` (a PublishAsync
stream), ``"auto"`` while NATS is unreachable (a client opened with a dead NATS port, NATS
cut through the fault proxy), typed error acks, the unary Publish fallback, close, and the
gRPC link cut or silenced through the fault proxy (messages sent again on a new stream, or
failing with AckTimeout). Every test runs over both ``publish_transport``s: streamwire's own
HTTP/2 client and grpc.aio."""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

import streamwire.liftbridge as lb
from streamwire import ClosedError, ConnectError, ConnectionClosed, Message
from streamwire.liftbridge._publish_calls import GrpcioPublishCall, H2PublishCall
from streamwire.liftbridge.protocol.messages import AckPolicy
from tests.brokers import BrokerInfo
from tests.integration.liftbridge.conftest import NewStream
from tests.integration.liftbridge.test_faults import FAST_RECONNECT, nats_proxy, url_via
from tests.proxy import FaultProxy, LeakCheck, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.liftbridge]

__all__ = ("nats_proxy",)  # the fixture, imported for this module's tests


async def read(client: lb.Client, stream: str, count: int, partition: int = 0) -> list[Message]:
    out: list[Message] = []
    async with client.consumer(stream, offset="first", partition=partition) as consumer:
        async with asyncio.timeout(30):
            while len(out) < count:
                out += await consumer.next_batch(count - len(out), timeout=5)
    return out


def dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stream_server(producer: lb.Producer) -> str | None:
    """The broker id the producer's PublishAsync stream went to (``None``: the URL's)."""
    assert producer._grpc is not None
    return producer._grpc.server


@pytest.fixture(autouse=True, params=["http2", "grpcio"])
def publish_transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every client of the test (the ``client`` fixture's too: autouse fixtures come first)
    carries its PublishAsync streams over this transport."""
    connect = lb.connect
    transport = str(request.param)

    async def connect_with(*args: Any, **kwargs: Any) -> lb.Client:
        kwargs.setdefault("publish_transport", transport)
        return await connect(*args, **kwargs)

    monkeypatch.setattr(lb, "connect", connect_with)
    return transport


@pytest.fixture
async def no_nats(broker: BrokerInfo) -> AsyncIterator[lb.Client]:
    """A client whose NATS URL points at a dead port (``require_nats=False``)."""
    url = f"liftbridge://{broker.host}:{broker.port}?nats=nats://127.0.0.1:{dead_port()}"
    c = await lb.connect(url, timeout=10, require_nats=False)
    try:
        yield c
    finally:
        await c.close()


async def test_grpc_transport_publishes_many_in_flight_and_reads_back(
    client: lb.Client, stream: str, publish_transport: str
) -> None:
    acks_before = client.stats.acks.acks
    async with client.producer(stream, transport="grpc") as producer:
        first = await producer.send_and_wait(b"one", key=b"k", headers={"n": 1, "s": "x"})
        assert producer._grpc is not None
        kind = H2PublishCall if publish_transport == "http2" else GrpcioPublishCall
        assert isinstance(producer._grpc._call, kind)
        assert (first.offset, first.partition, first.stream) == (0, 0, stream)
        futures = [await producer.send(b"m%d" % i) for i in range(500)]
        assert producer.pending > 1  # many in flight on the one stream
        futures += await producer.send_batch([b"b0", Message(b"b1", key=b"kb")])
        all_ = await asyncio.gather(*futures)
        assert [c.offset for c in all_] == list(range(1, 503))
        await producer.flush()
        assert producer.stats.confirmed == 503
    assert client.stats.acks.acks == acks_before  # nothing went through the NATS inbox
    got = await read(client, stream, 503)
    assert (got[0].value, got[0].key) == (b"one", b"k")
    assert got[0].headers["n"].as_int() == 1
    assert got[0].headers["s"].as_str() == "x"
    assert [m.value for m in got[1:501]] == [b"m%d" % i for i in range(500)]
    assert (got[502].value, got[502].key) == (b"b1", b"kb")


async def test_grpc_transport_ack_policies_and_partitions(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream(partitions=2)
    async with client.producer(stream, transport="grpc", ack_policy=AckPolicy.ALL) as producer:
        one = await producer.send_and_wait(b"a", partition=1)
        assert (one.partition, one.offset) == (1, 0)
    async with client.producer(stream, transport="grpc", ack_policy=AckPolicy.NONE) as producer:
        none = await producer.send_and_wait(b"b", partition=1)
        assert none.offset is None  # confirmed once queued: the server sends nothing back
        await producer.flush()
    got = await read(client, stream, 2, partition=1)
    assert [m.value for m in got] == [b"a", b"b"]


async def test_grpc_transport_error_acks_are_typed(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream(optimistic_concurrency_control=True)
    async with client.producer(stream, transport="grpc") as producer:
        ok = await producer.send_and_wait(b"a", expected_offset=0)
        assert ok.offset == 0
        with pytest.raises(lb.IncorrectOffset, match="incorrect expected offset"):
            await producer.send_and_wait(b"b", expected_offset=5)
        bad = await producer.send(b"c", expected_offset=9)
        good = await producer.send(b"d", expected_offset=1)
        assert (await good).offset == 1
        with pytest.raises(lb.IncorrectOffset):
            await bad
        with pytest.raises(lb.IncorrectOffset):  # flush reports the first failure
            await producer.flush()
        await client.delete_stream(stream)
        with pytest.raises(lb.StreamNotFound):
            await producer.send_and_wait(b"gone", expected_offset=2)


async def test_unary_publish_fallback(client: lb.Client, new_stream: NewStream) -> None:
    """Servers without PublishAsync get unary Publish calls (forced here)."""
    stream = await new_stream(optimistic_concurrency_control=True)
    async with client.producer(stream, transport="grpc") as producer:
        assert producer._grpc is not None
        producer._grpc.unary = True
        first = await producer.send_and_wait(b"a", key=b"k", headers={"h": "v"}, expected_offset=0)
        assert first.offset == 0
        with pytest.raises(lb.IncorrectOffset):
            await producer.send_and_wait(b"b", expected_offset=7)
        assert producer._grpc.streams_opened == 0
    (message,) = await read(client, stream, 1)
    assert (message.value, message.key, message.headers["h"].as_str()) == (b"a", b"k", "v")


async def test_client_without_nats_publishes_over_grpc(no_nats: lb.Client, stream: str) -> None:
    assert not no_nats.nats_connected
    assert isinstance(no_nats.nats_error, ConnectError)
    with pytest.raises(ConnectError, match="no NATS connection"):
        async with no_nats.producer(stream):
            pass
    async with no_nats.producer(stream, transport="auto") as producer:
        confirmations = await asyncio.gather(*[await producer.send(b"v%d" % i) for i in range(20)])
    assert [c.offset for c in confirmations] == list(range(20))
    got = await read(no_nats, stream, 20)  # consumers need no NATS either
    assert [m.value for m in got] == [b"v%d" % i for i in range(20)]


async def test_connect_still_requires_nats_by_default(broker: BrokerInfo) -> None:
    url = f"liftbridge://{broker.host}:{broker.port}?nats=nats://127.0.0.1:{dead_port()}"
    with pytest.raises(ConnectError, match="NATS"):
        await lb.connect(url, timeout=10)


async def test_auto_moves_to_grpc_while_nats_is_cut(
    stream: str, broker: BrokerInfo, nats_proxy: FaultProxy, client: lb.Client
) -> None:
    pc = await lb.connect(url_via(broker, nats=nats_proxy), timeout=10, nats_options=FAST_RECONNECT)
    try:
        async with pc.producer(stream, transport="auto", ack_timeout=10) as producer:
            assert (await producer.send_and_wait(b"nats-1")).offset == 0
            assert pc.stats.acks.acks == 1  # acked on the NATS inbox
            nats_proxy.refuse(True)
            nats_proxy.cut()
            await wait_until(lambda: not pc.nats_connected, 10, "NATS seen down")
            assert (await producer.send_and_wait(b"grpc-1", key=b"k")).offset == 1
            assert producer._grpc is not None
            assert producer._grpc.streams_opened == 1
            assert pc.stats.acks.acks == 1
            nats_proxy.refuse(False)
            await wait_until(lambda: pc.nats_connected, 15, "NATS back")
            assert (await producer.send_and_wait(b"nats-2")).offset == 2
            assert pc.stats.acks.acks == 2
    finally:
        await pc.close()
    got = await read(client, stream, 3)
    assert [(m.value, m.key) for m in got] == [
        (b"nats-1", None),
        (b"grpc-1", b"k"),
        (b"nats-2", None),
    ]


async def test_close_is_cancellation_safe_and_leaves_nothing(
    broker: BrokerInfo, stream: str
) -> None:
    check = LeakCheck()
    url = f"liftbridge://{broker.host}:{broker.port}?nats=nats://127.0.0.1:{dead_port()}"
    c = await lb.connect(url, timeout=10, require_nats=False)
    producer = await c.producer(stream, transport="grpc")
    futures = [await producer.send(b"x" * 100) for _ in range(2000)]
    closing = asyncio.ensure_future(producer.close())
    await asyncio.sleep(0)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    with pytest.raises(ClosedError):
        await producer.send(b"late")
    # what was queued is still written and acked after close
    confirmations = await asyncio.wait_for(asyncio.gather(*futures), 30)
    assert [c.offset for c in confirmations] == list(range(2000))
    await c.close()
    # as below: a grpc.aio call cancelled mid-read (here possibly by the cancelled close)
    # keeps its HTTP/2 connection in a reference cycle until the collector runs
    del futures, confirmations
    gc.collect()
    await check.verify(10)


async def test_client_close_fails_what_still_waits(broker: BrokerInfo, stream: str) -> None:
    check = LeakCheck()
    url = f"liftbridge://{broker.host}:{broker.port}?nats=nats://127.0.0.1:{dead_port()}"
    c = await lb.connect(url, timeout=10, require_nats=False)
    producer = await c.producer(stream, transport="grpc", ack_timeout=30)
    futures = [await producer.send(b"z") for _ in range(2000)]
    await producer.close(flush=False)
    await c.close()
    results = await asyncio.gather(*futures, return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    assert all(isinstance(r, ClosedError | ConnectionClosed) for r in failed), failed[:3]
    # a grpc.aio call cancelled mid-read sits in a reference cycle (its HTTP/2
    # connection with it) until the collector runs; no task is left either way
    del futures, results, failed
    gc.collect()
    await check.verify(10)


async def test_close_without_flush_still_writes_and_waits_for_acks(
    client: lb.Client, stream: str
) -> None:
    producer = await client.producer(stream, transport="grpc")
    futures = [await producer.send(b"y") for _ in range(200)]
    await producer.close(flush=False)
    confirmations = await asyncio.wait_for(asyncio.gather(*futures), 30)
    assert [c.offset for c in confirmations] == list(range(200))
    assert producer._grpc is not None
    assert producer._grpc.pending == 0


async def test_grpc_transport_resumes_paused_and_refuses_readonly(
    client: lb.Client, stream: str
) -> None:
    """Unlike NATS publishes (lost on a paused partition, unacked on a readonly one), the
    gRPC path resumes a paused partition and is told about a readonly one."""
    async with client.producer(stream, transport="grpc", ack_timeout=5) as producer:
        assert (await producer.send_and_wait(b"a")).offset == 0
        await client.pause_stream(stream)
        assert (await producer.send_and_wait(b"b")).offset == 1
        await client.set_stream_readonly(stream)
        with pytest.raises(lb.FailedPrecondition, match="readonly partition"):
            await producer.send_and_wait(b"c")
        with pytest.raises(lb.FailedPrecondition):
            await producer.flush()


def grpc_only_via(proxy: FaultProxy) -> str:
    """A URL whose gRPC server is ``proxy`` and whose NATS port is dead (``"auto"``: gRPC)."""
    host, port = proxy.address
    return f"liftbridge://{host}:{port}?nats=nats://127.0.0.1:{dead_port()}"


async def test_grpc_stream_cut_mid_flight_sends_what_waited_again(
    client: lb.Client, stream: str, broker: BrokerInfo, publish_transport: str
) -> None:
    """The PublishAsync stream broken under load (gRPC cut through the fault proxy, slowed
    down so that acks are still on their way): what waited on it is written again on a new
    stream, so every message is confirmed; each is stored at least once (one stored before
    the cut, its ack lost, is stored twice)."""
    async with FaultProxy(broker.host, broker.port) as grpc_proxy:
        pc = await lb.connect(grpc_only_via(grpc_proxy), timeout=10, require_nats=False)
        # the stream's own connection (HTTP/2), or the channel's one connection (grpcio)
        links = 2 if publish_transport == "http2" else 1
        try:
            async with pc.producer(stream, transport="auto", ack_timeout=30) as producer:
                publisher = producer._grpc
                assert publisher is not None
                grpc_proxy.latency = 0.2  # each way: no ack comes back before the cut
                values = [b"p%d" % i for i in range(3000)]
                futures = [await producer.send(v) for v in values]
                await wait_until(
                    lambda: publisher.streams_opened == 1 and grpc_proxy.open_connections == links,
                    10,
                    "the stream opened",
                    step=0,
                )
                assert grpc_proxy.cut() == links
                grpc_proxy.latency = 0
                async with asyncio.timeout(60):
                    confirmed = await asyncio.gather(*futures)
                assert producer._grpc is not None
                assert producer._grpc.streams_opened >= 2
                after = await producer.send_and_wait(b"after")
                # a connection lost before the server's SETTINGS is not "no HTTP/2"
                kind = H2PublishCall if publish_transport == "http2" else GrpcioPublishCall
                assert isinstance(publisher._call, kind)
        finally:
            await pc.close()
    assert after.offset is not None
    stored = await read(client, stream, after.offset + 1)
    values_at = {m.offset: m.value for m in stored}
    for value, confirmation in zip(values, confirmed, strict=True):
        assert confirmation.offset is not None
        assert values_at[confirmation.offset] == value
    assert set(values) <= set(values_at.values())  # none lost
    assert values_at[after.offset] == b"after"


async def test_messages_written_on_a_silent_stream_are_sent_again_once_it_breaks(
    client: lb.Client, stream: str, broker: BrokerInfo
) -> None:
    """The proxy forwards nothing (a half-open connection) while 1000 messages are written;
    then the connection is reset. Nothing of the first stream reached the server, so the
    new stream stores every message exactly once, in order."""
    async with FaultProxy(broker.host, broker.port) as grpc_proxy:
        pc = await lb.connect(grpc_only_via(grpc_proxy), timeout=10, require_nats=False)
        try:
            async with pc.producer(stream, transport="grpc", ack_timeout=60) as producer:
                publisher = producer._grpc
                assert publisher is not None
                grpc_proxy.blackhole(True)
                values = [b"s%04d" % i for i in range(1000)]
                futures = [await producer.send(v) for v in values]
                await wait_until(lambda: publisher.streams_opened == 1, 10, "a stream opened")
                await asyncio.sleep(0.2)  # the writer writes what the connection takes
                assert not any(f.done() for f in futures)  # no ack comes through
                grpc_proxy.blackhole(False)
                assert grpc_proxy.cut() >= 1
                async with asyncio.timeout(60):
                    confirmed = await asyncio.gather(*futures)
                assert publisher.streams_opened == 2
                assert publisher.resent >= 1
        finally:
            await pc.close()
    assert [c.offset for c in confirmed] == list(range(1000))
    assert [m.value for m in await read(client, stream, 1000)] == values


async def test_a_message_whose_ack_never_comes_fails_with_ack_timeout(
    client: lb.Client, stream: str, broker: BrokerInfo
) -> None:
    """A stream that stays open but answers nothing (the proxy forwards nothing): the
    messages fail with AckTimeout after ``ack_timeout``; the producer works again once the
    connection carries data."""
    async with FaultProxy(broker.host, broker.port) as grpc_proxy:
        pc = await lb.connect(grpc_only_via(grpc_proxy), timeout=10, require_nats=False)
        try:
            async with pc.producer(stream, transport="grpc", ack_timeout=1.0) as producer:
                grpc_proxy.blackhole(True)
                futures = [await producer.send(b"lost%d" % i) for i in range(5)]
                results = await asyncio.gather(*futures, return_exceptions=True)
                assert all(isinstance(r, lb.AckTimeout) for r in results), results
                assert "no ack for a message to " in str(results[0])
                assert f"{stream}/0 over gRPC" in str(results[0])
                grpc_proxy.blackhole(False)
                later = await producer.send_and_wait(b"later")
        finally:
            await pc.close()
    # the timed-out messages were written on the silent stream: the server may have them
    assert later.offset is not None
    got = await read(client, stream, later.offset + 1)
    assert got[-1].value == b"later"


async def test_grpc_stream_moves_to_another_broker_while_the_seed_is_unreachable(
    client: lb.Client, stream: str, broker: BrokerInfo
) -> None:
    """The URL's server is a fault proxy in front of the broker; once it refuses, the next
    stream goes to the broker's advertised address from metadata."""
    async with FaultProxy(broker.host, broker.port) as seed:
        host, port = seed.address
        pc = await lb.connect(
            f"liftbridge://{host}:{port}?nats=nats://127.0.0.1:{dead_port()}",
            timeout=10,
            require_nats=False,
        )
        try:
            async with pc.producer(stream, transport="grpc") as producer:
                assert (await producer.send_and_wait(b"via-seed")).offset == 0
                assert stream_server(producer) is None
                seed.refuse(True)
                seed.cut()
                failures: list[BaseException] = []
                for _ in range(5):
                    try:
                        confirmation = await producer.send_and_wait(b"elsewhere")
                        break
                    except (ConnectError, ConnectionClosed) as exc:
                        failures.append(exc)
                else:
                    pytest.fail(f"never published elsewhere: {failures}")
                assert len(failures) <= 2, failures
                assert stream_server(producer) is not None  # a broker id from metadata
                assert confirmation.offset == 1
        finally:
            await pc.close()
    got = await read(client, stream, 2)
    assert [m.value for m in got] == [b"via-seed", b"elsewhere"]


async def test_client_opened_without_nats_connects_it_later(
    stream: str, broker: BrokerInfo, nats_proxy: FaultProxy, client: lb.Client
) -> None:
    """NATS refused at connect: the client opens without it and ``"auto"`` publishes over
    gRPC; once NATS accepts again, the client connects it in the background and the producer
    is back on NATS."""
    check = LeakCheck()
    nats_proxy.refuse(True)
    pc = await lb.connect(url_via(broker, nats=nats_proxy), timeout=10, require_nats=False)
    try:
        assert not pc.nats_connected
        async with pc.producer(stream, transport="auto") as producer:
            assert (await producer.send_and_wait(b"grpc")).offset == 0
            nats_proxy.refuse(False)
            await wait_until(lambda: pc.nats_connected, 20, "NATS connected later")
            assert pc.nats_error is None
            assert (await producer.send_and_wait(b"nats")).offset == 1
            assert pc.stats.acks.acks == 1  # acked on the NATS inbox
    finally:
        await pc.close()
    await check.verify(10)
    got = await read(client, stream, 2)
    assert [m.value for m in got] == [b"grpc", b"nats"]


async def test_closing_a_client_while_it_redials_nats(broker: BrokerInfo) -> None:
    check = LeakCheck()
    url = f"liftbridge://{broker.host}:{broker.port}?nats=nats://127.0.0.1:{dead_port()}"
    pc = await lb.connect(url, timeout=10, require_nats=False)
    await asyncio.sleep(1.2)  # a redial or two
    await pc.close()
    await check.verify(10)
