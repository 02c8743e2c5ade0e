"""The Iggy producer's bulk paths: a ``send_batch`` of plain bodies is routed, buffered,
batched and confirmed a run at a time (``map``/``zip``, no Python step per message); each
must do exactly what the message-by-message path does."""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamwire.iggy as iggy
from streamwire.iggy.options import ProducerOptions
from streamwire.iggy.producer import Producer, _Entry
from streamwire.iggy.protocol.batch import OutgoingMessage
from tests.iggy_double import IggyDouble


def _producer(partitions: int, **options: int) -> Producer:
    producer = Producer(None, "s/t", options=ProducerOptions(**options))  # type: ignore[arg-type]
    producer._partitions = partitions
    return producer


@settings(max_examples=60, deadline=None)
@given(
    partitions=st.integers(1, 5),
    per_batch=st.integers(1, 7),
    cursor=st.integers(0, 20),
    sticky=st.integers(0, 6),
    counts=st.lists(st.integers(0, 30), max_size=5),
)
def test_a_run_of_keyless_routes_is_what_one_route_at_a_time_gives(
    partitions: int, per_batch: int, cursor: int, sticky: int, counts: list[int]
) -> None:
    async def check() -> None:
        runs, singles = (_producer(partitions, max_batch_messages=per_batch) for _ in range(2))
        for p in (runs, singles):
            p._cursor, p._sticky = cursor, sticky % per_batch
        for n in counts:
            assert runs._balanced_run(n) == [singles._balanced() for _ in range(n)]
            assert (runs._cursor, runs._sticky) == (singles._cursor, singles._sticky)

    asyncio.run(check())


@settings(max_examples=80, deadline=None)
@given(
    routes=st.lists(st.integers(0, 2), min_size=1, max_size=40),
    sizes=st.lists(st.integers(49, 400), min_size=40, max_size=40),
    max_messages=st.integers(1, 12),
    max_bytes=st.integers(1, 2000),
)
def test_taking_a_batch_at_once_is_what_taking_it_entry_by_entry_gives(
    routes: list[int], sizes: list[int], max_messages: int, max_bytes: int
) -> None:
    async def check() -> None:
        loop = asyncio.get_running_loop()
        entries: list[_Entry] = [
            (route, OutgoingMessage(i + 1, b"x", 0, b""), loop.create_future(), size)
            for i, (route, size) in enumerate(zip(routes, sizes, strict=False))
        ]
        fast, slow = (
            _producer(3, max_batch_messages=max_messages, max_batch_bytes=max_bytes)
            for _ in range(2)
        )
        for p in (fast, slow):
            p._buffer = deque(entries)
            p._buffer_bytes = sum(e[3] for e in entries)
        while fast._buffer:
            route = slow._buffer[0][0]
            taken, size = slow._take_mixed(route)
            slow._buffer_bytes -= size
            assert fast._take_batch() == (taken, route)
            assert list(fast._buffer) == list(slow._buffer)
            assert fast._buffer_bytes == slow._buffer_bytes
        assert fast._buffer_bytes == 0

    asyncio.run(check())


@pytest.fixture
async def double() -> AsyncIterator[IggyDouble]:
    async with IggyDouble() as server:
        yield server


async def test_bodies_beyond_the_buffer_are_accepted_in_runs_and_confirmed_in_order(
    double: IggyDouble,
) -> None:
    async with await iggy.connect(double.url, timeout=5, reconnect=None) as client:
        await client.create_stream("s/t", partitions=3)
        bodies = [b"m%d" % i for i in range(2_500)]
        async with client.producer(
            "s/t", max_batch_messages=100, max_buffer_messages=250, max_buffer_bytes=2_000
        ) as producer:
            futures = await producer.send_batch(bodies)
            await producer.flush(timeout=10)
        sent: dict[int, list[bytes]] = {}
        for body, future in zip(bodies, futures, strict=True):
            c = future.result()
            assert c.partition is not None
            assert c.offset == len(sent.setdefault(c.partition, []))
            sent[c.partition].append(body)
        # keyless messages go round the partitions (the route moves once a batch is sent)
        assert sorted(sent) == [0, 1, 2]
        assert sum(map(len, sent.values())) == 2_500
        for partition, expected in sent.items():
            got: list[bytes] = []
            async with client.consumer("s/t", partition=partition, batch_size=500) as consumer:
                while len(got) < len(expected):
                    batch = await consumer.next_batch(500, timeout=5)
                    assert batch, f"partition {partition} stalled at {len(got)}"
                    got += [m.value for m in batch]
            assert got == expected


async def test_a_cancelled_confirmation_future_does_not_stop_the_others(
    double: IggyDouble,
) -> None:
    async with await iggy.connect(double.url, timeout=5, reconnect=None) as client:
        await client.create_stream("s/t", partitions=1)
        async with client.producer("s/t") as producer:
            futures = await producer.send_batch([b"a", b"b", b"c", b"d"])
            futures[random.Random(7).randrange(4)].cancel()
            await producer.flush(timeout=10)
        done = [f.result().offset or 0 for f in futures if not f.cancelled()]
        assert len(done) == 3
        assert done == sorted(done)
