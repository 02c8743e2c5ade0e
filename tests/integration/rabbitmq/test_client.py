"""RabbitMQ Streams client against the real broker from integration/brokers.sh."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

import streamwire
import streamwire.rabbitmq as rmq
from streamwire import ConfigurationError, HeaderValue, Message, Offset
from streamwire.codec.headers import HeaderInput
from streamwire.errors import (
    AuthenticationError,
    ConnectError,
    StreamNotFoundError,
    UnsupportedByBroker,
)
from streamwire.rabbitmq.protocol.errors import (
    AuthenticationFailure,
    PreconditionFailed,
    StreamAlreadyExists,
    StreamDoesNotExist,
    VirtualHostAccessFailure,
)
from tests.brokers import BrokerInfo

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq]


async def test_handshake_facts(client: rmq.Client, broker: BrokerInfo) -> None:
    assert client.server_properties["product"] == "RabbitMQ"
    assert client.server_version >= (3, 9)
    assert client.server_properties["version"] == broker.version


async def test_connect_through_the_unified_entry_point(broker: BrokerInfo) -> None:
    async with streamwire.connect(broker.url, timeout=10) as client:
        assert isinstance(client, rmq.Client)


async def test_wrong_password_is_an_authentication_error(broker: BrokerInfo) -> None:
    with pytest.raises(AuthenticationFailure) as info:
        await rmq.connect(broker.url, password="definitely-wrong", timeout=10)
    assert isinstance(info.value, AuthenticationError)
    assert info.value.code == 0x08


async def test_unknown_vhost_is_refused(broker: BrokerInfo) -> None:
    with pytest.raises(VirtualHostAccessFailure):
        await rmq.connect(broker.url, vhost="no-such-vhost", timeout=10)


async def test_refused_port_is_a_connect_error() -> None:
    with pytest.raises(ConnectError):
        await rmq.connect("rabbitmq-stream://guest:guest@127.0.0.1:1/", timeout=5)


async def test_super_streams_need_a_recent_broker(client: rmq.Client) -> None:
    name = f"sw-super-{uuid.uuid4().hex[:8]}"
    if client.server_version >= (3, 13):
        await client.create_stream(name, partitions=3)
        for i in range(3):
            assert await client.stream_exists(f"{name}-{i}")
        await client.delete_stream(name, super_stream=True)
        assert not await client.stream_exists(f"{name}-0")
    else:
        with pytest.raises(ConfigurationError, match="super streams"):
            await client.create_stream(name, partitions=3)


async def test_super_stream_queries_on_every_broker(client: rmq.Client) -> None:
    """``partitions``/``route`` answer on 3.11+ (a plain stream is no super stream) and are
    refused before that without sending anything (RabbitMQ 3.10 answers Partitions with
    bytes that end the connection); offsets stored per partition reach the partition
    stream, and partition 0 of a plain stream is the stream."""
    plain = f"sw-plain-{uuid.uuid4().hex[:8]}"
    await client.create_stream(plain)
    try:
        if client.server_version < (3, 11):
            for query in (client.partitions(plain), client.route("k", plain)):
                with pytest.raises(UnsupportedByBroker, match="no super streams"):
                    await query
        else:
            with pytest.raises(StreamNotFoundError):
                await client.partitions(plain)
        await client.store_offset(plain, "reader", 3, partition=0)
        assert await client.committed_offset(plain, "reader", partition=0) == 3
        with pytest.raises(ConfigurationError, match="one partition"):
            await client.committed_offset(plain, "reader", partition=1)
        assert await client.stream_exists(plain)  # the connection survived every query
        if client.server_version < (3, 13):
            return
        name = f"sw-super-{uuid.uuid4().hex[:8]}"
        await client.create_stream(name, partitions=2)
        try:
            async with client.producer(f"{name}-1") as producer:
                await producer.send_and_wait(b"x")
            await client.store_offset(name, "reader", 0, partition=1)
            assert await client.committed_offset(f"{name}-1", "reader") == 0
            assert await client.committed_offset(name, "reader", partition=1) == 0
            with pytest.raises(ConfigurationError, match="no partition 2"):
                await client.committed_offset(name, "reader", partition=2)
        finally:
            await client.delete_stream(name, super_stream=True)
    finally:
        await client.delete_stream(plain)


async def test_create_delete_and_errors(client: rmq.Client) -> None:
    name = f"sw-cd-{uuid.uuid4().hex[:8]}-café-ß"  # non-ASCII: UTF-8 byte lengths on the wire
    await client.create_stream(name, max_length_bytes=1_000_000, max_age="1h")
    assert await client.stream_exists(name)
    await client.create_stream(name, exist_ok=True, max_length_bytes=1_000_000, max_age="1h")
    with pytest.raises(StreamAlreadyExists):
        await client.create_stream(name, max_length_bytes=1_000_000, max_age="1h")
    with pytest.raises(PreconditionFailed):  # same name, different arguments
        await client.create_stream(name, max_length_bytes=2_000_000)
    info = await client.stream_info(name)
    assert info.leader[1] > 0
    await client.delete_stream(name)
    assert not await client.stream_exists(name)
    with pytest.raises(StreamDoesNotExist):
        await client.delete_stream(name)
    await client.delete_stream(name, missing_ok=True)
    with pytest.raises(ConfigurationError):
        await client.create_stream(name, no_such_option=1)  # type: ignore[call-arg]


async def test_round_trip_with_keys_headers_and_offsets(client: rmq.Client, stream: str) -> None:
    headers: dict[str, HeaderInput] = {
        "s": "café-ß",
        "i": HeaderValue.int32(-7),
        "u": HeaderValue.uint16(65535),
        "b": True,
        "f": 2.5,
        "r": b"\x00\xff",
    }
    async with client.producer(stream) as producer:
        first = await producer.send_and_wait(b"one", key=b"k1", headers=headers)
        futures = await producer.send_batch([b"two", Message(b"three", key=b"k3")])
        await producer.flush()
    assert first.publishing_id == 1
    assert [f.result().publishing_id for f in futures] == [2, 3]
    async with client.consumer(stream, offset="first") as consumer:
        got = await consumer.next_batch(10, timeout=10)
        while len(got) < 3:
            got += await consumer.next_batch(10, timeout=10)
    assert [m.value for m in got] == [b"one", b"two", b"three"]
    assert [m.offset for m in got] == [0, 1, 2]
    assert got[0].key == b"k1"
    assert got[0].headers == {k: HeaderValue.of(v) for k, v in headers.items()}
    assert got[2].key == b"k3"
    assert got[1].key is None
    assert all(m.stream == stream for m in got)
    now = datetime.now(UTC)
    ts = got[0].timestamp
    assert ts is not None
    assert now - timedelta(minutes=5) < ts <= now + timedelta(minutes=5)


async def _publish(client: rmq.Client, stream: str, values: list[bytes]) -> None:
    async with client.producer(stream) as producer:
        await producer.send_batch(values)
        await producer.flush()


async def _take(consumer: rmq.Consumer, n: int) -> list[Message]:
    got: list[Message] = []
    while len(got) < n:
        batch = await consumer.next_batch(n - len(got), timeout=10)
        assert batch, f"only {len(got)} of {n} messages arrived"
        got += batch
    return got


async def test_offset_specs(client: rmq.Client, stream: str) -> None:
    await _publish(client, stream, [str(i).encode() for i in range(50)])
    async with client.consumer(stream, offset=Offset.at(42)) as c:
        got = await _take(c, 8)
        assert [m.offset for m in got] == list(range(42, 50))  # skipped inside the first chunk
    async with client.consumer(stream, offset="last") as c:
        last = await _take(c, 1)
        assert last[0].offset is not None
    async with client.consumer(stream, offset="next") as c:
        assert await c.next_batch(10, timeout=0.3) == []
        await _publish(client, stream, [b"fresh"])
        fresh = await _take(c, 1)
        assert fresh[0].value == b"fresh"
        assert fresh[0].offset == 50
    async with client.consumer(stream, offset=datetime.now(UTC) - timedelta(hours=1)) as c:
        assert (await _take(c, 1))[0].offset == 0


async def test_async_iteration(client: rmq.Client, stream: str) -> None:
    await _publish(client, stream, [b"a", b"b", b"c"])
    seen = []
    async with client.consumer(stream) as consumer:
        async for message in consumer:
            seen.append(message.value)
            if len(seen) == 3:
                break
    assert seen == [b"a", b"b", b"c"]


async def test_commit_and_resume_with_next(client: rmq.Client, stream: str) -> None:
    await _publish(client, stream, [str(i).encode() for i in range(10)])
    async with client.consumer(stream, name="reader-1") as c:
        got = await _take(c, 4)
        await c.commit(got[-1].offset)
        for _ in range(50):  # StoreOffset has no answer: poll until it landed
            if await c.committed_offset() == 3:
                break
            await asyncio.sleep(0.05)
        assert await c.committed_offset() == 3
    async with client.consumer(stream, offset="next", name="reader-1") as c:
        rest = await _take(c, 6)
    assert [m.offset for m in rest] == list(range(4, 10))


async def test_auto_commit_on_close(client: rmq.Client, stream: str) -> None:
    await _publish(client, stream, [b"x"] * 5)
    async with client.consumer(stream, name="auto", auto_commit_messages=100) as c:
        await _take(c, 5)
    probe = client.consumer(stream, name="auto")
    async with probe:
        for _ in range(50):
            if await probe.committed_offset() == 4:
                break
            await asyncio.sleep(0.05)
        assert await probe.committed_offset() == 4


async def test_named_producer_deduplicates(client: rmq.Client, stream: str) -> None:
    async with client.producer(stream, name="dedup") as p:
        for i in range(1, 4):
            await p.send_and_wait(f"m{i}".encode())
    async with client.producer(stream, name="dedup") as p:
        assert p.next_publishing_id == 4  # QueryPublisherSequence on start
        # re-send ids 2 and 3 (a crash replay): confirmed, not stored again
        for i in (2, 3):
            await p.send_and_wait(f"m{i}".encode(), publishing_id=i)
        await p.send_and_wait(b"m4")
    async with client.consumer(stream) as c:
        got = await _take(c, 4)
        assert await c.next_batch(10, timeout=0.5) == []
    assert [m.value for m in got] == [b"m1", b"m2", b"m3", b"m4"]


async def test_producer_on_missing_stream(client: rmq.Client) -> None:
    with pytest.raises(StreamDoesNotExist):
        async with client.producer("sw-no-such-stream"):
            pass


async def test_many_messages_are_batched_within_frame_max(client: rmq.Client, stream: str) -> None:
    values = [bytes([i % 251]) * 1000 for i in range(3000)]  # 3 MB: several Publish frames
    await _publish(client, stream, values)
    async with client.consumer(stream) as c:
        got = await _take(c, len(values))
    assert [m.value for m in got] == values


async def test_raw_mode_without_amqp(client: rmq.Client, stream: str) -> None:
    async with client.producer(stream, amqp=False) as p:
        await p.send_and_wait(b"not-amqp")
    async with client.consumer(stream) as c:
        (m,) = await _take(c, 1)
    assert m.value == b"not-amqp"  # a non-AMQP payload is delivered as it is
    async with client.consumer(stream, amqp=False) as c:
        (raw,) = await _take(c, 1)
    assert raw.value == b"not-amqp"


async def test_stream_stats(client: rmq.Client, stream: str) -> None:
    await _publish(client, stream, [b"a"])
    if client.server_version < (3, 11):
        with pytest.raises(ConfigurationError, match=r"needs 3\.11"):
            await client.stream_stats(stream)
        return
    stats = await client.stream_stats(stream)
    assert stats["first_chunk_id"] == 0
    assert stats["committed_chunk_id"] >= 0


async def test_send_many_has_one_future_for_the_whole_batch(
    client: rmq.Client, stream: str
) -> None:
    async with client.producer(stream, max_buffer_messages=100) as producer:
        future = await producer.send_many([str(i).encode() for i in range(1000)])
        confirmation = await asyncio.wait_for(future, 30)
        assert confirmation == rmq.BatchConfirmation(1, 1000, 1000, stream)
        empty = await producer.send_many([])
        assert empty.result().messages == 0
    async with client.consumer(stream) as c:
        got = await _take(c, 1000)
    assert [m.value for m in got] == [str(i).encode() for i in range(1000)]


async def test_a_message_larger_than_frame_max_fails_alone(broker: BrokerInfo) -> None:
    settings = rmq.ConnectionSettings(frame_max=4096)
    async with await rmq.connect(broker.url, settings=settings) as client:
        name = f"sw-big-{uuid.uuid4().hex[:8]}"
        await client.create_stream(name)
        try:
            async with client.producer(name) as producer:
                small = await producer.send(b"small")
                big = await producer.send(b"x" * 5000)
                after = await producer.send(b"after")
                with pytest.raises(streamwire.errors.LocalProtocolError, match="does not fit"):
                    await big
                assert (await small).publishing_id == 1
                assert (await after).publishing_id == 3
                with pytest.raises(streamwire.errors.LocalProtocolError):
                    await producer.flush()  # reports the failure since the last flush
        finally:
            await client.delete_stream(name)


async def test_publishing_ids_must_fit_uint64(client: rmq.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        with pytest.raises(ConfigurationError, match="uint64"):
            await producer.send(b"x", publishing_id=1 << 64)
        with pytest.raises(ConfigurationError, match="uint64"):
            await producer.send(b"x", publishing_id=-1)
        confirmation = await producer.send_and_wait(b"x", publishing_id=(1 << 64) - 1)
        assert confirmation.publishing_id == (1 << 64) - 1


async def test_more_than_256_producers_and_consumers_open_more_connections(
    client: rmq.Client, stream: str
) -> None:
    producers = [await client.producer(stream) for _ in range(260)]
    consumers = []
    try:
        assert len({id(p._conn) for p in producers}) == 2
        await asyncio.gather(*[p.send_and_wait(b"%d" % i) for i, p in enumerate(producers)])
        consumers = [await client.consumer(stream) for _ in range(260)]
        assert len({id(c._conn) for c in consumers}) == 2
        batches = await asyncio.gather(*[c.next_batch(260, timeout=10) for c in consumers[-3:]])
        assert all(len(batch) >= 1 for batch in batches)
    finally:
        for p in producers:
            await p.close()
        for c in consumers:
            await c.close()


async def test_credit_strategies_on_the_broker(client: rmq.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        for i in range(6):  # one chunk each: every message waits for its confirmation
            await producer.send_and_wait(b"%d" % i)
    async with client.consumer(stream, initial_credit=1, manual_credit=True) as manual:
        assert [m.value for m in await manual.next_batch(10, timeout=5)] == [b"0"]
        assert await manual.next_batch(10, timeout=0.5) == []  # nothing without credit
        manual.grant_credit(2)
        got: list[bytes] = []
        async with asyncio.timeout(10):
            while len(got) < 2:
                got += [m.value for m in await manual.next_batch(10, timeout=5)]
        assert got == [b"1", b"2"]
    async with client.consumer(stream, initial_credit=4, credit_batch=2) as batched:
        values: list[bytes] = []
        async with asyncio.timeout(10):
            while len(values) < 6:
                values += [m.value for m in await batched.next_batch(10, timeout=5)]
        assert values == [b"%d" % i for i in range(6)]
