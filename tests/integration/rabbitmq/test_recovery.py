"""Connection loss through a fault-injecting proxy: producers re-declare and re-send (dedup
keeps it exactly-once), consumers resubscribe after the last message handed out, a silent
connection is detected by heartbeats, and a dead broker surfaces as a typed error."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

import streamwire.rabbitmq as rmq
from streamwire.errors import ConnectionClosed, StreamwireError
from tests.brokers import BrokerInfo
from tests.proxy import FaultProxy

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq]


@pytest.fixture
async def proxy(broker: BrokerInfo) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(broker.host, broker.port) as p:
        yield p


def via(proxy: FaultProxy) -> rmq.AddressResolver:
    """Every advertised node is reached through the proxy."""
    return lambda host, port: proxy.address


async def proxied_client(broker: BrokerInfo, proxy: FaultProxy, **kwargs: object) -> rmq.Client:
    return await rmq.connect(
        f"rabbitmq-stream://guest:guest@127.0.0.1:{proxy.port}/",
        address_resolver=via(proxy),
        timeout=10,
        **kwargs,  # type: ignore[arg-type]
    )


async def read_all(client: rmq.Client, stream: str, expect: int) -> list[bytes]:
    out: list[bytes] = []
    async with client.consumer(stream) as c:
        while len(out) < expect:
            batch = await c.next_batch(1000, timeout=5)
            if not batch:
                break
            out += [m.value for m in batch]
        out += [m.value for m in await c.next_batch(1000, timeout=0.5)]
    return out


async def test_producer_recovers_and_dedup_prevents_duplicates(
    client: rmq.Client, stream: str, broker: BrokerInfo, proxy: FaultProxy
) -> None:
    pc = await proxied_client(broker, proxy, reconnect=rmq.ReconnectPolicy(initial_delay=0.05))
    try:
        async with pc.producer(stream, name=f"p-{uuid.uuid4().hex[:6]}") as producer:
            futures = []
            for i in range(3000):
                futures.append(await producer.send(f"m{i}".encode()))
                if i == 1500:
                    await asyncio.sleep(0)  # let some frames go out
                    assert proxy.cut() >= 1
            await producer.flush(timeout=30)
        assert all(f.result().publishing_id == i + 1 for i, f in enumerate(futures))
    finally:
        await pc.close()
    values = await read_all(client, stream, 3000)
    assert values == [f"m{i}".encode() for i in range(3000)]  # all there, none twice
    assert proxy.connections_made >= 2


async def test_consumer_resumes_after_the_last_message(
    client: rmq.Client, stream: str, broker: BrokerInfo, proxy: FaultProxy
) -> None:
    async with client.producer(stream) as p:
        await p.send_batch([f"m{i}".encode() for i in range(2000)])
        await p.flush()
    pc = await proxied_client(broker, proxy, reconnect=rmq.ReconnectPolicy(initial_delay=0.05))
    try:
        async with pc.consumer(stream, initial_credit=1) as c:
            got = [m.value for m in await c.next_batch(10, timeout=5)]
            proxy.cut()
            while len(got) < 2000:
                batch = await c.next_batch(500, timeout=10)
                assert batch, f"stalled after {len(got)} messages"
                got += [m.value for m in batch]
    finally:
        await pc.close()
    assert got == [f"m{i}".encode() for i in range(2000)]


async def test_black_holed_connection_is_detected_by_heartbeats(
    stream: str, broker: BrokerInfo, proxy: FaultProxy
) -> None:
    pc = await proxied_client(
        broker, proxy, reconnect=None, settings=rmq.ConnectionSettings(heartbeat=1)
    )
    try:
        consumer = await pc.consumer(stream)
        proxy.blackhole(True)

        async def drain_until_failure() -> None:
            async with asyncio.timeout(10):
                while True:
                    await consumer.next_batch(10, timeout=0.5)

        # no data and no heartbeat: the client gives up after two intervals
        with pytest.raises(ConnectionClosed, match="heartbeat"):
            await drain_until_failure()
    finally:
        proxy.blackhole(False)
        await pc.close()


async def test_without_reconnect_pending_confirms_fail_with_a_typed_error(
    stream: str, broker: BrokerInfo, proxy: FaultProxy
) -> None:
    pc = await proxied_client(broker, proxy, reconnect=None)
    try:
        producer = await pc.producer(stream)
        proxy.blackhole(True)
        future = await producer.send(b"lost?")
        proxy.cut()
        with pytest.raises(StreamwireError):
            await asyncio.wait_for(future, 10)
        with pytest.raises(StreamwireError):
            await producer.send(b"after")
    finally:
        proxy.blackhole(False)
        await pc.close()


async def test_recovery_gives_up_when_the_broker_stays_away(
    stream: str, broker: BrokerInfo, proxy: FaultProxy
) -> None:
    policy = rmq.ReconnectPolicy(initial_delay=0.05, max_delay=0.1, max_elapsed=1.0)
    pc = await proxied_client(broker, proxy, reconnect=policy)
    try:
        producer = await pc.producer(stream)
        proxy.refuse(True)
        proxy.cut()
        future = await producer.send(b"never")
        with pytest.raises(ConnectionClosed, match="gave up"):
            await asyncio.wait_for(future, 10)
    finally:
        await pc.close()


async def test_a_slow_consumer_holds_at_most_initial_credit_chunks(
    client: rmq.Client, stream: str
) -> None:
    async with client.producer(stream) as producer:
        for _ in range(20):  # 20 separate chunks
            await producer.send_batch([b"x" * 1000] * 50)
            await producer.flush()
    async with client.consumer(stream, initial_credit=3) as consumer:
        await asyncio.sleep(1.0)  # the application is busy: nothing is taken
        assert len(consumer._chunks) <= 3  # credits bound the local queue, not the broker
        got = 0
        while got < 1000:
            batch = await consumer.next_batch(1000, timeout=5)
            assert batch
            got += len(batch)
            assert len(consumer._chunks) <= 3
    assert got == 1000
