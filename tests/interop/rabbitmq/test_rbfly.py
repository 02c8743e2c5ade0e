"""streamwire ↔ rbfly 0.10.0 (GPL-3.0-or-later: only called here, never copied), both
directions, through the real broker.

What rbfly does with application properties (observed):

* publishing (``stream_message_ctx(body, app_properties=...)``), values are inferred from
  Python types: ``str`` → string, ``bytes`` → binary, ``bool`` → true/false, ``int`` → int
  (``0x71``, always 4 bytes) when it fits 32 bits, else long, else ulong up to 2**64 - 1,
  ``float`` → double, ``datetime`` → timestamp, ``uuid.UUID`` → uuid, ``Symbol`` → symbol;
  there is no way to choose a narrower or unsigned type. streamwire sees an rbfly ``int``
  as Int32 (Int64 / Uint64 when larger), a ``float`` as Float64 and a ``uuid.UUID`` as
  Uint128. A ``str`` body becomes an amqp-value string, which streamwire hands out as its
  UTF-8 bytes;
* consuming, strings come back as ``str``, every integer kind as ``int``, float and double
  as ``float``; message annotations are keyed by rbfly ``Symbol``s.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from rbfly.streams import AMQPAppProperties, PublisherBatchFast, Symbol, stream_message_ctx
from rbfly.streams._client import PublisherBin

import streamwire.rabbitmq as rmq
from streamwire import HeaderValue, Message
from streamwire.codec.headers import HeaderInput
from tests.brokers import BrokerInfo
from tests.interop.rabbitmq._peers import rbfly_client, rbfly_read, streamwire_read

pytestmark = [pytest.mark.interop, pytest.mark.integration, pytest.mark.rabbitmq]

UUID = uuid.UUID("12345678-1234-5678-1234-567812345678")
WHEN = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
WHEN_MS = 1_714_979_289_123


async def test_rbfly_amqp_messages_to_streamwire(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """rbfly AMQP messages (typed app properties, bytes and str bodies) → streamwire."""
    props: AMQPAppProperties = {
        "s": "café-ß",
        "clé-日本": "ü",
        "empty": "",
        "empty-bin": b"",
        "null": None,
        "jp": "日本",
        "long-text": "é" * 200,
        "i": 42,
        "neg": -7,
        "big": 5_000_000_000,
        "huge": 2**64 - 1,
        "b": True,
        "no": False,
        "f": 1.5,
        "bin": b"\x00\xff",
        "uuid": UUID,
        "ts": WHEN,
        "sym": Symbol("a-symbol"),
    }
    async with rbfly_client(broker) as rb:
        async with rb.publisher(stream, name="rbfly-amqp") as publisher:
            await publisher.send(stream_message_ctx(b"first", app_properties=props))
            await publisher.send(b"bytes body")
            await publisher.send("str body: ü")
            await publisher.send(b"y" * 70_000)
        async with rb.publisher(stream, name="rbfly-batch", cls=PublisherBatchFast) as batch:
            for i in range(3):
                batch.batch(stream_message_ctx(f"b{i}".encode(), app_properties={"n": i}))
            await batch.flush()

    got = await streamwire_read(client, stream, 7, settle=0.3)
    assert [m.offset for m in got] == list(range(7))
    assert [m.value for m in got] == [
        b"first",
        b"bytes body",
        "str body: ü".encode(),
        b"y" * 70_000,
        b"b0",
        b"b1",
        b"b2",
    ]
    assert got[0].headers == {
        "s": HeaderValue.string("café-ß"),
        "clé-日本": HeaderValue.string("ü"),
        "empty": HeaderValue.string(""),
        "empty-bin": HeaderValue.raw(b""),
        "null": HeaderValue.raw(b""),  # AMQP null → empty Raw (the documented mapping)
        "jp": HeaderValue.string("日本"),
        "long-text": HeaderValue.string("é" * 200),
        "i": HeaderValue.int32(42),
        "neg": HeaderValue.int32(-7),
        "big": HeaderValue.int64(5_000_000_000),
        "huge": HeaderValue.uint64(2**64 - 1),
        "b": HeaderValue.boolean(True),
        "no": HeaderValue.boolean(False),
        "f": HeaderValue.float64(1.5),
        "bin": HeaderValue.raw(b"\x00\xff"),
        "uuid": HeaderValue.uint128(UUID.int),
        "ts": HeaderValue.int64(WHEN_MS),
        "sym": HeaderValue.string("a-symbol"),
    }
    assert all(m.headers == {} for m in got[1:4])
    assert [m.headers for m in got[4:]] == [{"n": HeaderValue.int32(i)} for i in range(3)]
    assert all(m.key is None for m in got)


async def test_rbfly_raw_to_streamwire(broker: BrokerInfo, client: rmq.Client, stream: str) -> None:
    """rbfly's binary publisher (no AMQP) → streamwire: payloads delivered as they are."""
    payloads = [b"not amqp", bytes(range(256)), "日本".encode(), b"\x00\x53\x75\xa0\x10cut"]
    async with (
        rbfly_client(broker) as rb,
        rb.publisher(stream, name="rbfly-bin", cls=PublisherBin) as publisher,
    ):
        for payload in payloads:
            await publisher.send(payload)
    got = await streamwire_read(client, stream, len(payloads), settle=0.3)
    assert [m.value for m in got] == payloads
    assert [m.offset for m in got] == list(range(len(payloads)))
    assert all(m.headers == {} and m.key is None for m in got)


async def test_streamwire_to_rbfly(broker: BrokerInfo, client: rmq.Client, stream: str) -> None:
    """streamwire (every AMQP-mappable header kind, a key) → rbfly's AMQP decoder."""
    headers: dict[str, HeaderInput] = {
        "s": "café-ß",
        "jp": "日本",
        "i8": HeaderValue.int8(-5),
        "i16": HeaderValue.int16(-300),
        "i32": HeaderValue.int32(100_000),
        "i64": 5_000_000_000,
        "small": 7,
        "u8": HeaderValue.uint8(200),
        "u16": HeaderValue.uint16(65535),
        "u32": HeaderValue.uint32(4_000_000_000),
        "u64": HeaderValue.uint64(2**64 - 1),
        "b": True,
        "f32": HeaderValue.float32(1.5),
        "f64": 2.25,
        "r": b"\x00\xff",
        "clé-日本": "ü",
        "empty": "",
        "empty-raw": b"",
        "long": "é" * 200,
    }
    async with client.producer(stream) as producer:
        await producer.send_and_wait(b"v1", key="clé".encode(), headers=headers)
        await producer.send_and_wait(b"plain")
        await producer.send_and_wait(Message(b"v3", key=b"k3"))
        await producer.send_and_wait(b"z" * 70_000, headers={"big": True})

    async with rbfly_client(broker) as rb:
        got = await rbfly_read(rb, stream, 4)
    assert [ctx.stream_offset for _, ctx in got] == [0, 1, 2, 3]
    assert [body for body, _ in got] == [b"v1", b"plain", b"v3", b"z" * 70_000]
    first = got[0][1]
    assert first.app_properties == {
        "s": "café-ß",
        "jp": "日本",
        "i8": -5,
        "i16": -300,
        "i32": 100_000,
        "i64": 5_000_000_000,
        "small": 7,
        "u8": 200,
        "u16": 65535,
        "u32": 4_000_000_000,
        "u64": 2**64 - 1,
        "b": True,
        "f32": 1.5,
        "f64": 2.25,
        "r": b"\x00\xff",
        "clé-日本": "ü",
        "empty": "",
        "empty-raw": b"",
        "long": "é" * 200,
    }
    assert type(first.app_properties["b"]) is bool
    assert type(first.app_properties["f32"]) is float
    assert first.annotations == {Symbol("x-streamwire-key"): "clé".encode()}
    assert not got[1][1].app_properties
    assert not got[1][1].annotations
    assert got[2][1].annotations == {Symbol("x-streamwire-key"): b"k3"}
    assert got[3][1].app_properties == {"big": True}


async def test_streamwire_raw_to_rbfly_raw(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """streamwire ``amqp=False`` → rbfly ``amqp=False``: the same bytes."""
    payloads = [b"raw-1", bytes(range(256)), "日本".encode()]
    async with client.producer(stream, amqp=False) as producer:
        for payload in payloads:
            await producer.send_and_wait(payload)
    async with rbfly_client(broker) as rb:
        got = await rbfly_read(rb, stream, len(payloads), amqp=False)
    assert [body for body, _ in got] == payloads
    assert [ctx.stream_offset for _, ctx in got] == [0, 1, 2]


async def test_named_streamwire_producer_deduplicates_seen_by_rbfly(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """rbfly's publishers are named (dedup on) too: a streamwire producer with an rbfly
    publisher's name resumes after rbfly's last id; replays are not stored."""
    async with rbfly_client(broker) as rb, rb.publisher(stream, name="rb-shared") as publisher:
        for i in range(1, 4):
            await publisher.send(f"r{i}".encode())
    async with client.producer(stream, name="rb-shared") as producer:
        assert producer.next_publishing_id == 4
        for i in (1, 2, 3):
            await producer.send_and_wait(f"r{i}".encode(), publishing_id=i)
        await producer.send_and_wait(b"s4")
    async with rbfly_client(broker) as rb:
        got = await rbfly_read(rb, stream, 4)
    assert [body for body, _ in got] == [b"r1", b"r2", b"r3", b"s4"]
    assert await streamwire_read(client, stream, 4, settle=0.5) != []
