"""The Liftbridge control plane against the real server: streams, metadata, cursors,
connecting and closing."""

from __future__ import annotations

import asyncio
import socket

import pytest

import streamwire.liftbridge as lb
from streamwire.errors import ClosedError, ConfigurationError, ConnectError, ConnectTimeout
from streamwire.liftbridge.protocol.metadata import CURSORS_STREAM
from tests.brokers import BrokerInfo
from tests.integration.liftbridge.conftest import NewStream, unique
from tests.integration.liftbridge.test_produce_consume import read

pytestmark = [pytest.mark.integration, pytest.mark.liftbridge]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_metadata(client: lb.Client, broker: BrokerInfo, new_stream: NewStream) -> None:
    stream = await new_stream(partitions=2)
    md = await client.fetch_metadata(stream, "sw-lb-missing-stream-x")
    assert md.missing == frozenset({"sw-lb-missing-stream-x"})
    (b,) = md.brokers.values()
    assert (b.id, b.host, b.port) == (broker.extra["SERVER_ID"], broker.host, broker.port)
    info = md.streams[stream]
    assert (info.name, info.subject, info.partition_count) == (stream, stream, 2)
    assert sorted(info.partitions) == [0, 1]
    p1 = info.partitions[1]
    assert (p1.stream, p1.id, p1.leader) == (stream, 1, b.id)
    assert p1.isr == (b.id,)
    assert (p1.high_watermark, p1.newest_offset) == (-1, -1)
    assert info.creation_timestamp > 0
    assert await client.stream_exists(stream)
    assert not await client.stream_exists("sw-lb-missing-stream-x")
    everything = await client.fetch_metadata()
    assert stream in everything.streams
    assert CURSORS_STREAM in everything.streams


async def test_partition_metadata_follows_the_log(client: lb.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        await producer.send_and_wait(b"a")
        await producer.send_and_wait(b"b")
    p = await client.partition_metadata(stream, 0)
    assert (p.high_watermark, p.newest_offset) == (1, 1)
    assert p.messages_received_latest >= p.messages_received_first > 0
    with pytest.raises(lb.StreamNotFound):
        await client.partition_metadata(stream, 5)


async def test_create_and_delete_semantics(client: lb.Client) -> None:
    name = unique()
    await client.create_stream(name, subject=f"{name}.subject", partitions=2)
    try:
        with pytest.raises(lb.StreamAlreadyExists):
            await client.create_stream(name, subject=f"{name}.subject")
        await client.create_stream(name, subject=f"{name}.subject", exist_ok=True)
        assert (await client.stream_info(name)).subject == f"{name}.subject"
    finally:
        await client.delete_stream(name)
    with pytest.raises(lb.StreamNotFound):
        await client.delete_stream(name)
    await client.delete_stream(name, missing_ok=True)
    with pytest.raises(lb.StreamNotFound):
        await client.stream_info(name)


async def test_server_side_argument_errors(client: lb.Client) -> None:
    with pytest.raises(lb.InvalidArgument, match="reserved"):
        await client.create_stream(CURSORS_STREAM)
    with pytest.raises(lb.InvalidArgument, match=r"[Ss]ubject"):
        await client.create_stream(unique(), subject="has space")
    with pytest.raises(ConfigurationError):
        await client.create_stream(unique(), no_such_option=1)  # type: ignore[call-arg]
    with pytest.raises(lb.StreamNotFound):
        await client.pause_stream("sw-lb-missing-stream-y")


async def test_stream_options_reach_the_server(client: lb.Client, new_stream: NewStream) -> None:
    stream = await new_stream(
        retention_max_messages=1000, retention_max_age=3600.0, optimistic_concurrency_control=True
    )
    async with client.producer(stream) as producer:
        with pytest.raises(lb.IncorrectOffset):
            await producer.send_and_wait(b"x", expected_offset=9)


async def test_pause_and_readonly_show_in_metadata(client: lb.Client, stream: str) -> None:
    await client.pause_stream(stream)
    assert (await client.stream_info(stream)).partitions[0].paused
    await client.set_stream_readonly(stream)
    await client.set_stream_readonly(stream, readonly=False)


async def test_cursors(client: lb.Client, stream: str) -> None:
    name = unique("cursor")
    async with client.producer(stream) as producer:
        for i in range(6):
            await producer.send_and_wait(f"m{i}".encode())
    async with client.consumer(stream, name=name, offset="first") as consumer:
        assert await consumer.committed_offset() is None
        got = await read(consumer, 3)
        await consumer.commit()  # the last message handed out
        assert await consumer.committed_offset() == got[-1].offset == 2
    async with client.consumer(stream, name=name, offset="next") as consumer:
        (msg,) = await read(consumer, 1)
        assert msg.offset == 3  # resumes after the cursor
        await consumer.commit(4)
    async with client.consumer(stream, name=name, offset="next") as consumer:
        assert (await read(consumer, 1))[0].offset == 5
    assert await client.fetch_cursor(stream, 0, name) == 4
    async with client.consumer(stream, name=unique("fresh"), offset="next") as consumer:
        assert await consumer.next(timeout=0.3) is None  # no cursor: only new messages
    async with client.consumer(stream) as unnamed:
        with pytest.raises(ConfigurationError):
            await unnamed.commit(1)


async def test_connect_fails_fast_on_a_closed_grpc_port(broker: BrokerInfo) -> None:
    nats_url = broker.extra.get("NATS_URL", "nats://127.0.0.1:4222")
    with pytest.raises(ConnectError):
        await lb.connect(f"liftbridge://127.0.0.1:{free_port()}?nats={nats_url}", timeout=20)


async def test_connect_fails_fast_on_a_closed_nats_port(broker: BrokerInfo) -> None:
    url = f"liftbridge://{broker.host}:{broker.port}?nats=nats://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectError):
        await lb.connect(url, timeout=20)


async def test_connect_times_out_on_a_silent_server() -> None:
    with socket.socket() as silent:  # accepts TCP (backlog), never speaks HTTP/2
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        with pytest.raises(ConnectTimeout):
            await lb.connect(f"liftbridge://127.0.0.1:{port}", timeout=0.5)


async def test_close_fails_pending_and_refuses_new_work(url: str, stream: str) -> None:
    client = await lb.connect(url, timeout=10)
    producer = await client.producer(stream)
    await client.close()
    await client.close()  # idempotent
    with pytest.raises(ClosedError):
        await producer.send(b"x")
    with pytest.raises(ClosedError):
        client.producer(stream)
    with pytest.raises(ClosedError):
        await client.fetch_metadata()


async def test_cancelled_send_and_wait_leaves_the_producer_usable(
    client: lb.Client, stream: str
) -> None:
    async with client.producer(stream) as producer:
        task = asyncio.create_task(producer.send_and_wait(b"maybe"))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        conf = await producer.send_and_wait(b"after")
    assert conf.offset in (0, 1)


async def test_cancelled_consumer_read_loses_nothing(client: lb.Client, stream: str) -> None:
    async with client.consumer(stream) as consumer:
        waiting = asyncio.create_task(consumer.next())
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        async with client.producer(stream) as producer:
            await producer.send_and_wait(b"kept")
        (msg,) = await read(consumer, 1)
    assert msg.value == b"kept"
