"""More than 256 producers or consumers on one node: publisher and subscription ids are one
byte, so the client opens another connection to the node, as the Java and Go clients do."""

from __future__ import annotations

import asyncio

import streamwire.rabbitmq as rmq
from streamwire.rabbitmq.protocol import frames as f
from tests.rabbitmq_double import RabbitMQDouble


async def test_the_257th_producer_gets_a_second_connection(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    await client.create_stream("s")
    producers = [await client.producer("s") for _ in range(300)]
    try:
        connections = {id(p._conn) for p in producers}
        assert len(connections) == 2
        assert sorted({p._publisher_id for p in producers[:256]}) == list(range(256))
        assert [p._publisher_id for p in producers[256:]] == list(range(44))
        confirmations = await asyncio.gather(
            *[p.send_and_wait(f"from {i}".encode()) for i, p in enumerate(producers)]
        )
        assert len(confirmations) == 300
        assert len(broker.frames(f.DeclarePublisherRequest)) == 300
        await producers[3].close()  # a freed id is used again on the first connection
        again = await client.producer("s")
        producers[3] = again
        assert (id(again._conn), again._publisher_id) == (id(producers[0]._conn), 3)
    finally:
        for producer in producers:
            await producer.close()


async def test_the_257th_consumer_gets_a_second_connection(client: rmq.Client) -> None:
    await client.create_stream("s")
    async with client.producer("s") as producer:
        await producer.send_and_wait(b"one")
    consumers = [await client.consumer("s") for _ in range(260)]
    try:
        assert len({id(c._conn) for c in consumers}) == 2
        batches = await asyncio.gather(*[c.next_batch(1, timeout=10) for c in consumers])
        assert all([m.value for m in batch] == [b"one"] for batch in batches)
    finally:
        for consumer in consumers:
            await consumer.close()
