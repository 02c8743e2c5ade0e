"""Pipelining against the conformance double: a producer keeps up to ``max_in_flight``
batches in flight and the messages of each partition are still stored in send order; a
consumer polls ahead, uses what it polled ahead only while it fits its positions, and never
skips or repeats a message (tail, new messages, a corrupted message)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest

import streamwire.iggy as iggy
from streamwire import Message
from streamwire.errors import ChecksumMismatchError
from streamwire.iggy.consumer import MAX_POLL, Consumer, poll_count
from streamwire.iggy.protocol.constants import Command
from streamwire.iggy.protocol.messaging import PollMessages
from tests.iggy_double import IggyDouble
from tests.iggy_lanes import Lane
from tests.proxy import FaultProxy

ADDRESS = "pipe/t"
SLACK = 10.0


@pytest.fixture
async def slow(server: Lane) -> AsyncIterator[FaultProxy]:
    """The server behind 20 ms of latency each way, so that requests pile up."""
    async with FaultProxy(server.host, server.port) as p:
        p.latency = 0.02
        yield p


async def connect(port: int, max_in_flight: int) -> iggy.Client:
    return await iggy.connect(
        f"iggy://iggy:iggy@127.0.0.1:{port}",
        timeout=SLACK,
        request_timeout=SLACK,
        reconnect=None,
        max_in_flight=max_in_flight,
    )


@pytest.mark.parametrize("max_in_flight", [1, 3])
async def test_producer_batches_in_flight_and_send_order(
    client: iggy.Client, slow: FaultProxy, max_in_flight: int, server: Lane
) -> None:
    await client.create_stream(ADDRESS, partitions=2)
    sent = [(b"m%03d" % i, None if i % 3 else b"k%d" % (i % 2)) for i in range(300)]
    seen: list[int] = []
    pc = await connect(slow.port, max_in_flight)
    try:
        async with pc.producer(ADDRESS, max_batch_messages=10) as producer:

            async def watch() -> None:
                while True:
                    seen.append(len(producer._inflight))
                    await asyncio.sleep(0.001)

            watcher = asyncio.create_task(watch())
            futures = [await producer.send(v, key=k) for v, k in sent]
            await producer.flush(timeout=SLACK)
            watcher.cancel()
    finally:
        await pc.close()
    assert max(seen) == max_in_flight  # the pipeline filled up, and never beyond its size
    if server.name == "double-server-habits":
        assert client.reply_stats.foreign_operation >= 1  # CreateTopic answered as 64
        assert pc.reply_stats.foreign_client > 0
        if max_in_flight > 1:  # replies to sends that arrived together came back reversed
            assert pc.reply_stats.out_of_order > 0
    elif server.name == "double":
        assert (client.reply_stats.foreign_operation, pc.reply_stats.out_of_order) == (0, 0)
    where = [f.result().partition for f in futures]
    for partition in (0, 1):
        want = [v for (v, _), p in zip(sent, where, strict=True) if p == partition]
        async with client.consumer(ADDRESS, offset="first", partition=partition) as consumer:
            got = [m.value for m in await drain(consumer, len(want))]
        assert got == want


def count_ahead_used(consumer: Consumer) -> list[int]:
    """Count the polls answered by a reply that was polled ahead."""
    used = [0]
    take = consumer._take_ahead

    def spy(*args: object) -> object:
        reply = take(*args)  # type: ignore[arg-type]
        used[0] += reply is not None
        return reply

    consumer._take_ahead = spy  # type: ignore[assignment,method-assign]
    return used


async def drain(consumer: Consumer, want: int) -> list[Message]:
    """Read ``want`` messages, ``batch_size`` per call (so each poll asks ``batch_size``)."""
    got: list[Message] = []
    size = consumer.options.batch_size
    while len(got) < want:
        batch = await consumer.next_batch(size, timeout=1)
        assert batch, f"stalled after {len(got)} of {want}"
        got += batch
    assert not await consumer.next_batch(size, timeout=0.2)  # nothing more
    return got


async def test_consumer_polls_ahead_over_partitions_without_gaps(
    client: iggy.Client, server: Lane
) -> None:
    await client.create_stream(ADDRESS, partitions=3)
    values = [b"v%04d" % i for i in range(900)]
    async with client.producer(ADDRESS) as producer:
        futures = [await producer.send(v, key=b"%d" % (i % 7)) for i, v in enumerate(values)]
        await producer.flush()
    placed = {f.result().partition: 0 for f in futures}
    async with client.consumer(ADDRESS, offset="first", batch_size=50) as consumer:
        used = count_ahead_used(consumer)
        got = await drain(consumer, len(values))
    assert used[0] > 0  # polls were answered from replies polled ahead
    # with a sharded server's habits the polls ahead (one number, told apart by their
    # stamps) were answered in reverse order, and each still reached its own poll
    if not server.is_real:
        assert (client.reply_stats.out_of_order > 0) == (server.name == "double-server-habits")
    for partition in placed:
        mine = [m for m in got if m.partition == partition]
        assert [m.offset for m in mine] == list(range(len(mine)))  # no gap, no repeat
        want = [
            v for v, f in zip(values, futures, strict=True) if f.result().partition == partition
        ]
        assert [m.value for m in mine] == want


async def test_polls_sent_ahead_past_the_tail_are_dropped(client: iggy.Client) -> None:
    await client.create_stream(ADDRESS)
    await client.send(ADDRESS, [b"a%d" % i for i in range(150)])
    async with client.consumer(ADDRESS, offset="first", batch_size=100) as consumer:
        used = count_ahead_used(consumer)
        first = await consumer.next_batch(100, timeout=1)  # full: polls 100.. and 200.. ahead
        assert [m.offset for m in first] == list(range(100))
        assert len(consumer._ahead) == 2
        second = await consumer.next_batch(100, timeout=1)  # the poll ahead from 100: 50
        assert [m.offset for m in second] == list(range(100, 150))
        assert used[0] == 1
        await client.send(ADDRESS, [b"b%d" % i for i in range(30)])
        third = await consumer.next_batch(100, timeout=1)
        # the poll from 200 no longer fits (the consumer is at 150): dropped, polled again
        assert [m.offset for m in third] == list(range(150, 180))
        assert [m.value for m in third] == [b"b%d" % i for i in range(30)]
        assert used[0] == 1
        assert not consumer._ahead


async def test_a_corrupted_message_is_never_skipped(
    client: iggy.Client, double: IggyDouble
) -> None:
    await client.create_stream(ADDRESS)
    for start in range(0, 300, 100):  # three stored records of 100
        await client.send(ADDRESS, [b"m%d" % i for i in range(start, start + 100)])
    partition = double.state.streams[0].topics[0].partitions[0]
    record = partition.records[1]
    record.messages[5] = dataclasses.replace(record.messages[5], payload=b"tampered")
    async with client.consumer(ADDRESS, offset="first", batch_size=100) as consumer:
        first = await consumer.next_batch(100, timeout=1)
        assert [m.offset for m in first] == list(range(100))
        for _ in range(2):  # the bad reply is refused each time: its messages stay unread
            with pytest.raises(ChecksumMismatchError):
                await consumer.next_batch(100, timeout=1)
        assert consumer._positions[0] == 100
    async with client.consumer(ADDRESS, offset="first", verify_checksums=False) as lax:
        got = await drain(lax, 300)
    assert [m.offset for m in got] == list(range(300))
    assert got[105].value == b"tampered"


async def test_no_prefetch_in_a_group_or_with_server_auto_commit(client: iggy.Client) -> None:
    await client.create_stream(ADDRESS)
    await client.send(ADDRESS, [b"x%d" % i for i in range(300)])
    async with client.consumer(ADDRESS, group="g", offset="first", batch_size=100) as grouped:
        assert len(await grouped.next_batch(100, timeout=1)) == 100
        assert not grouped._ahead
    async with client.consumer(
        ADDRESS, name="n", offset="first", batch_size=100, server_auto_commit=True
    ) as auto:
        assert len(await auto.next_batch(100, timeout=1)) == 100
        assert not auto._ahead
        assert await auto.committed_offset() == 99  # only what was handed out


def poll_counts(double: IggyDouble, since: int) -> list[int]:
    """The counts of the polls the double received after its first ``since`` requests."""
    polls = [r for r in double.requests[since:] if r.code == Command.POLL_MESSAGES]
    return [PollMessages.decode(r.body).count for r in polls]


async def test_next_batch_polls_what_it_asks_for(client: iggy.Client, double: IggyDouble) -> None:
    """``next_batch(n)`` polls ``n`` messages (at least ``batch_size``, at most MAX_POLL);
    ``async for`` and ``next()`` poll ``batch_size``; polls sent ahead ask the same."""
    await client.create_stream(ADDRESS)
    await client.send(ADDRESS, [b"p%d" % i for i in range(MAX_POLL + 3000)])
    async with client.consumer(ADDRESS, offset="first", prefetch=False, batch_size=100) as consumer:
        since = len(double.requests)
        assert [m.offset for m in await consumer.next_batch(1000, timeout=1)] == list(range(1000))
        assert poll_counts(double, since) == [1000]  # one round trip, not ten
        since = len(double.requests)
        assert len(await consumer.next_batch(10, timeout=1)) == 10
        assert poll_counts(double, since) == [100]  # at least batch_size: the rest is queued
        await consumer.next_batch(1000, timeout=1)  # what was queued (90): no poll
        since = len(double.requests)
        message = await consumer.next(timeout=1)
        assert message is not None
        assert message.offset == 1100
        assert poll_counts(double, since) == [100]
        await consumer.next_batch(99, timeout=1)  # the rest of that poll
        since = len(double.requests)
        big = await consumer.next_batch(10 * MAX_POLL, timeout=1)
        assert [m.offset for m in big] == list(range(1200, 1200 + MAX_POLL))
        assert poll_counts(double, since) == [MAX_POLL]
    async with client.consumer(ADDRESS, offset="first", batch_size=50) as ahead:
        since = len(double.requests)
        assert len(await ahead.next_batch(300, timeout=1)) == 300
        counts = poll_counts(double, since)
        assert counts[0] == 300
        assert set(counts) == {300}  # what was polled ahead asked the same
        assert ahead._ahead  # and is waiting
        assert poll_count(300, 50) == 300
        assert poll_count(7, 50) == 50
        assert poll_count(10**9, 50) == MAX_POLL
        assert poll_count(10**9, 2 * MAX_POLL) == 2 * MAX_POLL
