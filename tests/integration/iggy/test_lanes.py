"""What a user does with an Iggy server, run unchanged on every lane (``tests/iggy_lanes.py``):
the conformance double in both modes and a real server when the harness has one.

Streams and topics with partitions, sends with keys and typed headers, polls by offset,
pipelined sends to several partitions (a sharded server answers them out of order),
named consumers that commit and resume, consumer groups, users and personal access
tokens, partition management, interop with the official apache-iggy client in both
directions, and a connection cut in the middle of sending.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import streamwire
import streamwire.iggy as iggy
from streamwire import HeaderValue, Message
from streamwire.codec.headers import HeaderInput
from streamwire.errors import StreamAlreadyExistsError, StreamwireError
from streamwire.iggy.protocol.errors import TopicNameNotFound
from tests.iggy_lanes import Lane, unique
from tests.proxy import FaultProxy

pytestmark = pytest.mark.integration

WAIT = 30.0
HEADERS: dict[str, HeaderInput] = {
    "text": "café-ß",
    "i8": HeaderValue.int8(-3),
    "u64": HeaderValue.uint64(2**63),
    "i128": HeaderValue.int128(-(2**100)),
    "f32": HeaderValue.float32(0.5),
    "f64": 0.25,
    "flag": True,
    "blob": b"\x00\xff",
}


@pytest.fixture
async def stream(client: iggy.Client) -> AsyncIterator[str]:
    name = unique()
    yield name
    await client.delete_stream(name, missing_ok=True)


async def drain(consumer: iggy.Consumer, want: int) -> list[Message]:
    got: list[Message] = []
    async with asyncio.timeout(WAIT):
        while len(got) < want:
            got += await consumer.next_batch(want - len(got), timeout=1.0)
    return got


async def test_streams_topics_and_partitions(client: iggy.Client, stream: str) -> None:
    topic = f"{stream}/t"
    await client.create_stream(topic, partitions=3)
    await client.create_stream(topic, exist_ok=True)
    await client.create_stream(stream)  # the existing stream gets its default topic
    with pytest.raises(StreamAlreadyExistsError):
        await client.create_stream(stream)
    assert sorted(t.name for t in await client.topics(stream)) == [iggy.DEFAULT_TOPIC, "t"]
    assert await client.stream_exists(topic)
    assert sorted(await client.partition_offsets(topic)) == [0, 1, 2]
    await client.create_partitions(topic, 2)
    assert len(await client.partition_offsets(topic)) == 5
    await client.delete_partitions(topic, 2)
    assert len(await client.partition_offsets(topic)) == 3
    await client.delete_stream(topic)
    with pytest.raises(TopicNameNotFound):
        await client.partition_offsets(topic)
    await client.delete_stream(stream)
    await client.delete_stream(stream, missing_ok=True)
    assert not await client.stream_exists(stream)


async def test_send_with_typed_headers_and_poll_by_offset(client: iggy.Client, stream: str) -> None:
    topic = f"{stream}/t"
    await client.create_stream(topic, partitions=1)
    async with client.producer(topic) as producer:
        first = await producer.send_and_wait(Message(b"v0", key=b"k", headers=HEADERS, id=7))
        await producer.send_batch([b"v1", b"v2", b"v3"])
        await producer.flush(timeout=WAIT)
    assert (first.offset, first.partition) == (0, 0)
    async with client.consumer(topic, offset=2) as consumer:
        tail = await drain(consumer, 2)
    assert [(m.offset, m.value) for m in tail] == [(2, b"v2"), (3, b"v3")]
    async with client.consumer(topic, offset="first") as consumer:
        (head, *_) = await drain(consumer, 4)
    assert (head.value, head.key, head.id) == (b"v0", b"k", 7)
    assert head.headers == {
        "text": HeaderValue.string("café-ß"),
        "i8": HeaderValue.int8(-3),
        "u64": HeaderValue.uint64(2**63),
        "i128": HeaderValue.int128(-(2**100)),
        "f32": HeaderValue.float32(0.5),
        "f64": HeaderValue.float64(0.25),
        "flag": HeaderValue.boolean(True),
        "blob": HeaderValue.raw(b"\x00\xff"),
    }


async def test_pipelined_keyed_sends_over_partitions(
    server: Lane, client: iggy.Client, stream: str
) -> None:
    topic = f"{stream}/t"
    await client.create_stream(topic, partitions=3)
    values = [b"m%03d" % i for i in range(300)]
    async with client.producer(topic, max_batch_messages=10) as producer:
        futures = [await producer.send(v, key=b"k%d" % (i % 7)) for i, v in enumerate(values)]
        await producer.flush(timeout=WAIT)
    confirmations = [f.result() for f in futures]
    offsets = await client.partition_offsets(topic)
    assert sum(o.messages for o in offsets.values()) == 300
    by_partition: dict[int, list[bytes]] = {}
    for value, conf in zip(values, confirmations, strict=True):
        by_partition.setdefault(conf.partition or 0, []).append(value)
    assert len(by_partition) > 1
    for partition, want in by_partition.items():
        async with client.consumer(topic, offset="first", partition=partition) as consumer:
            got = await drain(consumer, len(want))
        assert [m.value for m in got] == want  # each partition in send order
        assert [m.offset for m in got] == list(range(len(want)))
    if server.name == "double":
        assert client.reply_stats.out_of_order == 0


async def test_named_consumer_commits_and_resumes(client: iggy.Client, stream: str) -> None:
    topic = f"{stream}/t"
    await client.create_stream(topic, partitions=1)
    await client.send(topic, [b"a", b"b", b"c", b"d"])
    async with client.consumer(topic, offset="next", name="app") as consumer:
        assert await consumer.next_batch(10, timeout=0.2) == []  # nothing stored: from now on
    async with client.consumer(topic, offset="first", name="app") as consumer:
        assert [m.value for m in await drain(consumer, 2)] == [b"a", b"b"]
        await consumer.commit()
    async with client.consumer(topic, offset="next", name="app") as consumer:
        assert [m.value for m in await drain(consumer, 2)] == [b"c", b"d"]


async def test_consumer_group_commits_and_resumes(client: iggy.Client, stream: str) -> None:
    topic = f"{stream}/t"
    await client.create_stream(topic, partitions=3)
    await client.send(topic, [b"g%03d" % i for i in range(300)], partition=None)
    await client.create_consumer_group(topic, "billing")
    seen: list[bytes] = []
    async with client.consumer(topic, group="billing", auto_commit_messages=1) as consumer:
        async with asyncio.timeout(WAIT):
            while len(seen) < 300:
                seen += [m.value for m in await consumer.next_batch(100, timeout=1.0)]
    assert sorted(seen) == [b"g%03d" % i for i in range(300)]
    async with client.consumer(topic, group="billing") as again:
        assert await again.next_batch(100, timeout=1.0) == []  # everything was committed
    await client.delete_consumer_group(topic, "billing")


async def test_users_and_tokens(server: Lane, client: iggy.Client) -> None:
    user, token_name = unique("user"), unique("tok")
    await client.create_user(user, "secret-1")
    try:
        async with await iggy.connect(
            host=server.host, port=server.port, username=user, password="secret-1", timeout=10
        ) as other:
            assert other.user_id is not None
            assert other.user_id != client.user_id
        token = await client.create_token(token_name)
        assert token_name in [t.name for t in await client.tokens()]
        async with await iggy.connect(
            f"iggy://{server.address}?token={token}", timeout=10
        ) as by_token:
            await by_token.ping()
            assert by_token.user_id == client.user_id
        await client.delete_token(token_name)
        assert token_name not in [t.name for t in await client.tokens()]
    finally:
        await client.delete_user(user)
    assert user not in [u.username for u in await client.users()]


async def test_the_unified_api(server: Lane, stream: str) -> None:
    topic = f"{stream}/t"
    async with streamwire.connect(server.url, timeout=10) as client:
        await client.create_stream(topic)
        async with client.producer(topic) as producer:
            await producer.send_and_wait(b"one", key=b"k", headers={"n": 1})
        async with client.consumer(topic, offset="first") as consumer:
            (got,) = await consumer.next_batch(10, timeout=5)
        await client.delete_stream(stream)
    assert (got.value, got.key, got.headers) == (b"one", b"k", {"n": HeaderValue.int64(1)})


async def test_the_official_client_reads_what_streamwire_wrote(
    wheel: Any, client: iggy.Client, stream: str
) -> None:
    import apache_iggy as ig

    await client.create_stream(f"{stream}/t", partitions=2)
    values = [b"sw-%04d" % i for i in range(2000)]
    async with client.producer(f"{stream}/t", partition=1) as producer:
        await producer.send(Message(b"head", headers={"n": HeaderValue.int16(-2), "t": "ü"}))
        await producer.send_batch(values)
        await producer.flush(timeout=WAIT)
    polled: list[Any] = []
    async with asyncio.timeout(WAIT):
        while len(polled) < 2001:
            batch = await wheel.poll_messages(
                stream, "t", consumer=ig.Consumer.Single("x"),
                polling_strategy=ig.PollingStrategy.Offset(len(polled)), count=1000,
                auto_commit=False, partition_id=1,
            )  # fmt: skip
            assert batch, f"the official client stalled at {len(polled)}"
            polled += batch
    assert polled[0].payload() == b"head"
    assert polled[0].user_headers() == {
        ig.HeaderKey.String("n"): ig.HeaderValue.Int16(-2),
        ig.HeaderKey.String("t"): ig.HeaderValue.String("ü"),
    }
    assert [m.payload() for m in polled[1:]] == values
    assert [m.offset() for m in polled] == list(range(2001))


async def test_streamwire_reads_what_the_official_client_wrote(
    wheel: Any, client: iggy.Client, stream: str
) -> None:
    import apache_iggy as ig

    await client.create_stream(f"{stream}/t", partitions=2)  # streamwire creates: see docs
    headers = {"i": ig.HeaderValue.Int32(-7), "s": ig.HeaderValue.String("text ü")}
    batches = [[ig.SendMessage(b"w-%04d" % (i + j)) for j in range(500)] for i in (0, 500)]
    await wheel.send_messages(stream, "t", 0, [ig.SendMessage(b"head", headers, id=11)])
    for batch in batches:
        await wheel.send_messages(stream, "t", 0, batch)
    async with client.consumer(f"{stream}/t", partition=0, offset="first") as consumer:
        got = await drain(consumer, 1001)
    assert (got[0].value, got[0].id) == (b"head", 11)
    assert got[0].headers == {"i": HeaderValue.int32(-7), "s": HeaderValue.string("text ü")}
    assert [m.value for m in got[1:]] == [b"w-%04d" % i for i in range(1000)]
    assert [m.offset for m in got] == list(range(1001))


async def test_a_cut_connection_fails_sends_then_a_new_client_works(
    server: Lane, client: iggy.Client, stream: str
) -> None:
    topic = f"{stream}/t"
    await client.create_stream(topic, partitions=1)
    async with FaultProxy(server.host, server.port) as proxy:
        cut = await iggy.connect(
            f"iggy://iggy:iggy@127.0.0.1:{proxy.port}", timeout=10, reconnect=None
        )
        try:
            async with cut.producer(topic) as producer:
                await producer.send_and_wait(b"before")
                proxy.cut()
                with pytest.raises(StreamwireError):
                    async with asyncio.timeout(WAIT):
                        await producer.send_and_wait(b"after the cut")
        except StreamwireError:
            pass  # leaving the producer may report the lost connection as well
        finally:
            await cut.close()
    await client.send(topic, [b"after"])
    async with client.consumer(topic, offset="first") as consumer:
        got = [m.value for m in await drain(consumer, 2)]
    assert got[0] == b"before"
    assert got[-1] == b"after"
