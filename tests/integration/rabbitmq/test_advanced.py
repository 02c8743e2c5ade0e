"""Super streams, single active consumer, filtering and sub-batch compression against
RabbitMQ 4.x (these need 3.11–3.13+; the 3.10 broker's refusals are tested elsewhere)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence

import pytest

import streamwire.rabbitmq as rmq
from streamwire import Message
from tests.brokers import require

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq]


@pytest.fixture
async def client4() -> AsyncIterator[rmq.Client]:
    broker = require("rabbitmq")
    c = await rmq.connect(broker.url, timeout=10)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
async def super_stream(client4: rmq.Client) -> AsyncIterator[str]:
    name = f"sw-super-{uuid.uuid4().hex[:8]}"
    await client4.create_stream(name, partitions=3)
    try:
        yield name
    finally:
        await client4.delete_stream(name, super_stream=True, missing_ok=True)


@pytest.fixture
async def stream4(client4: rmq.Client) -> AsyncIterator[str]:
    name = f"sw-adv-{uuid.uuid4().hex[:8]}"
    await client4.create_stream(name)
    try:
        yield name
    finally:
        await client4.delete_stream(name, missing_ok=True)


def is_active(consumer: rmq.Consumer) -> bool:
    """Read afresh (the broker flips it between awaits)."""
    return consumer.active


async def take(consumer: rmq.Consumer | rmq.SuperStreamConsumer, n: int) -> list[Message]:
    got: list[Message] = []
    while len(got) < n:
        batch = await consumer.next_batch(n - len(got), timeout=10)
        assert batch, f"only {len(got)} of {n} messages arrived"
        got += batch
    return got


async def test_partitions_and_route(client4: rmq.Client, super_stream: str) -> None:
    partitions = await client4.partitions(super_stream)
    assert partitions == [f"{super_stream}-{i}" for i in range(3)]
    assert await client4.route("1", super_stream) == [f"{super_stream}-1"]
    assert await client4.route("no-such-key", super_stream) == []


async def test_a_custom_router_chooses_the_partitions(
    client4: rmq.Client, super_stream: str
) -> None:
    """Route by a header, without keys; a router naming no partition is refused."""

    def by_region(message: Message, partitions: Sequence[str]) -> str | list[str]:
        region = message.headers["region"].as_str()
        if region == "all":
            return list(partitions)
        return partitions[{"eu": 0, "us": 1, "ap": 2}[region]] if region != "mars" else "mars"

    async with client4.super_stream_producer(super_stream, routing=by_region) as producer:
        for region in ("eu", "us", "ap", "us", "all"):
            await producer.send(region.encode(), headers={"region": region})
        with pytest.raises(rmq.NoRouteError, match="chose \\['mars'\\]"):
            await producer.send(b"x", headers={"region": "mars"})
        await producer.flush()
    async with client4.super_stream_consumer(super_stream) as consumer:
        got = await take(consumer, 7)
    per_partition = Counter((m.partition, m.value) for m in got)
    assert per_partition == Counter(
        {
            (0, b"eu"): 1,
            (1, b"us"): 2,
            (2, b"ap"): 1,
            (0, b"all"): 1,
            (1, b"all"): 1,
            (2, b"all"): 1,
        }
    )


async def test_hash_routing_matches_the_java_client(client4: rmq.Client, super_stream: str) -> None:
    keys = [f"key-{i}".encode() for i in range(60)]
    async with client4.super_stream_producer(super_stream) as producer:
        for k in keys:
            await producer.send(b"v:" + k, key=k)
        await producer.flush()
    placed: dict[bytes, int] = {}
    for index in range(3):
        async with client4.consumer(f"{super_stream}-{index}") as c:
            for m in await c.next_batch(100, timeout=2):
                assert m.key is not None
                placed[m.key] = index
    assert placed == {k: rmq.hash_partition(k, 3) for k in keys}
    assert len(set(placed.values())) == 3  # every partition got some


async def test_key_routing_and_the_super_stream_consumer(
    client4: rmq.Client, super_stream: str
) -> None:
    async with client4.super_stream_producer(super_stream, routing="key") as producer:
        for i in range(30):
            await producer.send(f"m{i}".encode(), key=str(i % 3).encode())
        with pytest.raises(rmq.NoRouteError):
            await producer.send(b"lost", key=b"unbound")
        await producer.flush()
    async with client4.super_stream_consumer(super_stream) as consumer:
        got = await take(consumer, 30)
    assert sorted(m.value for m in got) == sorted(f"m{i}".encode() for i in range(30))
    for m in got:
        assert m.key is not None
        assert m.partition == int(m.key)
        assert m.stream == f"{super_stream}-{m.partition}"


async def test_single_active_consumer_takes_over_without_loss(
    client4: rmq.Client, stream4: str
) -> None:
    async with client4.producer(stream4) as p:
        await p.send_batch([f"m{i}".encode() for i in range(100)])
        await p.flush()
    group = f"sac-{uuid.uuid4().hex[:6]}"
    first = await client4.consumer(stream4, name=group, single_active=True)
    second = await client4.consumer(stream4, name=group, single_active=True)
    got_first = await take(first, 40)
    assert await second.next_batch(10, timeout=0.5) == []  # waiting for its turn
    assert not is_active(second)
    await first.commit(got_first[-1].offset)
    for _ in range(50):
        if await first.committed_offset() == 39:
            break
        await asyncio.sleep(0.05)
    await first.close()  # the second takes over after the stored offset
    got_second = await take(second, 60)
    assert is_active(second)
    await second.close()
    assert [m.offset for m in got_first + got_second] == list(range(100))


async def test_on_activate_chooses_where_an_activated_consumer_starts(
    client4: rmq.Client, stream4: str
) -> None:
    """An external offset store, as the Java, Go and rstream clients allow: the hook says
    where the activated consumer starts; the broker's stored offset is not used."""
    async with client4.producer(stream4) as p:
        await p.send_batch([f"m{i}".encode() for i in range(100)])
        await p.flush()
    store = {stream4: 9}  # the application's own record: offsets 0..9 were processed
    asked: list[str] = []

    async def on_activate(stream: str) -> int:
        asked.append(stream)
        await asyncio.sleep(0)  # a real store would be a network call
        return store[stream] + 1

    group = f"sac-hook-{uuid.uuid4().hex[:6]}"
    first = await client4.consumer(stream4, name=group, single_active=True, on_activate=on_activate)
    got_first = await take(first, 20)
    assert [m.offset for m in got_first] == list(range(10, 30))
    store[stream4] = got_first[-1].offset or 0  # processed; nothing committed to the broker
    second = await client4.consumer(
        stream4, name=group, single_active=True, on_activate=lambda stream: store[stream] + 1
    )
    assert await second.next_batch(10, timeout=0.5) == []  # waiting for its turn
    await first.close()
    got_second = await take(second, 70)
    await second.close()
    assert [m.offset for m in got_second] == list(range(30, 100))
    assert asked == [stream4]


async def test_a_failing_on_activate_falls_back_to_the_consumer_s_offset(
    client4: rmq.Client, stream4: str
) -> None:
    async with client4.producer(stream4) as p:
        await p.send_batch([b"a", b"b"])
        await p.flush()

    def broken(stream: str) -> int:
        raise RuntimeError("offset store unreachable")

    consumer = await client4.consumer(
        stream4, name=f"sac-{uuid.uuid4().hex[:6]}", single_active=True, on_activate=broken
    )
    try:
        assert [m.value for m in await take(consumer, 2)] == [b"a", b"b"]  # "first"
    finally:
        await consumer.close()


async def test_single_active_consumers_share_super_stream_partitions(
    client4: rmq.Client, super_stream: str
) -> None:
    group = f"ssac-{uuid.uuid4().hex[:6]}"
    a = await client4.super_stream_consumer(super_stream, name=group, single_active=True)
    b = await client4.super_stream_consumer(super_stream, name=group, single_active=True)
    try:
        for _ in range(100):  # the broker rebalances: every partition has one active member
            actives = [x.active for x in a.consumers], [x.active for x in b.consumers]
            if all(p ^ q for p, q in zip(*actives, strict=True)):
                break
            await asyncio.sleep(0.05)
        assert all(p ^ q for p, q in zip(*actives, strict=True))
        assert any(actives[0])
        assert any(actives[1])
    finally:
        await a.close()
        await b.close()


async def test_filtering_with_post_filter(client4: rmq.Client, stream4: str) -> None:
    def region(m: Message) -> str | None:
        value = m.headers.get("region")
        return value.as_str() if value is not None else None

    async with client4.producer(stream4, filter_value=region) as p:
        for name in ("eu", "us", "eu", "ap"):
            await p.send_batch([Message(name.encode(), headers={"region": name})] * 50)
            await p.flush()  # separate chunks per region
        await p.send_and_wait(b"none")

    def is_eu(m: Message) -> bool:
        return region(m) == "eu"

    async with client4.consumer(stream4, filter_values=["eu"], post_filter=is_eu) as c:
        got = await take(c, 100)
        assert await c.next_batch(10, timeout=0.5) == []
    assert Counter(m.value for m in got) == {b"eu": 100}
    async with client4.consumer(stream4, filter_values=["eu"], match_unfiltered=True) as c:
        # chunk-level: some non-eu messages may come along; the unfiltered one must
        values = [m.value for m in await take(c, 101)]
    assert b"none" in values


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_sub_batches_round_trip_with_every_codec(
    client4: rmq.Client, stream4: str, codec: str
) -> None:
    values = [f"{codec}-{i}".encode() * 5 for i in range(250)]
    async with client4.producer(stream4, sub_batch_size=100, compression=codec) as p:
        futures = await p.send_batch(values)
        await p.flush()
    ids = [f.result().publishing_id for f in futures]
    assert ids == [1] * 100 + [2] * 100 + [3] * 50  # one publishing id per sub-batch
    async with client4.consumer(stream4) as c:
        got = await take(c, 250)
    assert [m.value for m in got] == values
    assert [m.offset for m in got] == list(range(250))
