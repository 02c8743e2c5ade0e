"""The same scenarios through the unified API (``streamwire.connect`` and the Client /
Producer / Consumer protocols) on every broker available: RabbitMQ Streams and Liftbridge from
the harness, Iggy on its conformance double (in both modes) and on the harness's real server
when it has one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

import streamwire
from streamwire import HeaderValue, Message, cli
from streamwire.codec.headers import HeaderInput
from streamwire.transport import TcpKeepalive
from tests.brokers import require
from tests.iggy_lanes import LANES, lane
from tests.message_properties import EVERY_PROPERTY

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

pytestmark = pytest.mark.integration

HEADERS: dict[str, HeaderInput] = {
    "text": "café-ß",
    "count": HeaderValue.int32(-3),
    "big": HeaderValue.uint64(2**63),
    "ratio": 0.25,
    "flag": True,
    "blob": b"\x00\xff",
}


@pytest.fixture(params=["rabbitmq", "liftbridge", *(f"iggy-{lane_name}" for lane_name in LANES)])
async def url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    if request.param.startswith("iggy-"):  # the double in both modes, and a real server
        async with lane(request.param.removeprefix("iggy-")) as found:
            yield found.url
        return
    broker = require(request.param)
    if request.param == "liftbridge":
        nats = require("nats")
        yield f"liftbridge://{broker.host}:{broker.port}?nats=nats://{nats.host}:{nats.port}"
    else:
        yield broker.url


@pytest.fixture
async def client(url: str) -> AsyncIterator[streamwire.Client]:
    async with streamwire.connect(url, timeout=10) as c:
        yield c


@pytest.fixture
async def stream(client: streamwire.Client) -> AsyncIterator[str]:
    name = f"unified-{uuid.uuid4().hex[:8]}"  # a bare name works on every broker
    await client.create_stream(name)
    try:
        yield name
    finally:
        await client.delete_stream(name, missing_ok=True)


async def take(consumer: streamwire.Consumer, n: int) -> list[Message]:
    got: list[Message] = []
    while len(got) < n:
        batch = await consumer.next_batch(n - len(got), timeout=10)
        assert batch, f"only {len(got)} of {n} messages arrived"
        got += batch
    return got


async def test_round_trip_with_keys_and_typed_headers(
    client: streamwire.Client, stream: str
) -> None:
    async with client.producer(stream) as producer:
        confirmation = await producer.send_and_wait(b"first", key=b"k-1", headers=HEADERS)
        await producer.send_batch([b"second", Message(b"third", key=b"k-3")])
        await producer.flush()
    assert isinstance(confirmation, streamwire.Confirmation)
    async with client.consumer(stream, offset="first") as consumer:
        got = await take(consumer, 3)
    assert [m.value for m in got] == [b"first", b"second", b"third"]
    assert [m.key for m in got] == [b"k-1", None, b"k-3"]
    assert got[0].headers == {k: HeaderValue.of(v) for k, v in HEADERS.items()}
    offsets = [m.offset for m in got]
    assert None not in offsets
    assert offsets == sorted(o for o in offsets if o is not None)
    assert all(m.timestamp is not None for m in got)


async def test_properties_and_annotations_round_trip(
    client: streamwire.Client, stream: str
) -> None:
    """The AMQP properties section and message annotations (RabbitMQ's own; reserved typed
    headers elsewhere) written and read by the same code on every broker."""
    props = EVERY_PROPERTY
    annotations: dict[str, HeaderInput] = {"x-opt-source": "checkout", "x-opt-n": 3}
    async with client.producer(stream) as producer:
        await producer.send_and_wait(
            Message(b"{}", key=b"k", headers=HEADERS, properties=props, annotations=annotations)
        )
        await producer.send_and_wait(
            Message(b"bare", properties=streamwire.MessageProperties(message_id="only-an-id"))
        )
    async with client.consumer(stream, offset="first") as consumer:
        first, second = await take(consumer, 2)
    assert first.properties == props
    assert first.annotations == {k: HeaderValue.of(v) for k, v in annotations.items()}
    assert first.key == b"k"
    assert {k: v for k, v in first.headers.items() if not k.startswith("amqp.")} == {
        k: HeaderValue.of(v) for k, v in HEADERS.items()
    }
    assert second.properties == streamwire.MessageProperties(message_id="only-an-id")
    assert second.annotations == {}
    assert second.value == b"bare"


async def test_resume_from_the_committed_offset(client: streamwire.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        await producer.send_batch([f"m{i}".encode() for i in range(10)])
        await producer.flush()
    async with client.consumer(stream, offset="first", name="resumer") as consumer:
        first = await take(consumer, 4)
        await consumer.commit(first[-1].offset)
        await consumer.close()  # closing lets every broker persist the commit
    async with client.consumer(stream, offset="next", name="resumer") as consumer:
        rest = await take(consumer, 6)
    assert [m.value for m in rest] == [f"m{i}".encode() for i in range(4, 10)]


async def test_stored_offsets_without_a_consumer(
    client: streamwire.Client, stream: str, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``client.committed_offset`` / ``store_offset`` read and write what a named consumer
    commits and resumes from, with no consumer open; ``streamwire offsets`` does the same."""
    assert await client.committed_offset(stream, "ops") is None
    async with client.producer(stream) as producer:
        await producer.send_batch([f"m{i}".encode() for i in range(10)])
        await producer.flush()
    await client.store_offset(stream, "ops", 4)
    assert await client.committed_offset(stream, "ops") == 4
    if isinstance(client, streamwire.Partitioned):  # the one partition, named
        [only] = await client.partition_ids(stream)
        assert await client.committed_offset(stream, "ops", partition=only) == 4
    else:
        assert await client.committed_offset(stream, "ops", partition=0) == 4
    async with client.consumer(stream, offset="next", name="ops") as consumer:
        got = await take(consumer, 3)
        assert [m.value for m in got] == [b"m5", b"m6", b"m7"]
        await consumer.commit()
    assert await client.committed_offset(stream, "ops") == 7
    assert await client.committed_offset(stream, "someone-else") is None
    with pytest.raises(streamwire.ConfigurationError):
        await client.store_offset(stream, "ops", -1)
    with pytest.raises(streamwire.ConfigurationError):
        await client.committed_offset(stream, "")

    async def offsets_cli(*args: str) -> str:
        assert await asyncio.to_thread(cli.main, ["offsets", *args]) == 0
        return capsys.readouterr().out

    assert await offsets_cli(url, stream, "ops") == "7\n"
    assert await offsets_cli("--set", "2", url, stream, "ops") == "2\n"
    assert await client.committed_offset(stream, "ops") == 2
    assert await offsets_cli(url, stream, "nobody") == "none\n"


async def test_several_partitions_need_a_partition_for_stored_offsets(
    client: streamwire.Client,
) -> None:
    if not isinstance(client, streamwire.Partitioned):
        pytest.skip("a RabbitMQ stream is one partition (super streams are streams of streams)")
    name = f"unified-{uuid.uuid4().hex[:8]}"
    await client.create_stream(name, partitions=2)
    try:
        with pytest.raises(streamwire.ConfigurationError, match="2 partitions"):
            await client.committed_offset(name, "ops")
        second = (await client.partition_ids(name))[1]
        pinned: dict[str, Any] = {"partition": second}  # KeyRouted producers take partition=
        async with client.producer(name, **pinned) as producer:
            await producer.send_and_wait(b"one")
        await client.store_offset(name, "ops", 0, partition=second)
        assert await client.committed_offset(name, "ops", partition=second) == 0
        assert await client.committed_offset(name, "ops", partition=second - 1) is None
    finally:
        await client.delete_stream(name, missing_ok=True)


async def test_batch_consume_respects_the_limit(client: streamwire.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        await producer.send_batch([bytes([i]) * 10 for i in range(100)])
        await producer.flush()
    async with client.consumer(stream, offset="first") as consumer:
        sizes = []
        got: list[Message] = []
        while len(got) < 100:
            batch = await consumer.next_batch(30, timeout=10)
            assert batch
            sizes.append(len(batch))
            got += batch
    assert max(sizes) <= 30
    assert [m.value for m in got] == [bytes([i]) * 10 for i in range(100)]


async def test_send_many_and_max_in_flight_on_every_broker(
    client: streamwire.Client, stream: str
) -> None:
    """One future for many messages (``send_many``, in the unified Producer), with the
    unified ``max_in_flight``, and ``await client.consumer(...)`` as docs/api.md writes it."""
    values = [b"m%d" % i for i in range(2500)]
    async with client.producer(stream, max_in_flight=300) as producer:
        first = await producer.send_many(values[:1000])
        second = await producer.send_many(Message(v, key=v) for v in values[1000:])
        empty = await producer.send_many([])
        done = [await first, await second, await empty]
    assert [(d.messages, d.stream) for d in done] == [(1000, stream), (1500, stream), (0, stream)]
    consumer = await client.consumer(stream, offset="first")
    try:
        got: list[Message] = []
        async with asyncio.timeout(30):
            while len(got) < len(values):
                got += await consumer.next_batch(1000, timeout=5)
    finally:
        await consumer.close()
    assert [m.value for m in got] == values
    assert all(m.key == m.value for m in got[1000:])


async def test_the_same_script_on_every_broker(client: streamwire.Client, stream: str) -> None:
    """Named producer with a key and typed headers, named consumer that commits and resumes
    with ``offset="next"``, errors of the same class, delete, a cancelled close."""
    with pytest.raises(streamwire.StreamAlreadyExistsError):
        await client.create_stream(stream)
    await client.create_stream(stream, exist_ok=True)
    async with client.producer(stream, name="writer") as producer:
        message = Message(b"m0", key=b"old", headers={"text": "kept", "count": 1})
        await producer.send_and_wait(message, key=b"new", headers={"count": HeaderValue.int32(2)})
        await producer.send_batch([Message(f"m{i}".encode(), key=b"k") for i in range(1, 6)])
        await producer.flush()
    assert message.key == b"old"  # the message passed in is not changed
    async with client.consumer(stream, offset="next", name="reader") as fresh:
        assert await fresh.next_batch(10, timeout=0.5) == []  # nothing committed: from now on
    async with client.consumer(stream, offset="first", name="reader") as consumer:
        first = await take(consumer, 3)
        await consumer.commit(first[-1].offset)
    assert (first[0].key, first[0].headers) == (
        b"new",
        {"text": HeaderValue.string("kept"), "count": HeaderValue.int32(2)},
    )
    async with client.consumer(stream, offset="next", name="reader") as resumed:
        rest = await take(resumed, 3)
    assert [m.value for m in rest] == [b"m3", b"m4", b"m5"]
    consumer = client.consumer(stream, offset="first")
    await consumer.__aenter__()
    closing = asyncio.ensure_future(consumer.close())
    closing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await closing
    await consumer.close()  # idempotent, whatever the cancelled close left
    await client.delete_stream(stream)
    with pytest.raises(streamwire.StreamNotFoundError):
        await client.delete_stream(stream)
    await client.delete_stream(stream, missing_ok=True)


async def test_stats_count_what_was_published_and_consumed(
    client: streamwire.Client, stream: str
) -> None:
    n = 40
    values = [b"first", *(bytes([i]) * 10 for i in range(1, n))]
    async with client.producer(stream) as producer:
        assert producer.stats.published == 0
        await producer.send_and_wait(values[0])
        await producer.send_batch(values[1:])
        await producer.flush()
        published = producer.stats
    assert published.stream == stream
    assert (published.published, published.confirmed, published.failed) == (n, n, 0)
    assert published.in_flight == 0
    assert published.bytes_published >= sum(map(len, values))
    assert published.confirm_latency.count == n
    assert sum(published.confirm_latency.counts) == n
    async with client.consumer(stream, offset="first", name="counted") as consumer:
        got = await take(consumer, n)
        await consumer.commit(got[9].offset)
        consumed = consumer.stats
    assert [m.value for m in got] == values
    assert consumed.stream == stream
    assert consumed.consumed == n
    assert consumed.bytes_consumed >= sum(map(len, values))
    assert consumed.last_offset == got[-1].offset
    assert consumed.committed_offset == got[9].offset
    assert consumed.lag in (None, 0)  # everything was handed over (None: not reported)
    connections = client.stats
    assert connections.connects >= 1
    assert connections.reconnects == 0


async def test_opentelemetry_spans_and_metrics(client: streamwire.Client, stream: str) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    from streamwire import otel

    reader, exporter = InMemoryMetricReader(), InMemorySpanExporter()
    meters, tracers = MeterProvider(metric_readers=[reader]), TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(meters, tracers)
    try:
        async with client.producer(stream) as producer:
            await producer.send_and_wait(b"m0")
            await producer.send_batch([f"m{i}".encode() for i in range(1, 5)])
            await producer.flush()
        async with client.consumer(stream, offset="first") as consumer:
            await take(consumer, 5)
    finally:
        otel.uninstrument()
    spans = exporter.get_finished_spans()
    sends = [s for s in spans if s.name == f"send {stream}"]
    receives = [s for s in spans if s.name == f"receive {stream}"]
    assert sends, [s.name for s in spans]
    assert receives, [s.name for s in spans]
    assert {s.kind for s in sends} == {SpanKind.PRODUCER}
    assert {s.kind for s in receives} == {SpanKind.CONSUMER}
    for span in (*sends, *receives):
        attributes = dict(span.attributes or {})
        assert str(attributes["messaging.system"]) in client_scheme(client)
        assert attributes["messaging.destination.name"] == stream
        assert isinstance(attributes["server.port"], int)
    assert batch_total(sends) == 5
    assert batch_total(receives) == 5
    data = reader.get_metrics_data()
    assert data is not None
    totals: dict[str, int] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    attributes = dict(point.attributes or {})
                    if attributes.get("messaging.destination.name") == stream:
                        assert "error.type" not in attributes
                        value = getattr(point, "value", getattr(point, "count", 0))
                        totals[metric.name] = totals.get(metric.name, 0) + int(value)
    assert totals["messaging.client.sent.messages"] == 5
    assert totals["messaging.client.consumed.messages"] == 5
    assert totals["messaging.client.operation.duration"] == len(sends)  # one sample each
    meters.shutdown()
    tracers.shutdown()


def batch_total(spans: Sequence[ReadableSpan]) -> int:
    """The messages of ``spans`` (``messaging.batch.message_count`` added up)."""
    total = 0
    for span in spans:
        count = (span.attributes or {})["messaging.batch.message_count"]
        assert isinstance(count, int)
        total += count
    return total


def client_scheme(client: streamwire.Client) -> str:
    """The protocol package of ``client`` (``streamwire.rabbitmq`` ...), which names the
    ``messaging.system`` its spans must carry."""
    return type(client).__module__


async def test_cli_demo_prints_ok(url: str) -> None:
    protocol = streamwire.parse_url(url).protocol
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "streamwire.cli", "demo", "--count", "50"),
        *("--brokers", protocol, f"--{protocol}", url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, (out.decode(), err.decode())
    row = out.decode().splitlines()[-1].split()
    assert row[:4] == [protocol, "ok", "50", "50"], out.decode()


async def test_pytest_plugin_fixtures(url: str, pytester: pytest.Pytester) -> None:
    protocol = streamwire.parse_url(url).protocol
    pytester.makepyfile(
        test_app=f"""
import pytest

@pytest.mark.asyncio
async def test_round_trip(streamwire_stream, streamwire_url):
    assert await streamwire_url({protocol!r}) == {url!r}
    client, stream = await streamwire_stream({protocol!r})
    async with client.producer(stream) as producer:
        await producer.send_and_wait(b"order", key=b"k", headers={{"n": 1}})
    async with client.consumer(stream) as consumer:
        (message,) = await consumer.next_batch(1, timeout=10)
    assert (message.value, message.key, message.headers["n"].as_int()) == (b"order", b"k", 1)
"""
    )
    env = {f"STREAMWIRE_{protocol.upper()}_URL": url}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        result = await asyncio.to_thread(
            pytester.runpytest_subprocess, "-p", "no:cacheprovider", "-W", "ignore"
        )
    result.assert_outcomes(passed=1)


#: What each option of TcpKeepalive(idle=7, interval=3, count=4, user_timeout=11) reads back
#: as: SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT, TCP_USER_TIMEOUT (ms)
ASKED = TcpKeepalive(idle=7, interval=3, count=4, user_timeout=11)
ASKED_READ = (1, 7, 3, 4, 11_000)


def _tcp_sockets_to(port: int) -> dict[tuple[str, int], tuple[int, ...]]:
    """This process's TCP sockets connected to ``port``: their local address and their
    keepalive options as :data:`ASKED_READ` lists them (read through a duplicate of each
    descriptor)."""
    found: dict[tuple[str, int], tuple[int, ...]] = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            if not stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                continue
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        with sock:
            if sock.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            if sock.type != socket.SOCK_STREAM:
                continue
            try:
                if sock.getpeername()[1] != port:
                    continue
                local = sock.getsockname()[:2]
            except OSError:
                continue
            found[local] = (
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
            )
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="reads its sockets from /proc")
@pytest.mark.parametrize("asked", [ASKED, None], ids=["asked", "off"])
async def test_tcp_keepalive_is_what_connect_was_asked_for(
    url: str, asked: TcpKeepalive | None
) -> None:
    """``connect(tcp_keepalive=...)``, the same on every broker: every connection the client
    opens to the broker's port (RabbitMQ's, Iggy's, Liftbridge's HTTP/2 ones, used by its
    consumers) has those keepalive timings, and ``None`` leaves the kernel's. Liftbridge's
    control calls go through grpcio, which keeps its own (no SO_KEEPALIVE, TCP_USER_TIMEOUT
    from ``keepalive_timeout``: 20 s)."""
    port = streamwire.parse_url(url).port
    before = set(_tcp_sockets_to(port))
    async with streamwire.connect(url, timeout=10, tcp_keepalive=asked) as client:
        name = f"keepalive-{uuid.uuid4().hex[:8]}"
        await client.create_stream(name)
        try:
            async with client.producer(name) as producer:
                await asyncio.wait_for(producer.send_and_wait(b"x"), 10)
            async with client.consumer(name, offset="first") as consumer:
                assert [m.value for m in await take(consumer, 1)] == [b"x"]
                opened = {a: o for a, o in _tcp_sockets_to(port).items() if a not in before}
        finally:
            await client.delete_stream(name, missing_ok=True)
    grpcio = (0, 20_000)  # SO_KEEPALIVE, TCP_USER_TIMEOUT of a grpcio channel's socket
    liftbridge = url.startswith("liftbridge")
    ours = [o for o in opened.values() if not liftbridge or (o[0], o[4]) != grpcio]
    assert ours, opened
    if asked is not None:
        assert all(o == ASKED_READ for o in ours), opened
    else:
        assert all(o[0] == 0 and o[4] == 0 for o in ours), opened


async def test_a_client_that_lists_streams_names_the_one_it_created(
    url: str, client: streamwire.Client, stream: str
) -> None:
    """``streamwire.Listing`` on Liftbridge and Iggy (a topic's address, ``stream/topic``,
    for Iggy), sorted and without the broker's own streams; RabbitMQ's stream protocol has
    no command that lists streams, so its client is no ``Listing``."""
    if url.startswith("rabbitmq"):
        assert not isinstance(client, streamwire.Listing)
        return
    assert isinstance(client, streamwire.Listing)
    names = await client.list_streams()
    assert names == sorted(names)
    assert [n for n in names if n == stream or n.startswith(f"{stream}/")], names
    assert not [n for n in names if n.startswith("__")], names
