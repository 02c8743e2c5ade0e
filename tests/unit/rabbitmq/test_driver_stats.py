"""``stats`` of the RabbitMQ Streams client, producers and consumers against the scripted
broker (no server): what each call counts, failures (publish errors, a lost connection,
abort), sub-batches, super streams, lag from Deliver v2 and reconnects."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import streamwire.rabbitmq as rmq
from streamwire.codec.amqp import encode_data_body
from streamwire.rabbitmq.protocol.constants import ResponseCode
from streamwire.rabbitmq.protocol.errors import AccessRefused
from tests.rabbitmq_double import RabbitMQDouble, simple_entry
from tests.unit.rabbitmq.driver_support import published_ids

S = "s"
FAST = rmq.ReconnectPolicy(initial_delay=0.01, max_delay=0.05, max_elapsed=5.0)


@pytest.fixture
async def stream(client: rmq.Client) -> str:
    await client.create_stream(S)
    return S


def entry(value: bytes) -> bytes:
    return simple_entry(encode_data_body(value))


async def test_every_call_counts_its_messages_once_settled(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.reject = {4: ResponseCode.ACCESS_REFUSED}
    async with client.producer(stream) as producer:
        await producer.send_and_wait(b"one", timeout=5)
        await producer.send_batch([b"a", b"b", b"c"])
        batch = await producer.send_many([b"d", b"e"])
        with pytest.raises(AccessRefused):  # id 4 ("c") was refused
            await producer.flush(timeout=5)
        assert (await batch).messages == 2
        stats = producer.stats
    assert (stats.published, stats.confirmed, stats.failed, stats.in_flight) == (6, 5, 1, 0)
    assert stats.stream == stream
    assert stats.bytes_published > len(b"oneabcde")  # AMQP-encoded messages
    assert stats.confirm_latency.count == 5  # refused messages have no confirm latency
    assert producer.stats == stats  # a snapshot after close stays as it was


async def test_unconfirmed_messages_count_as_in_flight_then_failed_by_a_lost_connection(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.hold_confirms = True
    producer = await client.producer(stream)
    try:
        futures = await producer.send_batch([b"a", b"b", b"c"])
        await broker.until(lambda: published_ids(broker) == [1, 2, 3])
        assert (producer.stats.published, producer.stats.in_flight) == (3, 3)
        broker.session_publishing(stream).hang_up()
        async with asyncio.timeout(5):
            await asyncio.gather(*futures, return_exceptions=True)
        stats = producer.stats
        assert (stats.confirmed, stats.failed, stats.in_flight) == (0, 3, 0)
    finally:
        await producer.close()
    assert client.stats.errors == 1  # the producer's connection was lost
    assert client.stats.reconnects == 0


async def test_abort_fails_what_is_unconfirmed(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.hold_confirms = True
    producer = await client.producer(stream)
    await producer.send_many([b"a", b"b"])
    await broker.until(lambda: published_ids(broker) == [1, 2])
    producer.abort()
    stats = producer.stats
    assert (stats.published, stats.confirmed, stats.failed, stats.in_flight) == (2, 0, 2, 0)


async def test_sub_batches_count_messages_not_entries(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    async with client.producer(stream, sub_batch_size=3) as producer:
        await producer.send_batch([b"m%d" % i for i in range(7)])
        await producer.flush(timeout=5)
        stats = producer.stats
    assert published_ids(broker) == [1, 2, 3]
    assert (stats.published, stats.confirmed, stats.in_flight) == (7, 7, 0)
    assert stats.confirm_latency.count == 7


async def test_consumer_counts_batches_and_lag_from_the_committed_chunk(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.append(S, entry(b"m0"), entry(b"m1"), entry(b"m2"))  # chunk 0: offsets 0..2
    broker.append(S, entry(b"m3"), entry(b"m4"))  # chunk 3: offsets 3..4
    async with client.consumer(stream, name="app") as consumer:
        assert consumer.stats.lag is None  # nothing delivered yet
        first = await consumer.next_batch(2, timeout=5)
        stats = consumer.stats
        assert (stats.consumed, stats.last_offset) == (2, 1)
        assert stats.bytes_consumed > 0
        # Deliver v2 says the last committed chunk starts at offset 3: 2 and 3 are after 1
        assert stats.lag == 2
        await consumer.commit()
        assert consumer.stats.committed_offset == 1
        third = await consumer.next(timeout=5)  # one message handed over is a batch of one
        assert third is not None
        rest = await consumer.next_batch(10, timeout=5)
        stats = consumer.stats
    assert [m.offset for m in [*first, third, *rest]] == [0, 1, 2, 3, 4]
    assert (stats.consumed, stats.last_offset, stats.lag) == (5, 4, 0)


async def test_super_stream_stats_add_up_the_partitions(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    await client.create_stream("inv", partitions=3)
    keys = [b"alice", b"bob", b"carol", b"dave"]
    async with client.super_stream_producer("inv") as producer:
        for key in keys:
            await producer.send_and_wait(b"v", key=key, timeout=5)
        published = producer.stats
    assert (published.stream, published.published, published.confirmed) == ("inv", 4, 4)
    async with client.super_stream_consumer("inv") as consumer:
        got = 0
        while got < len(keys):
            got += len(await consumer.next_batch(10, timeout=5))
        consumed = consumer.stats
    assert (consumed.stream, consumed.consumed, consumed.last_offset) == ("inv", 4, None)


@pytest.fixture
async def recovering(broker: RabbitMQDouble) -> AsyncIterator[rmq.Client]:
    c = await rmq.connect(broker.url, timeout=5.0, reconnect=FAST)
    await c.create_stream(S)
    try:
        yield c
    finally:
        async with asyncio.timeout(10):
            await c.close()


async def test_a_connection_made_again_is_a_reconnect(
    broker: RabbitMQDouble, recovering: rmq.Client
) -> None:
    async with recovering.producer(S) as producer:
        await producer.send_and_wait(b"a", timeout=5)
        before = recovering.stats
        assert (before.connects, before.reconnects, before.errors) == (2, 0, 0)  # locator
        broker.session_publishing(S).hang_up()
        await broker.until(lambda: recovering.stats.reconnects >= 1)
        await producer.send_and_wait(b"b", timeout=5)
    after = recovering.stats
    assert (after.connects, after.reconnects, after.errors) == (3, 1, 1)
