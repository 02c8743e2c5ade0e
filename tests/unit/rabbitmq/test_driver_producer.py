"""The RabbitMQ Streams producer against the scripted broker (no server): confirms, typed
publish errors, deduplication with a name, flow control and sub-batches."""

from __future__ import annotations

import asyncio

import pytest

import streamwire.rabbitmq as rmq
from streamwire.codec.headers import HeaderValue
from streamwire.codec.message import Confirmation, Message
from streamwire.errors import ClosedError, FlushTimeout, ProducerBufferFull
from streamwire.rabbitmq.protocol import frames as f
from streamwire.rabbitmq.protocol.constants import ResponseCode
from streamwire.rabbitmq.protocol.errors import (
    AccessRefused,
    StreamDoesNotExist,
    StreamNotAvailable,
)
from tests.rabbitmq_double import RabbitMQDouble
from tests.unit.rabbitmq.driver_support import published_ids, stored, stored_values


@pytest.fixture
async def stream(broker: RabbitMQDouble, client: rmq.Client) -> str:
    await client.create_stream("orders")
    return "orders"


async def test_send_and_wait_is_confirmed_and_stored(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    async with client.producer(stream) as producer:
        confirmation = await producer.send_and_wait(b"hello", timeout=5)
        future = await producer.send(Message(b"v", key=b"k", headers={"h": "x"}))
        assert await asyncio.wait_for(future, 5) == Confirmation(2, None, stream)
    assert confirmation == Confirmation(1, None, stream)
    declared = broker.frames(f.DeclarePublisherRequest)
    assert [(d.reference, d.stream) for d in declared] == [("", stream)]
    assert not broker.frames(f.QueryPublisherSequenceRequest)  # unnamed: no dedup
    messages = stored(broker, stream)
    assert [bytes(m.value) for m in messages] == [b"hello", b"v"]
    assert messages[1].key == b"k"
    assert messages[1].headers == {"h": HeaderValue.string("x")}
    assert broker.frames(f.DeletePublisherRequest)  # close deletes the publisher


async def test_send_batch_send_many_and_flush(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    async with client.producer(stream) as producer:
        futures = await producer.send_batch([b"a", b"b", b"c"])
        batch = await producer.send_many([b"d", b"e"])
        await producer.flush(timeout=5)
        assert producer.pending == 0
        assert all(fut.done() for fut in futures)
        assert [fut.result().publishing_id for fut in futures] == [1, 2, 3]
        assert batch.result() == rmq.BatchConfirmation(4, 5, 2, stream)
    assert stored_values(broker, stream) == [b"a", b"b", b"c", b"d", b"e"]
    assert published_ids(broker) == [1, 2, 3, 4, 5]


async def test_publish_errors_fail_their_own_messages_with_typed_errors(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.reject = {2: ResponseCode.ACCESS_REFUSED, 4: ResponseCode.STREAM_NOT_AVAILABLE}
    async with client.producer(stream) as producer:
        futures = await producer.send_batch([b"1", b"2", b"3", b"4", b"5"])
        with pytest.raises(AccessRefused):  # flush raises the first failure once
            await producer.flush(timeout=5)
        await producer.flush(timeout=5)
        results = await asyncio.gather(*futures, return_exceptions=True)
    assert isinstance(results[1], AccessRefused)
    assert isinstance(results[3], StreamNotAvailable)
    assert [r.publishing_id for r in results if isinstance(r, Confirmation)] == [1, 3, 5]
    assert stored_values(broker, stream) == [b"1", b"3", b"5"]


async def test_a_named_producer_continues_after_the_stored_sequence(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.state.sequences[("app", stream)] = 41
    async with client.producer(stream, name="app") as producer:
        assert producer.next_publishing_id == 42
        assert (await producer.send_and_wait(b"x", timeout=5)).publishing_id == 42
        # replaying an id already stored is confirmed but deduplicated by the broker
        replay = await producer.send_and_wait(b"again", publishing_id=40, timeout=5)
        assert replay.publishing_id == 40
    queries = broker.frames(f.QueryPublisherSequenceRequest)
    assert [(q.reference, q.stream) for q in queries] == [("app", stream)]
    assert [d.reference for d in broker.frames(f.DeclarePublisherRequest)] == ["app"]
    assert stored_values(broker, stream) == [b"x"]
    # a new producer with the same name resumes after the last stored id
    async with client.producer(stream, name="app") as again:
        assert again.next_publishing_id == 43


@pytest.mark.parametrize("bodies", [True, False], ids=["bytes", "messages"])
async def test_send_many_takes_the_first_publishing_id_of_a_run(
    broker: RabbitMQDouble, client: rmq.Client, stream: str, bodies: bool
) -> None:
    """A run with an explicit first id: consecutive ids from it, across the groups a small
    buffer cuts the run into; ids the broker stored under the name are dropped."""
    broker.state.sequences[("app", stream)] = 102
    plain = [b"%d" % i for i in range(7)]
    values: list[bytes | Message] = [*plain] if bodies else [Message(v, key=b"k") for v in plain]
    async with client.producer(stream, name="app", max_buffer_messages=3) as producer:
        run = await producer.send_many(values, publishing_id=100)
        assert (await asyncio.wait_for(run, 5)).first_publishing_id == 100
        later = await producer.send_many([b"next"], publishing_id=200)
        assert (await asyncio.wait_for(later, 5)).last_publishing_id == 200
    assert published_ids(broker) == [*range(100, 107), 200]
    assert stored_values(broker, stream) == [b"3", b"4", b"5", b"6", b"next"]


async def test_max_in_flight_holds_back_unconfirmed_messages(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.hold_confirms = True
    async with client.producer(stream, max_in_flight=2, max_frame_messages=1) as producer:
        futures = await producer.send_batch([b"%d" % i for i in range(5)])
        await broker.until(lambda: len(published_ids(broker)) == 2)
        await asyncio.sleep(0.05)  # room for a wrongly eager sender to write more
        assert published_ids(broker) == [1, 2]
        assert producer.pending == 5
        while not all(fut.done() for fut in futures):
            await broker.until(lambda: broker.held or all(fut.done() for fut in futures))
            assert producer._outbox.in_flight <= 2
            broker.release_confirms()
        assert [fut.result().publishing_id for fut in futures] == [1, 2, 3, 4, 5]
    assert published_ids(broker) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("backlogged", [False, True])
async def test_a_confirm_writes_the_frames_it_makes_room_for_at_once(
    broker: RabbitMQDouble,
    client: rmq.Client,
    stream: str,
    backlogged: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The frames a confirm makes room for are written from the reader's callback, before
    any other task runs, unless the socket is backlogged: then the sender writes them after
    waiting for flow control. Either way every message is written once, in order."""
    broker.hold_confirms = True
    async with client.producer(stream, max_in_flight=2, max_frame_messages=1) as producer:
        futures = await producer.send_batch([b"%d" % i for i in range(5)])
        await broker.until(lambda: len(published_ids(broker)) == 2)
        box, conn = producer._outbox, producer._conn
        assert conn is not None
        assert (box.in_flight, box.unwritten) == (2, 3)
        if backlogged:
            monkeypatch.setattr(type(conn), "backlogged", property(lambda _: True))
        producer.confirmed((1, 2))  # what the connection's reader calls for a PublishConfirm
        assert (box.in_flight, box.unwritten) == ((0, 3) if backlogged else (2, 1))
        monkeypatch.undo()
        broker.hold_confirms = False
        broker.release_confirms()
        async with asyncio.timeout(5):
            results = await asyncio.gather(*futures)
        assert [r.publishing_id for r in results] == [1, 2, 3, 4, 5]
    assert published_ids(broker) == [1, 2, 3, 4, 5]
    assert stored_values(broker, stream) == [b"0", b"1", b"2", b"3", b"4"]


async def test_a_full_buffer_blocks_send_then_raises(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.hold_confirms = True
    producer = await client.producer(stream, max_in_flight=1, max_buffer_messages=1, max_block=0.05)
    try:
        first = await producer.send(b"1")
        await broker.until(lambda: published_ids(broker) == [1])
        second = await producer.send(b"2")  # buffered: nothing may be written
        with pytest.raises(ProducerBufferFull):
            await producer.send(b"3")
        with pytest.raises(FlushTimeout):
            await producer.flush(timeout=0.05)
        # a send waiting for room goes through once confirms make room
        third = asyncio.create_task(producer.send(b"3", timeout=5))
        await broker.until(lambda: broker.held)
        broker.release_confirms()
        await broker.until(lambda: published_ids(broker) == [1, 2])
        broker.hold_confirms = False
        broker.release_confirms()
        async with asyncio.timeout(5):
            results = [await first, await second, await (await third)]
        assert [r.publishing_id for r in results] == [1, 2, 3]
    finally:
        await producer.close()
    assert stored_values(broker, stream) == [b"1", b"2", b"3"]


async def test_sub_batches_store_several_messages_under_one_id(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    async with client.producer(stream, sub_batch_size=3, compression="gzip") as producer:
        futures = await producer.send_batch([b"m%d" % i for i in range(7)])
        await producer.flush(timeout=5)
    assert published_ids(broker) == [1, 2, 3]  # three entries: 3 + 3 + 1 messages
    assert [fut.result().publishing_id for fut in futures] == [1, 1, 1, 2, 2, 2, 3]
    messages = stored(broker, stream)
    assert [bytes(m.value) for m in messages] == [b"m%d" % i for i in range(7)]
    assert [m.offset for m in messages] == list(range(7))


async def test_a_producer_on_a_missing_stream_does_not_start(client: rmq.Client) -> None:
    with pytest.raises(StreamDoesNotExist):
        await client.producer("missing").start(timeout=5)


async def test_deleting_the_stream_fails_pending_messages(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.hold_confirms = True
    producer = await client.producer(stream)
    try:
        future = await producer.send(b"x")
        await broker.until(lambda: published_ids(broker) == [1])
        await client.delete_stream(stream)  # the broker sends MetadataUpdate
        with pytest.raises(StreamNotAvailable):
            await asyncio.wait_for(future, 5)
        with pytest.raises(StreamNotAvailable):
            await producer.send(b"y")
    finally:
        await producer.close()


async def test_send_batch_futures_however_they_are_used(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    """``send_batch``'s futures are made on use (``transport.pending``): awaited before or
    after the confirms, gathered, called back, cancelled by the caller — each message's
    confirmation arrives once, and a cancelled future does not stop its message."""
    broker.hold_confirms = True
    async with client.producer(stream) as producer:
        futures = await producer.send_batch([b"m%d" % i for i in range(6)])
        assert all(isinstance(fut, asyncio.Future) and not fut.done() for fut in futures)
        early = asyncio.ensure_future(futures[0])
        gathered = asyncio.gather(*futures[1:3])
        called: list[asyncio.Future[Confirmation]] = []
        futures[3].add_done_callback(called.append)
        assert futures[4].cancel()
        await broker.until(lambda: published_ids(broker) == [1, 2, 3, 4, 5, 6])
        broker.release_confirms()
        async with asyncio.timeout(5):
            assert (await early).publishing_id == 1
            assert [c.publishing_id for c in await gathered] == [2, 3]
        await producer.flush(timeout=5)
        await asyncio.sleep(0)
        assert called == [futures[3]]
        assert futures[4].cancelled()
        assert (await futures[5]).publishing_id == 6  # awaited once all were confirmed
        assert [fut.result().publishing_id for fut in futures if not fut.cancelled()] == [
            1,
            2,
            3,
            4,
            6,
        ]
        assert producer.pending == 0
    assert stored_values(broker, stream) == [b"m%d" % i for i in range(6)]  # m4 too


async def test_closing_fails_send_batch_futures_used_or_not(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.hold_confirms = True
    producer = await client.producer(stream)
    futures = await producer.send_batch([b"a", b"b", b"c"])
    waiting = asyncio.ensure_future(asyncio.gather(*futures[:2], return_exceptions=True))
    await broker.until(lambda: published_ids(broker) == [1, 2, 3])
    await producer.close(flush=False)
    async with asyncio.timeout(5):
        results = await waiting
    assert all(isinstance(r, ClosedError) for r in results), results
    assert isinstance(futures[2].exception(), ClosedError)  # never used before the close
    with pytest.raises(ClosedError):
        await futures[2]
