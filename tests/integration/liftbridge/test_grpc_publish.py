"""Publishing through Liftbridge's gRPC API (Publish, PublishToSubject) on the real server:
the path that needs no NATS connection of the client's own."""

from __future__ import annotations

import asyncio

import pytest

import streamwire.liftbridge as lb
from streamwire import ConfigurationError, Message
from streamwire.liftbridge.protocol.messages import AckPolicy
from tests.integration.liftbridge.conftest import NewStream, unique

pytestmark = [pytest.mark.integration, pytest.mark.liftbridge]


async def read(client: lb.Client, stream: str, count: int) -> list[Message]:
    out: list[Message] = []
    async with client.consumer(stream, offset="first") as consumer:
        async with asyncio.timeout(30):
            while len(out) < count:
                out += await consumer.next_batch(count - len(out), timeout=5)
    return out


async def test_publish_over_grpc_acks_and_stores(client: lb.Client, stream: str) -> None:
    first = await client.publish(stream, b"one", key=b"k", headers={"n": 1})
    assert first is not None
    assert (first.stream, first.offset, first.ack_error) == (stream, 0, 0)
    second = await client.publish(stream, b"two", ack_policy=AckPolicy.ALL)
    assert second is not None
    assert second.offset == 1
    assert await client.publish(stream, b"three", ack_policy=AckPolicy.NONE) is None
    got = await read(client, stream, 3)
    assert [(m.value, m.key) for m in got] == [(b"one", b"k"), (b"two", None), (b"three", None)]
    assert got[0].headers["n"].as_int() == 1


async def test_publish_over_grpc_refusals_are_typed(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream(optimistic_concurrency_control=True)
    ack = await client.publish(stream, b"a", expected_offset=0)
    assert ack is not None
    with pytest.raises(lb.IncorrectOffset):
        await client.publish(stream, b"b", expected_offset=5)
    with pytest.raises(lb.StreamNotFound):
        await client.publish(unique("sw-missing"), b"x")


async def test_publish_to_subject_reaches_every_stream_on_it(client: lb.Client) -> None:
    subject = unique("sw-subj").replace("-", "_")
    names = [unique(), unique()]
    for name in names:
        await client.create_stream(name, subject=subject)
    try:
        ack = await client.publish_to_subject(subject, b"hello", headers={"h": "v"})
        assert ack is not None
        assert ack.stream in names
        for name in names:
            (message,) = await read(client, name, 1)
            assert (message.value, message.headers["h"].as_str()) == (b"hello", "v")
        with pytest.raises(ConfigurationError, match="subject one can publish to"):
            await client.publish_to_subject("a.*", b"x")
    finally:
        for name in names:
            await client.delete_stream(name, missing_ok=True)
