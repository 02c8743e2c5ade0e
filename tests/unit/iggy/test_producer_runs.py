"""The Iggy producer's runs: a ``send_batch``/``send_many`` of plain bodies is routed,
buffered, batched and confirmed a run at a time (slices, ``map``/``zip``, no Python step
per message); each step must do exactly what the message-by-message path does."""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import AsyncIterator
from itertools import repeat
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamwire.iggy as iggy
from streamwire import Message
from streamwire.codec.message import Confirmation
from streamwire.errors import ClosedError, StreamwireError
from streamwire.iggy.options import ProducerOptions
from streamwire.iggy.producer import Producer, _Run
from streamwire.transport.pending import Ledger
from tests.iggy_double import IggyDouble


class _Unconnected:
    """What a producer reads of its client before it starts: the address, for its meter."""

    host, port = "127.0.0.1", 8090


def _producer(partitions: int, **options: int) -> Producer:
    client: Any = _Unconnected()  # routing and batching never reach the client
    producer = Producer(client, "s/t", options=ProducerOptions(**options))  # type: ignore[arg-type]
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
            expanded = [route for route, k in runs._balanced_run(n) for _ in range(k)]
            assert expanded == [singles._balanced() for _ in range(n)]
            assert (runs._cursor, runs._sticky) == (singles._cursor, singles._sticky)

    asyncio.run(check())


def _take_one_by_one(
    entries: deque[tuple[int, int, int]], max_messages: int, max_bytes: int
) -> list[tuple[int, int, int]]:
    """The reference: take entries ``(route, size, id)`` one at a time, as the producer did
    before it kept runs."""
    route = entries[0][0]
    taken: list[tuple[int, int, int]] = []
    rest: deque[tuple[int, int, int]] = deque()
    size = 0
    while entries:
        entry = entries.popleft()
        if entry[0] == route:
            if len(taken) < max_messages and (not taken or size + entry[1] <= max_bytes):
                taken.append(entry)
                size += entry[1]
                continue
            rest.append(entry)
            break
        rest.append(entry)
    rest.extend(entries)
    entries.clear()
    entries.extend(rest)
    return taken


@settings(max_examples=100, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.integers(0, 2), st.lists(st.integers(49, 400), min_size=1, max_size=9)),
        min_size=1,
        max_size=8,
    ),
    max_messages=st.integers(1, 12),
    max_bytes=st.integers(1, 2000),
)
def test_taking_a_batch_a_run_at_a_time_is_what_taking_it_message_by_message_gives(
    runs: list[tuple[int, list[int]]], max_messages: int, max_bytes: int
) -> None:
    async def check() -> None:
        producer = _producer(3, max_batch_messages=max_messages, max_batch_bytes=max_bytes)
        reference: deque[tuple[int, int, int]] = deque()
        ids_of: dict[int, list[int]] = {}  # a ledger's ids, by id(ledger)
        next_id = 1
        for route, sizes in runs:
            ids = list(range(next_id, next_id + len(sizes)))
            next_id += len(sizes)
            bodies = [b"x" * (size - 48) for size in sizes]
            ledger = Ledger(asyncio.get_running_loop(), len(sizes), "s/t", offsets=True)
            ids_of[id(ledger)] = list(ids)
            raw = b"".join(i.to_bytes(16, "little") for i in ids)  # as the producer keeps them
            producer._queue(_Run(route, bodies, raw, 0, ledger, 0, None, list(sizes)))
            reference.extend(zip(repeat(route), sizes, ids, strict=False))
        while producer._buffer:
            expected = _take_one_by_one(reference, max_messages, max_bytes)
            taken, route = producer._take_batch()
            got = [
                (route, len(frame.payload) + 48, frame.id)
                for run in taken
                for frame in run.frames()
            ]
            assert got == expected
            for run in taken:  # each piece answers for its own messages of its ledger
                assert run.ledger is not None
                ledger_ids = ids_of[id(run.ledger)][run.at : run.at + len(run)]
                assert [frame.id for frame in run.frames()] == ledger_ids
            assert producer._buffered == len(reference)
            assert producer._buffer_bytes == sum(size for _, size, _ in reference)
        assert not reference

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


async def test_send_many_resolves_once_with_the_offsets_of_every_run(
    double: IggyDouble,
) -> None:
    async with await iggy.connect(double.url, timeout=5, reconnect=None) as client:
        await client.create_stream("s/t", partitions=2)
        async with client.producer("s/t", max_batch_messages=300) as producer:
            first = await producer.send_many([b"b%d" % i for i in range(1_000)])
            mixed = await producer.send_many([b"plain", Message(b"keyed", key=b"k")])
            empty = await producer.send_many([])
            await producer.flush(timeout=10)
        done = first.result()
        assert done.messages == 1_000
        assert done.stream == "s/t"
        spans = [(lo, hi) for _, lo, hi in done.ranges if lo is not None and hi is not None]
        assert sum(hi - lo + 1 for lo, hi in spans) == 1_000
        assert [p for p, _, _ in done.ranges] == [0, 1, 0, 1]  # 300 per partition in turn
        assert mixed.result().messages == 2
        assert empty.result() == iggy.BatchConfirmation(0, "s/t", ())


async def test_send_many_fails_with_the_error_of_a_failed_batch(double: IggyDouble) -> None:
    async with await iggy.connect(double.url, timeout=5, reconnect=None) as client:
        await client.create_stream("s/t", partitions=1)
        producer = await client.producer("s/t")
        future = await producer.send_many([b"a", b"b"])
        await client.delete_stream("s", missing_ok=True)
        late = await producer.send_many([b"c"])
        await producer.close(flush=False)
        assert isinstance(late.exception(), StreamwireError)
        assert future.done()


async def test_send_batch_futures_gathered_awaited_late_or_called_back(
    double: IggyDouble,
) -> None:
    """The futures are made on use (``transport.pending``): gathered while the batches are
    on their way, awaited once everything is confirmed, or called back — each gets its own
    message's offset, once."""
    async with await iggy.connect(double.url, timeout=5, reconnect=None) as client:
        await client.create_stream("s/t", partitions=1)
        async with client.producer("s/t", max_batch_messages=7) as producer:
            futures = await producer.send_batch([b"m%d" % i for i in range(30)])
            gathered = asyncio.gather(*futures[:10])
            called: list[asyncio.Future[Confirmation]] = []
            futures[12].add_done_callback(called.append)
            async with asyncio.timeout(10):
                first = await gathered
            await producer.flush(timeout=10)
            await asyncio.sleep(0)
        assert [c.offset for c in first] == list(range(10))
        assert [(await f).offset for f in futures] == list(range(30))
        assert called == [futures[12]]
        assert {f.result().partition for f in futures} == {0}


async def test_closing_fails_buffered_send_batch_futures_used_or_not(double: IggyDouble) -> None:
    async with await iggy.connect(double.url, timeout=5, reconnect=None) as client:
        await client.create_stream("s/t", partitions=1)
        producer = await client.producer("s/t")
        futures = await producer.send_batch([b"a", b"b", b"c"])
        waiting = asyncio.ensure_future(futures[0])
        await producer.close(flush=False)
        async with asyncio.timeout(5):
            outcomes = await asyncio.gather(waiting, *futures[1:], return_exceptions=True)
        assert all(isinstance(o, ClosedError) for o in outcomes), outcomes


async def test_key_routing_is_what_an_unpinned_send_does_and_needs_a_started_producer() -> None:
    import streamwire

    producer = _producer(3)
    assert isinstance(producer, streamwire.KeyRouted)
    assert producer.partition_count == 3
    for key in (b"a", b"b", b"order-17", bytes(range(40))):
        route, _ = producer._prepare(Message(b"v", key=key), None, None, None)
        assert producer.partition_for_key(key) == route
    pinned = _producer(3, partition=2)
    route, _ = pinned._prepare(Message(b"v", key=b"a"), None, None, None)
    assert route == 2  # the pin wins over the key
    with pytest.raises(ClosedError, match="not started"):
        _producer(0).partition_for_key(b"a")
