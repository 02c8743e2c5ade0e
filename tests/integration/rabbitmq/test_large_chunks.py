"""A chunk larger than the connection's ``max_inbound_frame_bytes`` (RabbitMQ writes chunks
of tens of megabytes when large messages or sub-batch entries are published fast): the
consumer whose chunk it is fails loudly, instead of reconnecting for ever while its reads
come back empty; a consumer of another stream on the same connection reads on."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import streamwire.rabbitmq as rmq
from streamwire.errors import FrameTooLargeError
from tests.brokers import BrokerInfo

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq]


async def test_a_chunk_past_the_inbound_bound_fails_its_consumer_loudly(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    other = f"sw-test-{uuid.uuid4().hex[:12]}"
    await client.create_stream(other)
    try:
        async with client.producer(stream) as producer:
            await producer.send_and_wait(b"small")
            await producer.send_and_wait(b"x" * 200_000)  # a chunk of its own, past 64 KiB
        async with client.producer(other) as producer:
            await producer.send_and_wait(b"fine")
        settings = rmq.ConnectionSettings(max_inbound_frame_bytes=64 * 1024)
        reader = await rmq.connect(broker.url, timeout=10, settings=settings)
        try:
            # the other first: the big chunk may close the connection as soon as the big
            # one is subscribed (RabbitMQ 4.0 and 3.10 deliver it before a subscription
            # asked for next could be answered)
            async with (
                reader.consumer(other) as fine,
                reader.consumer(stream) as big,
            ):
                first = await big.next_batch(10, timeout=5)
                assert [m.value for m in first] == [b"small"]
                failure: FrameTooLargeError | None = None
                for _ in range(10):  # it surfaces within a read or two, never as []
                    try:
                        got = await big.next_batch(10, timeout=5)
                    except FrameTooLargeError as exc:
                        failure = exc
                        break
                    assert got == [], got
                assert failure is not None, "reads came back empty, with no error"
                assert "max_inbound_frame_bytes" in str(failure)
                assert stream in str(failure)
                assert failure.limit == 64 * 1024
                assert failure.size > 200_000
                # the other subscription shared the connection: it resubscribes and reads
                got = await asyncio.wait_for(fine.next_batch(10, timeout=10), 30)
                assert [m.value for m in got] == [b"fine"]
        finally:
            await reader.close()
    finally:
        await client.delete_stream(other, missing_ok=True)
