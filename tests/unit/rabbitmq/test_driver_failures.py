"""Failure paths of the RabbitMQ Streams drivers against the scripted broker (no server):
the peer hanging up mid-publish or mid-consume, malformed frames and chunks, and recovery
under a reconnect policy. Nothing may hang: every wait has a timeout."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import streamwire.rabbitmq as rmq
from streamwire.codec.amqp import encode_data_body
from streamwire.errors import ChecksumMismatchError, ConnectionClosed, RemoteProtocolError
from streamwire.rabbitmq.protocol import frames as f
from streamwire.rabbitmq.protocol.constants import OffsetType
from streamwire.rabbitmq.protocol.errors import StreamNotAvailable
from tests.rabbitmq_double import RabbitMQDouble, simple_entry
from tests.rabbitmq_double.state import Chunk
from tests.unit.rabbitmq.driver_support import published_ids, stored_values

S = "s"
FAST = rmq.ReconnectPolicy(initial_delay=0.01, max_delay=0.05, max_elapsed=5.0)


@pytest.fixture
async def stream(client: rmq.Client) -> str:
    await client.create_stream(S)
    return S


@pytest.fixture
async def recovering(broker: RabbitMQDouble) -> AsyncIterator[rmq.Client]:
    """A client that reconnects."""
    c = await rmq.connect(broker.url, timeout=5.0, reconnect=FAST)
    await c.create_stream(S)
    try:
        yield c
    finally:
        async with asyncio.timeout(10):
            await c.close()


def entry(value: bytes) -> bytes:
    return simple_entry(encode_data_body(value))


async def test_peer_hang_up_mid_publish_fails_pending_futures(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.hold_confirms = True
    producer = await client.producer(stream)
    try:
        futures = await producer.send_batch([b"a", b"b", b"c"])
        await broker.until(lambda: published_ids(broker) == [1, 2, 3])
        broker.session_publishing(stream).hang_up()
        async with asyncio.timeout(5):
            results = await asyncio.gather(*futures, return_exceptions=True)
        assert all(isinstance(r, ConnectionClosed) for r in results), results
        with pytest.raises(ConnectionClosed):
            await producer.flush(timeout=5)
        with pytest.raises(ConnectionClosed):
            await producer.send(b"d")
    finally:
        async with asyncio.timeout(5):
            await producer.close()


async def test_a_malformed_frame_mid_publish_is_a_protocol_error(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.hold_confirms = True
    producer = await client.producer(stream)
    try:
        future = await producer.send(b"a")
        await broker.until(lambda: published_ids(broker) == [1])
        # a PublishConfirm announcing 5 ids but carrying one
        bogus = bytes.fromhex("00000011 0003 0001 00 00000005 0000000000000001")
        broker.session_publishing(stream).send_raw(bogus)
        with pytest.raises(ConnectionClosed, match="protocol violation") as info:
            await asyncio.wait_for(future, 5)
        assert isinstance(info.value.__cause__, RemoteProtocolError)
    finally:
        async with asyncio.timeout(5):
            await producer.close()


async def test_an_unknown_command_from_the_broker_fails_pending_requests(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    session = broker.sessions[0]
    session.silent = True
    pending = asyncio.create_task(client.create_stream("x"))
    await broker.until(lambda: broker.state.streams.get("x") is not None)
    session.silent = False
    session.send_raw(bytes.fromhex("00000004 7777 0001"))
    with pytest.raises(ConnectionClosed, match="protocol violation"):
        await asyncio.wait_for(pending, 5)


async def test_a_corrupt_chunk_raises_checksum_mismatch(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.append(stream, entry(b"good"))
    log = broker.state.streams[stream]
    good = log.chunks.pop()
    data = bytearray(good.data)
    data[-1] ^= 0xFF  # a flipped bit in the last entry, CRC unchanged
    log.chunks.append(Chunk(good.chunk_id, good.records, good.timestamp, bytes(data)))
    async with client.consumer(stream) as consumer:
        with pytest.raises(ChecksumMismatchError):
            await consumer.next_batch(10, timeout=5)
    async with client.consumer(stream, verify_crc=False) as unchecked:
        (message,) = await unchecked.next_batch(10, timeout=5)
    assert bytes(message.value) == b"goo" + bytes([ord("d") ^ 0xFF])


async def consume_until_failure(consumer: rmq.Consumer) -> None:
    """Whatever was queued first, then the failure (TimeoutError if none comes)."""
    async with asyncio.timeout(5):
        while True:
            await consumer.next_batch(10, timeout=5)


async def test_peer_hang_up_mid_consume_raises_from_next_batch(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.append(stream, entry(b"m0"))
    async with client.consumer(stream) as consumer:
        assert len(await consumer.next_batch(10, timeout=5)) == 1
        broker.session_consuming(stream).hang_up()
        with pytest.raises(ConnectionClosed):
            await consume_until_failure(consumer)


async def test_deleting_the_stream_ends_a_consumer_with_a_typed_error(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    async with client.consumer(stream) as consumer:
        await client.delete_stream(stream)
        with pytest.raises(StreamNotAvailable):
            await consumer.next(timeout=5)


async def test_a_named_producer_resends_after_reconnecting_without_duplicates(
    broker: RabbitMQDouble, recovering: rmq.Client
) -> None:
    broker.hold_confirms = True
    async with recovering.producer(S, name="app") as producer:
        futures = await producer.send_batch([b"a", b"b", b"c"])
        await broker.until(lambda: published_ids(broker) == [1, 2, 3])
        broker.hold_confirms = False
        broker.session_publishing(S).hang_up()  # stored, never confirmed
        async with asyncio.timeout(5):
            confirmed = [(await fut).publishing_id for fut in futures]
    assert confirmed == [1, 2, 3]
    assert published_ids(broker) == [1, 2, 3, 1, 2, 3]  # re-sent with the same ids
    assert stored_values(broker, S) == [b"a", b"b", b"c"]  # deduplicated by name


async def test_a_consumer_resubscribes_after_the_last_message_handed_out(
    broker: RabbitMQDouble, recovering: rmq.Client
) -> None:
    broker.append(S, entry(b"m0"), entry(b"m1"))
    async with recovering.consumer(S) as consumer:
        first = await consumer.next_batch(10, timeout=5)
        broker.session_consuming(S).hang_up()
        broker.append(S, entry(b"m2"))
        async with asyncio.timeout(5):
            rest = await consumer.next_batch(10, timeout=5)
            while not rest:
                rest = await consumer.next_batch(10, timeout=5)
    assert [m.offset for m in first + rest] == [0, 1, 2]
    resubscribe = broker.frames(f.SubscribeRequest)[-1]
    assert (resubscribe.offset_type, resubscribe.offset) == (OffsetType.OFFSET, 2)
