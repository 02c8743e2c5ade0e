"""RabbitMQ Streams throughput, one function per client and direction.

Every publisher sends ``count`` AMQP messages with ``size``-byte bodies and returns once all
are confirmed; every consumer reads ``count`` messages from the first offset and **reads the
body of every message** (streamwire's ``value``, rstream's ``body``, Java's
``getBodyAsBinary``; rbfly's iterator yields the body itself), so that every client does the
same work per message. Every client runs with its documented defaults (no credit, batch or
buffer tuning) in its idiomatic loop:

* streamwire: ``send_many`` (one future per call); also ``send_batch`` (a future per
  message) as "streamwire futures"; ``next_batch``; and ``async for`` over the consumer
  as "streamwire async for" (consume only).
* rbfly: ``PublisherBatchFast`` with 1 000 messages per ``flush`` (its fastest mode in our
  notes); ``subscribe`` as an async iterator (AMQP decoded by its Cython codec).
* rstream: ``send_batch`` of 100 ``AMQPMessage`` with a confirm callback; ``subscribe``
  with ``amqp_decoder``.
* java: the reference Java stream client (``bench/java_rabbitmq.py``), ``send`` with a
  confirm callback and its default batching; a message handler reading each body; timed in
  the JVM after a warm-up.

Peers are only called (rbfly is GPL).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import streamwire.rabbitmq as rmq
from bench import raw_rabbitmq
from bench._common import read_batches, read_each
from bench.java_rabbitmq import java_consume, java_publish

TIMEOUT = 120.0


async def streamwire_publish(url: str, stream: str, count: int, size: int) -> float:
    """``send_many``: one confirmation future per 10 000 messages."""
    async with await rmq.connect(url) as client, client.producer(stream) as producer:
        body = b"x" * size
        started = time.perf_counter()
        futures = [
            await producer.send_many([body] * min(10_000, count - start))
            for start in range(0, count, 10_000)
        ]
        await asyncio.gather(*futures)
        return count / (time.perf_counter() - started)


async def streamwire_futures_publish(url: str, stream: str, count: int, size: int) -> float:
    """``send_batch``: a confirmation future per message."""
    async with await rmq.connect(url) as client, client.producer(stream) as producer:
        body = b"x" * size
        started = time.perf_counter()
        for start in range(0, count, 10_000):
            await producer.send_batch([body] * min(10_000, count - start))
        await producer.flush(timeout=TIMEOUT)
        return count / (time.perf_counter() - started)


async def streamwire_consume(url: str, stream: str, count: int) -> float:
    async with await rmq.connect(url) as client:
        started = time.perf_counter()
        async with client.consumer(stream, offset="first") as consumer:
            seen = await read_batches(consumer, count, 10_000)
        return seen / (time.perf_counter() - started)


async def streamwire_iter_consume(url: str, stream: str, count: int) -> float:
    """The idiomatic consumer: ``async for message in consumer``."""
    async with await rmq.connect(url) as client:
        started = time.perf_counter()
        async with client.consumer(stream, offset="first") as consumer:
            async with asyncio.timeout(TIMEOUT):
                seen = await read_each(consumer, count)
        return seen / (time.perf_counter() - started)


async def rbfly_publish(url: str, stream: str, count: int, size: int) -> float:
    from rbfly.streams import PublisherBatchFast, streams_client

    client: Any = streams_client(url)
    try:
        async with client.publisher(stream, cls=PublisherBatchFast) as publisher:
            body = b"x" * size
            started = time.perf_counter()
            for start in range(0, count, 1000):
                for _ in range(min(1000, count - start)):
                    publisher.batch(body)
                await publisher.flush()
            return count / (time.perf_counter() - started)
    finally:
        await client.disconnect()


async def rbfly_consume(url: str, stream: str, count: int) -> float:
    from rbfly.streams import Offset, streams_client

    client: Any = streams_client(url)
    offset: Any = Offset
    try:
        started = time.perf_counter()
        seen = 0
        async with contextlib.aclosing(client.subscribe(stream, offset=offset.FIRST)) as messages:
            async for _body in messages:
                seen += 1
                if seen == count:
                    break
        return seen / (time.perf_counter() - started)
    finally:
        await client.disconnect()


def _host_port(url: str) -> tuple[str, int]:
    from streamwire import parse_url

    parsed = parse_url(url)
    return parsed.host, parsed.port


async def rstream_publish(url: str, stream: str, count: int, size: int) -> float:
    import rstream

    host, port = _host_port(url)
    done = asyncio.Event()
    confirmed = 0

    async def on_confirm(status: Any) -> None:
        nonlocal confirmed
        confirmed += 1
        if confirmed >= count:
            done.set()

    async with rstream.Producer(host, port, username="guest", password="guest") as producer:
        body = b"x" * size
        started = time.perf_counter()
        for start in range(0, count, 100):
            batch = [rstream.AMQPMessage(body=body) for _ in range(min(100, count - start))]
            await producer.send_batch(stream, batch, on_publish_confirm=on_confirm)
        async with asyncio.timeout(TIMEOUT):
            await done.wait()
        return count / (time.perf_counter() - started)


async def rstream_consume(url: str, stream: str, count: int) -> float:
    import rstream

    host, port = _host_port(url)
    done = asyncio.Event()
    seen = 0

    async def on_message(message: Any, context: Any) -> None:
        nonlocal seen
        _ = message.body
        seen += 1
        if seen >= count:
            done.set()

    consumer = rstream.Consumer(host, port, username="guest", password="guest")
    async with consumer:
        started = time.perf_counter()
        await consumer.subscribe(
            stream,
            on_message,
            decoder=rstream.amqp_decoder,
            offset_specification=rstream.ConsumerOffsetSpecification(
                rstream.OffsetType.FIRST, None
            ),
        )
        async with asyncio.timeout(TIMEOUT):
            await done.wait()
        return seen / (time.perf_counter() - started)


async def raw_publish(url: str, stream: str, count: int, size: int) -> float:
    return await raw_rabbitmq.publish(*_host_port(url), stream, count, size)


async def raw_consume(url: str, stream: str, count: int) -> float:
    return await raw_rabbitmq.consume(*_host_port(url), stream, count)


# clients that run in this process: their CPU time per message is measured too (java runs
# in a JVM of its own)
IN_PROCESS = frozenset(
    {"streamwire", "streamwire futures", "streamwire async for", "rbfly", "rstream", "raw ceiling"}
)

PUBLISHERS = {
    "streamwire": streamwire_publish,
    "streamwire futures": streamwire_futures_publish,
    "rbfly": rbfly_publish,
    "rstream": rstream_publish,
    "java": java_publish,
    "raw ceiling": raw_publish,
}
CONSUMERS = {
    "streamwire": streamwire_consume,
    "streamwire futures": streamwire_consume,  # the same consumer: a second sample
    "streamwire async for": streamwire_iter_consume,
    "rbfly": rbfly_consume,
    "rstream": rstream_consume,
    "java": java_consume,
    "raw ceiling": raw_consume,
}
