"""The RabbitMQ Streams consumer against the scripted broker (no server): offset specs,
credit flow, batches and iteration, commits and resumption, sub-batches."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime

import pytest

import streamwire.rabbitmq as rmq
from streamwire.codec.amqp import encode_data_body
from streamwire.codec.offset import OffsetLike
from streamwire.errors import ClosedError, ConfigurationError
from streamwire.rabbitmq.protocol import frames as f
from streamwire.rabbitmq.protocol.constants import OffsetType
from streamwire.rabbitmq.protocol.errors import StreamDoesNotExist
from streamwire.rabbitmq.protocol.publishing import encode_sub_batch
from streamwire.transport.ready import NATIVE_PAYS
from tests.rabbitmq_double import RabbitMQDouble, encode_chunk, simple_entry
from tests.unit.rabbitmq.support import CHUNK_V1, M0, M1

S = "events"


def entry(value: bytes) -> bytes:
    return simple_entry(encode_data_body(value))


def test_the_double_writes_chunks_as_rabbitmq_does() -> None:
    """The scripted broker's chunk encoder reproduces a chunk captured from 4.0.5."""
    entries = [simple_entry(M0), simple_entry(M1)]
    assert encode_chunk(0, entries, timestamp=0x1A20128289F, epoch=1) == CHUNK_V1


@pytest.fixture
async def chunks(broker: RabbitMQDouble, client: rmq.Client) -> str:
    """Stream ``events``: chunks of offsets 0-2, 3-4 and 5, written at t = 1, 2, 3 s
    (later chunks one second apart)."""
    await client.create_stream(S)
    clock = itertools.count(1000, 1000)
    broker.timestamp = lambda: next(clock)
    broker.append(S, entry(b"m0"), entry(b"m1"), entry(b"m2"))
    broker.append(S, entry(b"m3"), entry(b"m4"))
    broker.append(S, entry(b"m5"))
    return S


async def drain(consumer: rmq.Consumer, count: int) -> list[bytes]:
    out: list[bytes] = []
    async with asyncio.timeout(5):
        while len(out) < count:
            out.extend(bytes(m.value) for m in await consumer.next_batch(count - len(out)))
    return out


@pytest.mark.parametrize(
    ("offset", "spec", "expected"),
    [
        ("first", (OffsetType.FIRST, None), [0, 1, 2, 3, 4, 5]),
        ("last", (OffsetType.LAST, None), [5]),  # the last chunk
        (4, (OffsetType.OFFSET, 4), [4, 5]),  # its chunk starts at 3: 3 is skipped
        (1, (OffsetType.OFFSET, 1), [1, 2, 3, 4, 5]),
        (datetime.fromtimestamp(2, UTC), (OffsetType.TIMESTAMP, 2000), [3, 4, 5]),
    ],
)
async def test_offset_specs(
    broker: RabbitMQDouble,
    client: rmq.Client,
    chunks: str,
    offset: OffsetLike,
    spec: tuple[int, int | None],
    expected: list[int],
) -> None:
    async with client.consumer(chunks, offset=offset) as consumer:
        got = await drain(consumer, len(expected))
        assert await consumer.next_batch(10, timeout=0.05) == []
    assert got == [b"m%d" % i for i in expected]
    (subscribe,) = broker.frames(f.SubscribeRequest)
    assert (subscribe.offset_type, subscribe.offset) == spec


async def test_next_gets_only_what_is_written_afterwards(
    broker: RabbitMQDouble, client: rmq.Client, chunks: str
) -> None:
    async with client.consumer(chunks, offset="next") as consumer:
        assert await consumer.next(timeout=0.05) is None
        broker.append(chunks, entry(b"m6"))
        message = await consumer.next(timeout=5)
    assert message is not None
    assert (bytes(message.value), message.offset, message.stream) == (b"m6", 6, chunks)
    assert broker.frames(f.SubscribeRequest)[0].offset_type == OffsetType.NEXT


async def test_credit_is_granted_as_chunks_are_taken(
    broker: RabbitMQDouble, client: rmq.Client, chunks: str
) -> None:
    broker.append(chunks, entry(b"m6"))
    broker.append(chunks, entry(b"m7"))  # five chunks in all
    async with client.consumer(chunks, initial_credit=2) as consumer:
        sub = broker.session_consuming(chunks).subscriptions[0]
        await broker.until(lambda: sub.delivered == 2)
        assert sub.credit == 0
        assert broker.frames(f.Credit) == []  # nothing taken yet: no credit back
        assert await drain(consumer, 1) == [b"m0"]  # taking chunk 1 grants one credit
        await broker.until(lambda: sub.delivered == 3)
        assert broker.frames(f.Credit) == [f.Credit(0, 1)]
        rest = await drain(consumer, 7)
        await broker.until(lambda: len(broker.frames(f.Credit)) == 5)
    assert rest == [b"m%d" % i for i in range(1, 8)]
    assert sub.delivered == 5
    assert sub.credit == 2  # every chunk taken gave its credit back


async def test_credit_batch_grants_several_chunks_in_one_frame(
    broker: RabbitMQDouble, client: rmq.Client, chunks: str
) -> None:
    for i in range(6, 11):
        broker.append(chunks, entry(b"m%d" % i))  # eight chunks in all
    async with client.consumer(chunks, initial_credit=4, credit_batch=2) as consumer:
        sub = broker.session_consuming(chunks).subscriptions[0]
        await broker.until(lambda: sub.delivered == 4)
        assert await drain(consumer, 3) == [b"m0", b"m1", b"m2"]  # one chunk: nothing owed yet
        assert broker.frames(f.Credit) == []
        assert await drain(consumer, 2) == [b"m3", b"m4"]  # the second chunk: Credit(2)
        await broker.until(lambda: sub.delivered == 6)
        assert broker.frames(f.Credit) == [f.Credit(0, 2)]
        rest = await drain(consumer, 6)
        await broker.until(lambda: sub.delivered == 8)
    assert rest == [b"m%d" % i for i in range(5, 11)]
    assert all(frame.credit == 2 for frame in broker.frames(f.Credit))


async def test_manual_credit_waits_for_the_application(
    broker: RabbitMQDouble, client: rmq.Client, chunks: str
) -> None:
    async with client.consumer(chunks, initial_credit=1, manual_credit=True) as consumer:
        sub = broker.session_consuming(chunks).subscriptions[0]
        assert await drain(consumer, 3) == [b"m0", b"m1", b"m2"]
        assert await consumer.next_batch(10, timeout=0.2) == []  # no credit, no chunk
        assert broker.frames(f.Credit) == []
        consumer.grant_credit(2)
        assert await drain(consumer, 3) == [b"m3", b"m4", b"m5"]
        await broker.until(lambda: sub.delivered == 3)
        assert broker.frames(f.Credit) == [f.Credit(0, 2)]
    with pytest.raises(ClosedError):
        consumer.grant_credit()


@pytest.mark.parametrize("options", [{"credit_batch": 0}, {"credit_batch": 17}])
async def test_credit_options_are_checked(client: rmq.Client, options: dict[str, int]) -> None:
    with pytest.raises(ConfigurationError, match="credit_batch"):
        client.consumer("s", **options)  # type: ignore[arg-type]


async def test_async_iteration_and_next(
    broker: RabbitMQDouble, client: rmq.Client, chunks: str
) -> None:
    seen: list[int] = []
    async with client.consumer(chunks) as consumer:
        async with asyncio.timeout(5):
            async for message in consumer:
                assert message.offset is not None
                seen.append(message.offset)
                if message.offset == 4:
                    break
        last = await consumer.next(timeout=5)
        assert consumer.last_offset == 5
    assert seen == [0, 1, 2, 3, 4]
    assert last is not None
    assert last.timestamp_us == 3_000_000


async def test_async_for_iterates_natively_where_that_pays_and_keeps_the_offset(
    broker: RabbitMQDouble, client: rmq.Client, chunks: str
) -> None:
    async with client.consumer(chunks) as consumer:
        it = aiter(consumer)
        assert (it is consumer) == (not NATIVE_PAYS)
        seen: list[int | None] = []
        async with asyncio.timeout(5):
            async for message in consumer:
                seen.append(message.offset)
                assert consumer.last_offset == message.offset
                if message.offset == 2:
                    break
            assert consumer.stats.last_offset == 2
            assert (await anext(it)).offset == 3
            batch = await consumer.next_batch(2, timeout=5)
            assert [m.offset for m in batch] == [4, 5]
        assert seen == [0, 1, 2]
    async with client.consumer(chunks, name="named") as named:
        assert aiter(named) is named  # auto-commit counts each message: the coroutine


async def test_commit_then_resume_with_name_and_next(
    broker: RabbitMQDouble, client: rmq.Client, chunks: str
) -> None:
    async with client.consumer(chunks, name="billing", offset="next") as first:
        # nothing stored yet: "next" is the broker's NEXT
        assert broker.frames(f.SubscribeRequest)[0].offset_type == OffsetType.NEXT
        assert await first.committed_offset() is None
    async with client.consumer(chunks, name="billing") as consumer:
        assert await drain(consumer, 3) == [b"m0", b"m1", b"m2"]
        await consumer.commit()
        await broker.until(lambda: broker.state.offsets.get(("billing", chunks)) == 2)
        assert await consumer.committed_offset() == 2
    async with client.consumer(chunks, name="billing", offset="next") as resumed:
        assert await drain(resumed, 3) == [b"m3", b"m4", b"m5"]
    subscribe = broker.frames(f.SubscribeRequest)[-1]
    assert (subscribe.offset_type, subscribe.offset) == (OffsetType.OFFSET, 3)
    assert subscribe.properties["name"] == "billing"
    assert [q.reference for q in broker.frames(f.QueryOffsetRequest)][-1] == "billing"


async def test_auto_commit_stores_every_n_messages(
    broker: RabbitMQDouble, client: rmq.Client, chunks: str
) -> None:
    async with client.consumer(chunks, name="auto", auto_commit_messages=2) as consumer:
        for _ in range(3):
            assert await consumer.next(timeout=5) is not None
        await broker.until(lambda: broker.state.offsets.get(("auto", chunks)) == 1)
    # close stores what was handed out since
    assert broker.state.offsets[("auto", chunks)] == 2
    assert [s.offset for s in broker.frames(f.StoreOffset)] == [1, 2]


async def test_chunks_of_several_entries_and_sub_batches(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    await client.create_stream("mixed")
    plain = [encode_data_body(b"s%d" % i) for i in range(3)]
    broker.append(
        "mixed",
        encode_sub_batch(plain),  # offsets 0-2
        entry(b"single"),  # 3
        encode_sub_batch([encode_data_body(b"z0"), encode_data_body(b"z1")], "gzip"),  # 4-5
    )
    async with client.consumer("mixed", offset=4) as consumer:
        from_4 = await consumer.next_batch(10, timeout=5)
    async with client.consumer("mixed") as consumer:
        everything = await drain(consumer, 6)
    assert everything == [b"s0", b"s1", b"s2", b"single", b"z0", b"z1"]
    assert [(bytes(m.value), m.offset) for m in from_4] == [(b"z0", 4), (b"z1", 5)]


async def test_next_batch_respects_max_messages(
    broker: RabbitMQDouble, client: rmq.Client, chunks: str
) -> None:
    async with client.consumer(chunks) as consumer:
        async with asyncio.timeout(5):
            first = await consumer.next_batch(2, timeout=5)
            second = await consumer.next_batch(2, timeout=5)
    assert [m.offset for m in first] == [0, 1]
    assert [m.offset for m in second] == [2, 3]


async def test_a_consumer_of_a_missing_stream_does_not_start(client: rmq.Client) -> None:
    with pytest.raises(StreamDoesNotExist):
        await client.consumer("missing").start(timeout=5)


async def test_close_unsubscribes(broker: RabbitMQDouble, client: rmq.Client, chunks: str) -> None:
    consumer = await client.consumer(chunks)
    session = broker.session_consuming(chunks)
    await consumer.close()
    assert [u.subscription_id for u in broker.frames(f.UnsubscribeRequest)] == [0]
    assert session.subscriptions == {}
