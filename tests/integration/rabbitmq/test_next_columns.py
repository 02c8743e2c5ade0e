"""``Consumer.next_columns``: chunks of plain bodies as column buffers, other chunks as
messages, together exactly the messages ``next_batch`` gives."""

from __future__ import annotations

import pytest

import streamwire.rabbitmq as rmq
from streamwire import ConfigurationError, HeaderValue, Message
from streamwire.codec.columns import Columns

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq]


def rows(got: list[Columns | list[Message]]) -> list[tuple[bytes, int | None, bool]]:
    """(value, offset, came as columns) of everything handed over."""
    out: list[tuple[bytes, int | None, bool]] = []
    for item in got:
        if isinstance(item, Columns):
            ends = memoryview(item.value_ends).cast("i")
            offsets = memoryview(item.offsets).cast("q")
            out += [
                (item.values[ends[i] : ends[i + 1]], offsets[i], True) for i in range(item.count)
            ]
        else:
            out += [(m.value, m.offset, False) for m in item]
    return out


async def test_plain_chunks_come_as_columns_others_as_messages(
    client: rmq.Client, stream: str
) -> None:
    async with client.producer(stream) as producer:
        await (await producer.send_many([b"p%d" % i for i in range(300)]))
        with_headers = [
            Message(b"h%d" % i, headers={"k": HeaderValue.string("v")}) for i in range(5)
        ]
        await producer.send_batch(with_headers)
        await producer.flush(timeout=10)
        await (await producer.send_many([b"q%d" % i for i in range(50)]))
    got: list[Columns | list[Message]] = []
    async with client.consumer(stream, offset=10) as consumer:
        while len(rows(got)) < 345:
            more = await consumer.next_columns(max_chunks=2, timeout=10)
            assert more, "no chunk within 10 s"
            got += more
        assert await consumer.next_columns(timeout=0.2) == []
        assert consumer.last_offset == 354
    values = [(v, o) for v, o, _ in rows(got)]
    expected = [(b"p%d" % i, i) for i in range(10, 300)]
    expected += [(b"h%d" % i, 300 + i) for i in range(5)]
    expected += [(b"q%d" % i, 305 + i) for i in range(50)]
    assert values == expected
    kinds = {v[:1]: columnar for v, _, columnar in rows(got)}
    assert kinds == {b"p": True, b"h": False, b"q": True}
    assert any(isinstance(item, Columns) for item in got)


async def test_a_post_filter_needs_messages(client: rmq.Client, stream: str) -> None:
    async with client.consumer(stream, post_filter=lambda m: True) as consumer:
        with pytest.raises(ConfigurationError, match="post_filter"):
            await consumer.next_columns(timeout=0.1)
