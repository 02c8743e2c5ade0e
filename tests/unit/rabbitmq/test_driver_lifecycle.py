"""Lifecycles that survive cancellation, on the RabbitMQ double: a cancelled close()
aborts what it did not close (no socket left), a cancellation aimed at close() always
reaches its caller, and the client lets go of closed producers and consumers."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

import streamwire.rabbitmq as rmq
from streamwire.errors import ClosedError, StreamwireError
from streamwire.rabbitmq.protocol import frames as f
from tests.lifecycle import cancel, close_cancelled_then_closed
from tests.proxy import wait_until
from tests.rabbitmq_double import RabbitMQDouble
from tests.sockets import HAS_PROC, wait_connections_to

needs_proc = pytest.mark.skipif(not HAS_PROC, reason="counts sockets through /proc")


@pytest.fixture
async def stream(client: rmq.Client) -> str:
    await client.create_stream("orders")
    return "orders"


@needs_proc
async def test_a_cancelled_client_close_leaves_no_connection(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.hold_confirms = True  # the close's flush waits for confirms that do not come
    producer = await client.producer(stream)
    await client.consumer(stream)
    futures = await producer.send_batch([b"m%d" % i for i in range(1000)])
    await broker.until(lambda: broker.held)
    assert len(await wait_connections_to(broker.port, timeout=0)) == 3  # locator, both roles

    await close_cancelled_then_closed(client)  # the close's flush waits in the producer
    assert await wait_connections_to(broker.port) == []
    assert all(isinstance(fut.exception(), ClosedError) for fut in futures)
    with pytest.raises(ClosedError):
        await producer.send(b"late")
    with pytest.raises(ClosedError):
        client.producer(stream)


@needs_proc
async def test_a_cancelled_producer_close_aborts_the_producer(
    broker: RabbitMQDouble, client: rmq.Client, stream: str
) -> None:
    broker.hold_confirms = True
    producer = await client.producer(stream)
    future = await producer.send(b"never confirmed")
    await broker.until(lambda: broker.held)
    closing = asyncio.create_task(producer.close())
    await asyncio.sleep(0)
    await cancel(closing)
    assert isinstance(future.exception(), ClosedError)
    # the publisher is deleted without waiting for the answer, so its id can be reused
    await broker.until(lambda: broker.frames(f.DeletePublisherRequest))
    async with client.producer(stream) as again:
        broker.hold_confirms = False
        assert (await again.send_and_wait(b"next", timeout=5)).publishing_id == 1


async def test_a_cancellation_while_the_connection_stops_its_tasks_reaches_the_caller(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    conn = await client._locator_connection()
    closing = asyncio.create_task(conn.close())
    # answered: close() now waits for its tasks to end
    await wait_until(lambda: conn.error is not None, 5, "Close answered", step=0)
    await cancel(closing)
    assert isinstance(conn.error, ClosedError)


async def test_the_client_forgets_closed_producers_and_consumers(
    client: rmq.Client, stream: str
) -> None:
    producer = await client.producer(stream)
    await producer.send_and_wait(b"x", timeout=5)
    consumer = await client.consumer(stream)
    superstream = client.super_stream_consumer("none")
    refs: list[weakref.ref[object]] = [
        weakref.ref(producer),
        weakref.ref(consumer),
        weakref.ref(superstream),
    ]
    await producer.close()
    await consumer.close()
    await superstream.close()
    del producer, consumer, superstream
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


class _BrokenListener:
    def connection_lost(self, exc: StreamwireError) -> None:
        raise RuntimeError("listener bug")

    def metadata_changed(self, stream: str, code: int) -> None:
        pass

    def confirmed(self, publishing_ids: tuple[int, ...]) -> None:
        pass

    def errored(self, errors: tuple[tuple[int, int], ...]) -> None:
        pass


async def test_a_listener_s_bug_does_not_stop_the_end_of_a_connection(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    conn = await client._locator_connection()
    conn.add_publisher(conn.free_publisher_id(), _BrokenListener())
    broker.sessions[0].hang_up()
    async with asyncio.timeout(5):
        await conn._closed.wait()
    assert client._locator is None  # the client heard too, after the broken listener
    await client.create_stream("s")  # and dials a new connection
