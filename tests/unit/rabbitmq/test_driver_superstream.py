"""Super streams against the scripted broker (no server): creation, partitions lookup,
routing by hash and by binding key, and consuming every partition."""

from __future__ import annotations

import asyncio

import pytest

import streamwire.rabbitmq as rmq
from streamwire.rabbitmq.protocol import frames as f
from streamwire.rabbitmq.protocol.errors import StreamDoesNotExist
from tests.rabbitmq_double import RabbitMQDouble
from tests.unit.rabbitmq.driver_support import stored_values

KEYS = [b"alice", b"bob", b"carol", b"dave", b"erin", b"frank"]


async def test_create_partitions_and_delete(broker: RabbitMQDouble, client: rmq.Client) -> None:
    await client.create_stream("inv", partitions=3)
    (create,) = broker.frames(f.CreateSuperStreamRequest)
    assert create.partitions == ("inv-0", "inv-1", "inv-2")
    assert create.binding_keys == ("0", "1", "2")
    assert await client.partitions("inv") == ["inv-0", "inv-1", "inv-2"]
    assert await client.route("1", "inv") == ["inv-1"]
    assert await client.route("9", "inv") == []
    await client.delete_stream("inv", super_stream=True)
    assert broker.state.streams == {}
    with pytest.raises(StreamDoesNotExist):
        await client.partitions("inv")


async def test_hash_routing_sends_each_key_to_its_partition(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    await client.create_stream("inv", partitions=3)
    async with client.super_stream_producer("inv") as producer:
        for key in KEYS:
            await producer.send_and_wait(b"v-" + key, key=key, timeout=5)
    for i in range(3):
        expected = [b"v-" + k for k in KEYS if rmq.hash_partition(k, 3) == i]
        assert stored_values(broker, f"inv-{i}") == expected
    assert sum(len(stored_values(broker, f"inv-{i}")) for i in range(3)) == len(KEYS)
    assert len({rmq.hash_partition(k, 3) for k in KEYS}) > 1  # the keys do spread


async def test_key_routing_asks_the_broker_once_per_key(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    broker.state.create_super_stream("geo", ["geo-eu", "geo-us"], ["eu", "us"])
    async with client.super_stream_producer("geo", routing="key") as producer:
        await producer.send_and_wait(b"1", key=b"eu", timeout=5)
        await producer.send_and_wait(b"2", key=b"us", timeout=5)
        await producer.send_and_wait(b"3", key=b"eu", timeout=5)
        with pytest.raises(rmq.NoRouteError):
            await producer.send(b"4", key=b"asia")
    assert stored_values(broker, "geo-eu") == [b"1", b"3"]
    assert stored_values(broker, "geo-us") == [b"2"]
    routes = broker.frames(f.RouteRequest)
    assert [(r.routing_key, r.super_stream) for r in routes] == [
        ("eu", "geo"),
        ("us", "geo"),
        ("asia", "geo"),
    ]


async def test_super_stream_consumer_reads_every_partition(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    await client.create_stream("inv", partitions=3)
    async with client.super_stream_producer("inv") as producer:
        for key in KEYS:
            await producer.send(key, key=key)
        await producer.flush(timeout=5)
    seen: dict[bytes, tuple[int | None, str | None]] = {}
    async with client.super_stream_consumer("inv") as consumer:
        async with asyncio.timeout(5):
            while len(seen) < len(KEYS):
                for m in await consumer.next_batch(10, timeout=5):
                    seen[bytes(m.value)] = (m.partition, m.stream)
    assert seen == {k: (rmq.hash_partition(k, 3), f"inv-{rmq.hash_partition(k, 3)}") for k in KEYS}
    assert len(broker.frames(f.SubscribeRequest)) == 3
