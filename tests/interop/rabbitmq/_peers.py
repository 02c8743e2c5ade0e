"""Helpers that drive the peer clients (rstream, rbfly) and streamwire in the interop tests.

The peers are only called, never copied (rbfly is GPL-3.0-or-later).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote, urlparse

import rstream
from rbfly.streams import Offset, get_message_ctx, streams_client

import streamwire.rabbitmq as rmq
from streamwire import HeaderValue, Message, MessageProperties
from streamwire.codec.properties import ANNOTATION_PREFIX, PROPERTY_HEADERS
from tests.brokers import BrokerInfo

READ_TIMEOUT = 15.0
_OFFSET: Any = Offset  # rbfly's Offset.FIRST is set on the class at run time


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def ms(value: int) -> datetime:
    """An AMQP timestamp (ms since the epoch) as the aware UTC datetime streamwire gives."""
    return EPOCH + timedelta(milliseconds=value)


def to_ms(value: datetime) -> int:
    """Milliseconds since the epoch of an aware datetime (what a peer should read)."""
    return (value - EPOCH) // timedelta(milliseconds=1)


def application_headers(message: Message) -> dict[str, HeaderValue]:
    """``message``'s headers without the reserved ones that carry its AMQP properties and
    message annotations (``amqp.message-id``..., ``amqp.annotation.*``)."""
    reserved = set(PROPERTY_HEADERS.values())
    return {
        name: value
        for name, value in message.headers.items()
        if name not in reserved and not name.startswith(ANNOTATION_PREFIX)
    }


def assert_properties(got: MessageProperties | None, expected: MessageProperties) -> None:
    """``got`` equals ``expected`` field for field, Python types included (an int id is not a
    str id, ...), and its times are UTC."""
    assert got is not None, f"no properties, expected {expected}"
    for field in dataclasses.fields(MessageProperties):
        value, want = getattr(got, field.name), getattr(expected, field.name)
        assert (type(value), value) == (type(want), want), (
            f"{field.name}: got {value!r}, expected {want!r}"
        )
        if isinstance(value, datetime):
            assert value.utcoffset() == timedelta(0), f"{field.name}: not UTC: {value!r}"
    assert got == expected, f"got {got}, expected {expected}"


def credentials(broker: BrokerInfo) -> tuple[str, str]:
    """(username, password) from the broker URL (guest/guest when it names none)."""
    parsed = urlparse(broker.url)
    return unquote(parsed.username or "guest"), unquote(parsed.password or "guest")


async def streamwire_read(
    client: rmq.Client, stream: str, n: int, *, amqp: bool = True, settle: float = 0.0
) -> list[Message]:
    """The first ``n`` messages of ``stream``; with ``settle``, then checks that no more came
    within that many seconds."""
    got: list[Message] = []
    async with client.consumer(stream, offset="first", amqp=amqp) as consumer:
        async with asyncio.timeout(READ_TIMEOUT):
            while len(got) < n:
                got += await consumer.next_batch(n - len(got), timeout=READ_TIMEOUT)
        if settle:
            extra = await consumer.next_batch(100, timeout=settle)
            assert extra == [], f"unexpected extra messages: {extra}"
    return got


def rstream_producer(broker: BrokerInfo) -> rstream.Producer:
    user, password = credentials(broker)
    return rstream.Producer(broker.host, broker.port, username=user, password=password)


async def rstream_read(
    broker: BrokerInfo, stream: str, n: int, *, amqp: bool = True, settle: float = 0.0
) -> list[tuple[int, Any]]:
    """(offset, message) for the first ``n`` messages, read by an rstream Consumer: AMQP
    decoded by rstream's ``amqp_decoder`` (an ``AMQPMessage``) or, with ``amqp=False``, the
    record bytes. With ``settle``, then waits that long and checks nothing more arrived."""
    user, password = credentials(broker)
    got: list[tuple[int, Any]] = []
    enough = asyncio.Event()

    async def on_message(message: Any, context: rstream.MessageContext) -> None:
        got.append((context.offset, message))
        if len(got) >= n:
            enough.set()

    consumer = rstream.Consumer(broker.host, broker.port, username=user, password=password)
    async with consumer:
        await consumer.subscribe(
            stream,
            on_message,
            decoder=rstream.amqp_decoder if amqp else None,
            offset_specification=rstream.ConsumerOffsetSpecification(
                rstream.OffsetType.FIRST, None
            ),
        )
        async with asyncio.timeout(READ_TIMEOUT):
            await enough.wait()
        if settle:
            await asyncio.sleep(settle)
    assert len(got) == n, f"rstream read {len(got)} messages, expected {n}: {got}"
    return got


@contextlib.asynccontextmanager
async def rbfly_client(broker: BrokerInfo) -> Any:
    """An rbfly StreamsClient on the broker, disconnected afterwards."""
    user, password = credentials(broker)
    client: Any = streams_client(
        f"rabbitmq-stream://{user}:{password}@{broker.host}:{broker.port}/"
    )
    try:
        yield client
    finally:
        await client.disconnect()


async def rbfly_read(
    client: Any, stream: str, n: int, *, amqp: bool = True
) -> list[tuple[Any, Any]]:
    """(body, rbfly MessageCtx) for the first ``n`` messages of ``stream``."""
    got: list[tuple[Any, Any]] = []
    async with asyncio.timeout(READ_TIMEOUT):
        async with contextlib.aclosing(
            client.subscribe(stream, offset=_OFFSET.FIRST, amqp=amqp)
        ) as messages:
            async for body in messages:
                got.append((body, get_message_ctx()))
                if len(got) == n:
                    break
    return got
