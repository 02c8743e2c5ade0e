"""``stats`` of the Iggy client, producers and consumers on the conformance double: calls
counted once, send batches settled by their replies, failures by close, lag from poll
replies, and connections made again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import streamwire.iggy as iggy
from streamwire import Message
from streamwire.errors import ClosedError
from tests.iggy_double import IggyDouble
from tests.proxy import wait_until

FAST = iggy.ReconnectPolicy(initial_delay=0.01, max_delay=0.05, max_elapsed=5.0)


@pytest.fixture
async def double() -> AsyncIterator[IggyDouble]:
    async with IggyDouble() as server:
        yield server


@pytest.fixture
async def client(double: IggyDouble) -> AsyncIterator[iggy.Client]:
    c = await iggy.connect(double.url, timeout=5, reconnect=FAST)
    try:
        yield c
    finally:
        async with asyncio.timeout(10):
            await c.close()


async def test_calls_are_counted_and_batches_settled_by_their_replies(
    client: iggy.Client,
) -> None:
    await client.create_stream("s/t", partitions=2)
    async with client.producer("s/t", max_batch_messages=4) as producer:
        await producer.send_and_wait(b"one")
        await producer.send_batch([b"x" * 10] * 9)  # three requests of at most 4
        await producer.send_batch([Message(b"k", key=b"key"), Message(b"h", headers={"a": 1})])
        await producer.flush(timeout=5)
        stats = producer.stats
    assert (stats.published, stats.confirmed, stats.failed, stats.in_flight) == (12, 12, 0, 0)
    assert stats.stream == "s/t"
    assert stats.bytes_published >= len(b"one") + 90 + 2
    assert stats.confirm_latency.count == 12


async def test_messages_failed_by_abort_count_as_failed(
    double: IggyDouble, client: iggy.Client
) -> None:
    await client.create_stream("s/t", partitions=1)
    producer = await client.producer("s/t")
    double.silence(1)  # the batch goes unanswered
    futures = await producer.send_batch([b"a", b"b", b"c"])
    await wait_until(lambda: bool(double.dropped), 5, "the batch reached the server")
    assert (producer.stats.published, producer.stats.in_flight) == (3, 3)
    producer.abort()
    assert all(isinstance(fut.exception(), ClosedError) for fut in futures)
    # the batch's reply fails with the aborted connection, and settles the batch
    await wait_until(lambda: producer.stats.in_flight == 0, 5, "the batch settled")
    stats = producer.stats
    assert (stats.confirmed, stats.failed, stats.in_flight) == (0, 3, 0)
    assert stats.confirm_latency.count == 0


async def test_consumer_lag_sums_the_partitions_polled(client: iggy.Client) -> None:
    await client.create_stream("s/t", partitions=2)
    for partition, count in ((0, 10), (1, 6)):
        async with client.producer("s/t", partition=partition) as producer:
            await producer.send_batch([b"m%d" % i for i in range(count)])
            await producer.flush(timeout=5)
    async with client.consumer("s/t", name="app", batch_size=4, prefetch=False) as consumer:
        assert consumer.stats.lag is None
        first = await consumer.next_batch(4, timeout=5)  # one poll of 4: offsets 0..3 of one
        stats = consumer.stats
        assert (stats.consumed, stats.last_offset) == (4, 3)
        assert stats.lag == (10 if first[0].partition == 0 else 6) - 4
        assert stats.bytes_consumed > sum(len(m.value) for m in first)
        await consumer.commit()
        assert consumer.stats.committed_offset == 3
        got = first
        while len(got) < 16:
            got += await consumer.next_batch(100, timeout=5)
        stats = consumer.stats
    assert (stats.consumed, stats.lag) == (16, 0)


async def test_a_connection_made_again_is_a_reconnect(
    double: IggyDouble, client: iggy.Client
) -> None:
    await client.create_stream("s/t", partitions=1)
    async with client.producer("s/t") as producer:
        await producer.send_and_wait(b"a")
        before = client.stats
        assert (before.connects, before.reconnects, before.errors) == (2, 0, 0)
        await double.stop()
        await double.start_again()
        await wait_until(lambda: client.stats.errors >= 2, 5, "both connections lost")
        await producer.send_and_wait(b"b")  # over a new connection
    after = client.stats
    assert (after.connects, after.reconnects, after.errors) == (3, 1, 2)
