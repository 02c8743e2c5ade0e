"""streamwire ↔ rstream 1.1.1 (MIT; its AMQP codec is a vendored copy of Azure's pure-Python
``_pyamqp``), both directions, through the real broker.

What rstream does with application properties (observed):

* publishing, plain Python values are inferred: ``str`` → string, ``bytes`` → binary,
  ``bool`` → boolean, ``int`` → int (smallint ``0x54`` or ``0x71``) when it fits 32 bits else
  long, ``float`` → double, ``uuid.UUID`` → uuid, ``datetime`` → timestamp. Other AMQP types
  need its ``{TYPE: AMQPTypes.x, VALUE: v}`` dicts. streamwire therefore sees an rstream
  ``int`` as Int32 (Int64 above 32 bits), a ``float`` as Float64 and a ``UUID`` as Uint128;
* consuming, its decoder returns every string (keys and values, and annotation symbols) as
  UTF-8 ``bytes`` (so String and Raw headers look alike) and every integer kind as ``int``;
  booleans and floats keep their Python types, a uuid (a Uint128 header) is a ``UUID``.

Its properties section (``rstream.Properties``, a NamedTuple of the 13 fields), observed:

* publishing, the ids follow the Python type: ``int`` → ulong, ``UUID`` → uuid, ``bytes``
  → binary, ``str`` → string; ``user_id`` is binary, ``content_type``/``content_encoding``
  symbols, the other strings strings, ``group_sequence`` a uint; the times are timestamps
  given as an int (ms) or a ``datetime`` (converted with ``utctimetuple``, so an aware
  datetime in any zone, or before 1970, gives the right ms). streamwire reads all of it
  back into :class:`MessageProperties` exactly (ids as int, ``UUID``, bytes, str).
  Message annotations are inferred like application properties (an ``int`` annotation is
  Int32 in streamwire, a ``UUID`` Uint128) or typed with the same dicts;
* consuming, ``message.properties`` is that NamedTuple with every string field (``to``,
  ``subject``, ``reply_to``, ``content_type``, ``content_encoding``, ``group_id``,
  ``reply_to_group_id``) and a *string* message or correlation id as UTF-8 ``bytes``: a
  string id and a binary id look alike. A ulong id is an ``int``, a uuid id a ``UUID``,
  ``user_id`` ``bytes``, the times ``int`` ms (negative before 1970), ``group_sequence`` an
  ``int``; ``properties`` is None for a message without a properties section. Message
  annotations are keyed by ``bytes`` (the symbol's UTF-8), string values are ``bytes``.
"""

from __future__ import annotations

import asyncio
import importlib
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from rstream import AMQPMessage, CompressionType, ConfirmationStatus, Header, Properties

import streamwire.rabbitmq as rmq
from streamwire import HeaderValue, Message, MessageProperties, Offset
from streamwire.codec import amqp
from streamwire.codec.headers import HeaderInput
from streamwire.codec.properties import MessageId
from tests.brokers import BrokerInfo
from tests.interop.rabbitmq._peers import (
    application_headers,
    assert_properties,
    ms,
    rstream_producer,
    rstream_read,
    streamwire_read,
    to_ms,
)

pytestmark = [pytest.mark.interop, pytest.mark.integration, pytest.mark.rabbitmq]

# rstream's AMQP type tags (its vendored _pyamqp has no type information for mypy)
_PYAMQP: Any = importlib.import_module("rstream._pyamqp.types")
TYPE: str = _PYAMQP.TYPE
VALUE: str = _PYAMQP.VALUE
AMQPTypes: Any = _PYAMQP.AMQPTypes

TS_MS = 1_700_000_000_123
UUID = uuid.UUID("12345678-1234-5678-1234-567812345678")
LONG_TEXT = "é" * 200  # 400 UTF-8 bytes: str32 on the wire


def _typed(kind: Any, value: object) -> dict[str, object]:
    """rstream's way to choose an AMQP type for a value."""
    return {TYPE: kind, VALUE: value}


RSTREAM_PROPS: dict[str, object] = {
    "s": "café-ß",
    "clé-日本": "ü",
    "empty": "",
    "empty-bin": b"",
    "null": None,
    "jp": "日本",
    "long-text": LONG_TEXT,
    "i": 42,
    "neg": -7,
    "big": 5_000_000_000,
    "b": True,
    "no": False,
    "f": 1.5,
    "bin": b"\x00\xff",
    "uuid": UUID,
    "ubyte": _typed(AMQPTypes.ubyte, 200),
    "ushort": _typed(AMQPTypes.ushort, 65535),
    "uint": _typed(AMQPTypes.uint, 4_000_000_000),
    "ulong": _typed(AMQPTypes.ulong, 2**64 - 1),
    "byte": _typed(AMQPTypes.byte, -5),
    "short": _typed(AMQPTypes.short, -300),
    "int-typed": _typed(AMQPTypes.int, 100_000),
    "long-typed": _typed(AMQPTypes.long, 9),
    "float": _typed(AMQPTypes.float, 0.25),
    "sym": _typed(AMQPTypes.symbol, "a-symbol"),
    "ts": _typed(AMQPTypes.timestamp, TS_MS),
}

EXPECTED_HEADERS = {
    "s": HeaderValue.string("café-ß"),
    "clé-日本": HeaderValue.string("ü"),
    "empty": HeaderValue.string(""),
    "empty-bin": HeaderValue.raw(b""),
    "null": HeaderValue.raw(b""),  # AMQP null → empty Raw (the documented mapping)
    "jp": HeaderValue.string("日本"),
    "long-text": HeaderValue.string(LONG_TEXT),
    "i": HeaderValue.int32(42),
    "neg": HeaderValue.int32(-7),
    "big": HeaderValue.int64(5_000_000_000),
    "b": HeaderValue.boolean(True),
    "no": HeaderValue.boolean(False),
    "f": HeaderValue.float64(1.5),
    "bin": HeaderValue.raw(b"\x00\xff"),
    "uuid": HeaderValue.uint128(UUID.int),
    "ubyte": HeaderValue.uint8(200),
    "ushort": HeaderValue.uint16(65535),
    "uint": HeaderValue.uint32(4_000_000_000),
    "ulong": HeaderValue.uint64(2**64 - 1),
    "byte": HeaderValue.int8(-5),
    "short": HeaderValue.int16(-300),
    "int-typed": HeaderValue.int32(100_000),
    "long-typed": HeaderValue.int64(9),
    "float": HeaderValue.float32(0.25),
    "sym": HeaderValue.string("a-symbol"),
    "ts": HeaderValue.int64(TS_MS),
}


async def test_rstream_amqp_messages_to_streamwire(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """rstream AMQPMessages (properties, header, annotations, typed application properties,
    data and amqp-value bodies, a 70 kB body) → streamwire's consumer."""
    big_body = bytes(range(256)) * 280
    messages = [
        AMQPMessage(
            body=b"first",
            properties=Properties(
                message_id="m-0",
                correlation_id="c-0",
                content_type="text/plain",
                subject="sujet-é",
                reply_to="réponse",
            ),
            application_properties=RSTREAM_PROPS,
        ),
        AMQPMessage(body=b"plain"),
        AMQPMessage(
            body=big_body,
            header=Header(durable=True, priority=7),
            message_annotations={"x-opt-thing": "v"},
            application_properties={"k": "v"},
        ),
        AMQPMessage(value="an amqp-value string: ü"),
        AMQPMessage(value=b"an amqp-value binary"),
    ]
    async with rstream_producer(broker) as producer:
        for message in messages:
            await producer.send_wait(stream, message)

    got = await streamwire_read(client, stream, len(messages), settle=0.3)
    assert [m.offset for m in got] == [0, 1, 2, 3, 4]
    assert [m.value for m in got] == [
        b"first",
        b"plain",
        big_body,
        "an amqp-value string: ü".encode(),
        b"an amqp-value binary",
    ]
    assert application_headers(got[0]) == EXPECTED_HEADERS
    assert {k: v.kind for k, v in application_headers(got[0]).items()} == {
        k: v.kind for k, v in EXPECTED_HEADERS.items()
    }
    assert_properties(
        got[0].properties,
        MessageProperties(
            message_id="m-0",
            correlation_id="c-0",
            content_type="text/plain",
            subject="sujet-é",
            reply_to="réponse",
        ),
    )
    assert got[0].annotations == {}
    assert got[1].headers == {}
    assert got[1].properties is None
    assert got[2].headers == {
        "k": HeaderValue.string("v"),
        "amqp.annotation.x-opt-thing": HeaderValue.string("v"),
    }
    assert got[2].annotations == {"x-opt-thing": HeaderValue.string("v")}
    assert got[2].properties is None
    assert all(m.key is None for m in got)  # no x-streamwire-key annotation
    assert all(m.stream == stream and m.timestamp is not None for m in got)

    # streamwire's AMQP codec reads the properties rstream wrote (the SDK's Message does not
    # carry them, so decode the raw records)
    raw = await streamwire_read(client, stream, 3, amqp=False)
    first = amqp.decode_message(raw[0].value)
    assert first.properties is not None
    assert first.properties.message_id == "m-0"
    assert first.properties.correlation_id == "c-0"
    assert first.properties.content_type == amqp.Symbol("text/plain")
    assert first.properties.subject == "sujet-é"
    assert first.properties.reply_to == "réponse"
    third = amqp.decode_message(raw[2].value)
    assert third.header is not None
    assert third.header.durable is True
    assert third.header.priority == 7
    assert third.message_annotations == {amqp.Symbol("x-opt-thing"): "v"}


async def test_rstream_empty_body_with_properties_to_streamwire(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """rstream leaves the body section out when the body is empty: ``AMQPMessage(body=b"",
    application_properties={"a": "v", "n": 1})`` is exactly
    ``00 53 74 c1 0c 04 a1 01 61 a1 01 76 a1 01 6e 54 01`` (application properties, no
    data section). The Java reference client reads that record as an empty body with its
    two application properties; streamwire should too (value ``b""``, headers kept), not
    fall back to handing out the encoded bytes as a raw payload."""
    message = AMQPMessage(body=b"", application_properties={"a": "v", "n": 1})
    assert bytes(message) == bytes.fromhex("005374c10c04a10161a10176a1016e5401")
    async with rstream_producer(broker) as producer:
        await producer.send_wait(stream, message)
        await producer.send_wait(stream, AMQPMessage(body=b"next"))
    got = await streamwire_read(client, stream, 2)
    assert [m.offset for m in got] == [0, 1]
    assert got[1].value == b"next"
    assert got[0].headers == {"a": HeaderValue.string("v"), "n": HeaderValue.int32(1)}
    assert got[0].value == b""


async def test_rstream_raw_bytes_to_streamwire(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """rstream's "binary" mode (publishing bytes, no AMQP) → streamwire: each payload is
    delivered as it is, including one that starts like an AMQP data section but is cut."""
    payloads = [
        b"not amqp at all",
        bytes(range(256)),
        "日本".encode(),
        b"\x00\x53\x75\xa0\x10short",  # data-section prefix announcing 16 bytes, 5 follow
        b"\x00\x53\x77",  # a described amqp-value with no value
    ]
    async with rstream_producer(broker) as producer:
        for payload in payloads:
            await producer.send_wait(stream, payload)
    got = await streamwire_read(client, stream, len(payloads), settle=0.3)
    assert [m.value for m in got] == payloads
    assert [m.offset for m in got] == list(range(len(payloads)))
    assert all(m.headers == {} and m.key is None for m in got)
    raw = await streamwire_read(client, stream, len(payloads), amqp=False)
    assert [m.value for m in raw] == payloads


async def test_streamwire_to_rstream(broker: BrokerInfo, client: rmq.Client, stream: str) -> None:
    """streamwire (headers of every AMQP-mappable kind, a key) → rstream's amqp_decoder."""
    headers: dict[str, HeaderInput] = {
        "s": "café-ß",
        "jp": "日本",
        "i8": HeaderValue.int8(-5),
        "i16": HeaderValue.int16(-300),
        "i32": HeaderValue.int32(100_000),
        "i64": 5_000_000_000,
        "u8": HeaderValue.uint8(200),
        "u16": HeaderValue.uint16(65535),
        "u32": HeaderValue.uint32(4_000_000_000),
        "u64": HeaderValue.uint64(2**64 - 1),
        "b": False,
        "f32": HeaderValue.float32(1.5),
        "f64": 2.25,
        "u128": HeaderValue.uint128(UUID.int),  # sent as an AMQP uuid
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
        await producer.send_and_wait(b"x" * 70_000, headers={"big": True})

    got = await rstream_read(broker, stream, 4)
    assert [offset for offset, _ in got] == [0, 1, 2, 3]
    first, plain, keyed, big = (m for _, m in got)
    assert first.body == b"v1"
    # rstream hands out strings (keys, string values, symbols) as UTF-8 bytes, ints as int
    assert first.application_properties == {
        b"s": "café-ß".encode(),
        b"jp": "日本".encode(),
        b"i8": -5,
        b"i16": -300,
        b"i32": 100_000,
        b"i64": 5_000_000_000,
        b"u8": 200,
        b"u16": 65535,
        b"u32": 4_000_000_000,
        b"u64": 2**64 - 1,
        b"b": False,
        b"f32": 1.5,
        b"f64": 2.25,
        b"u128": UUID,
        b"r": b"\x00\xff",
        "clé-日本".encode(): "ü".encode(),
        b"empty": b"",
        b"empty-raw": b"",
        b"long": ("é" * 200).encode(),
    }
    assert type(first.application_properties[b"b"]) is bool
    assert type(first.application_properties[b"f32"]) is float
    assert first.message_annotations == {b"x-streamwire-key": "clé".encode()}
    assert plain.body == b"plain"
    assert plain.application_properties is None
    assert plain.message_annotations is None
    assert first.properties is None
    assert plain.properties is None
    assert keyed.body == b"v3"
    assert keyed.message_annotations == {b"x-streamwire-key": b"k3"}
    assert keyed.application_properties is None
    assert big.body == b"x" * 70_000
    assert big.application_properties == {b"big": True}


#: one id of each AMQP type (ulong, uuid, binary, string); message i has IDS[i] as its
#: message id and IDS[(i + 1) % 4] as its correlation id
IDS: list[MessageId] = [2**64 - 1, UUID, b"\x00\xffid", "id-é"]
EXPIRY_MS = 1_700_000_000_123
CREATED = datetime(2024, 5, 6, 9, 8, 9, 123_000, timezone(timedelta(hours=2)))  # 07:08:09Z
BEFORE_1970 = datetime(1969, 12, 31, 23, 59, 59, 999_000, UTC)  # -1 ms


async def test_rstream_properties_to_streamwire(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """rstream ``Properties`` with every field set (each id type as message and correlation
    id, times as int ms and as datetimes) and message annotations → ``msg.properties`` and
    ``msg.annotations``."""

    def rstream_properties(i: int) -> Properties:
        # rstream encodes a datetime too, though its hint says int (ms)
        created: Any = BEFORE_1970 if i == 2 else CREATED + timedelta(milliseconds=i)
        return Properties(
            message_id=IDS[i],
            user_id=b"\x00rs\xff" + bytes([i]),
            to=f"/queues/rs-é-{i}",
            subject="é" * 200 if i == 1 else "sujet-rs-日本",  # 400 bytes: str32
            reply_to="/queues/réponse-rs",
            correlation_id=IDS[(i + 1) % 4],
            content_type="application/json",
            content_encoding="gzip",
            absolute_expiry_time=EXPIRY_MS + i,
            creation_time=created,
            group_id="groupe-rs",
            group_sequence=(0, 1, 2**32 - 1, 77)[i],
            reply_to_group_id=f"rg-é-{i}",
        )

    annotations: dict[str, object] = {
        "x-opt-a": "α",
        "x-opt-n": 5,
        "x-opt-big": 5_000_000_000,
        "x-opt-u": UUID,
        "x-opt-b": b"\x01",
        "x-opt-bool": True,
        "x-opt-ul": _typed(AMQPTypes.ulong, 2**64 - 1),
        "x-opt-sym": _typed(AMQPTypes.symbol, "a-symbol"),
        "x-opt-ts": _typed(AMQPTypes.timestamp, TS_MS),
    }
    messages = [
        AMQPMessage(
            body=f"r{i}".encode(),
            properties=rstream_properties(i),
            message_annotations=annotations,
            application_properties={"i": i},
        )
        for i in range(4)
    ]
    messages.append(AMQPMessage(body=b"one field", properties=Properties(correlation_id="only")))
    async with rstream_producer(broker) as producer:
        for amqp_message in messages:
            await producer.send_wait(stream, amqp_message)

    got = await streamwire_read(client, stream, 5, settle=0.3)
    assert [m.value for m in got] == [b"r0", b"r1", b"r2", b"r3", b"one field"]
    for i, message in enumerate(got[:4]):
        assert_properties(
            message.properties,
            MessageProperties(
                message_id=IDS[i],
                user_id=b"\x00rs\xff" + bytes([i]),
                to=f"/queues/rs-é-{i}",
                subject="é" * 200 if i == 1 else "sujet-rs-日本",
                reply_to="/queues/réponse-rs",
                correlation_id=IDS[(i + 1) % 4],
                content_type="application/json",
                content_encoding="gzip",
                absolute_expiry_time=ms(EXPIRY_MS + i),
                creation_time=BEFORE_1970 if i == 2 else CREATED + timedelta(milliseconds=i),
                group_id="groupe-rs",
                group_sequence=(0, 1, 2**32 - 1, 77)[i],
                reply_to_group_id=f"rg-é-{i}",
            ),
        )
        assert message.annotations == {
            "x-opt-a": HeaderValue.string("α"),
            "x-opt-n": HeaderValue.int32(5),
            "x-opt-big": HeaderValue.int64(5_000_000_000),
            "x-opt-u": HeaderValue.uint128(UUID.int),
            "x-opt-b": HeaderValue.raw(b"\x01"),
            "x-opt-bool": HeaderValue.boolean(True),
            "x-opt-ul": HeaderValue.uint64(2**64 - 1),
            "x-opt-sym": HeaderValue.string("a-symbol"),
            "x-opt-ts": HeaderValue.int64(TS_MS),
        }
        assert application_headers(message) == {"i": HeaderValue.int32(i)}
        assert message.key is None
    assert_properties(got[4].properties, MessageProperties(correlation_id="only"))
    assert got[4].headers == {"amqp.correlation-id": HeaderValue.string("only")}
    assert got[4].annotations == {}

    # literal times, independent of the helpers: 07:08:09.123Z, and 1 ms before 1970
    first, third = got[0].properties, got[2].properties
    assert first is not None
    assert third is not None
    assert first.creation_time == datetime(2024, 5, 6, 7, 8, 9, 123_000, UTC)
    assert first.absolute_expiry_time == datetime(2023, 11, 14, 22, 13, 20, 123_000, UTC)
    assert third.creation_time == datetime(1969, 12, 31, 23, 59, 59, 999_000, UTC)
    # the reserved headers carrying them: ids by kind (a ulong, then a uuid correlation id)
    assert got[0].headers["amqp.message-id"] == HeaderValue.uint64(2**64 - 1)
    assert got[0].headers["amqp.correlation-id"] == HeaderValue.uint128(UUID.int)
    assert got[0].headers["amqp.creation-time"] == HeaderValue.int64(1_714_979_289_123)
    assert got[0].headers["amqp.group-sequence"] == HeaderValue.uint32(0)
    assert got[2].headers["amqp.creation-time"] == HeaderValue.int64(-1)

    # the AMQP types rstream wrote, read by streamwire's AMQP codec from the raw records
    raw = await streamwire_read(client, stream, 4, amqp=False)
    sections = [amqp.decode_message(r.value).properties for r in raw]
    assert [type(p.message_id) for p in sections if p is not None] == [
        amqp.ULong,
        uuid.UUID,
        bytes,
        str,
    ]
    assert sections[0] is not None
    assert type(sections[0].content_type) is amqp.Symbol
    assert type(sections[0].creation_time) is amqp.Timestamp
    assert type(sections[0].absolute_expiry_time) is amqp.Timestamp


async def test_streamwire_properties_to_rstream(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """streamwire messages with every property set (each id type, times in and out of UTC and
    before 1970) and annotations → what rstream's ``amqp_decoder`` gives for each field."""
    expiry = datetime(2024, 5, 6, 7, 8, 9, 123_000, timezone(timedelta(hours=-5)))

    def properties(i: int) -> MessageProperties:
        return MessageProperties(
            message_id=IDS[i],
            user_id=b"\x00sw\xff" + bytes([i]),
            to=f"/queues/sw-é-{i}",
            subject="é" * 200 if i == 3 else "sujet-sw-日本",
            reply_to="/queues/réponse-sw",
            correlation_id=IDS[(i + 1) % 4],
            content_type="text/plain",
            content_encoding="utf-8",
            absolute_expiry_time=expiry + timedelta(milliseconds=i),
            creation_time=BEFORE_1970 if i == 1 else CREATED + timedelta(milliseconds=i),
            group_id="groupe-sw",
            group_sequence=(2**32 - 1, 0, 1, 42)[i],
            reply_to_group_id=f"rg-é-{i}",
        )

    annotations: dict[str, HeaderInput] = {
        "x-opt-a": "α",
        "x-opt-n": HeaderValue.int64(-5_000_000_000),
        "x-opt-u32": HeaderValue.uint32(4_000_000_000),
        "x-opt-u": HeaderValue.uint128(UUID.int),
        "x-opt-b": b"\x00\x01",
        "x-opt-bool": True,
    }
    async with client.producer(stream) as producer:
        for i in range(4):
            await producer.send_and_wait(
                Message(
                    f"p{i}".encode(),
                    key=b"k0" if i == 0 else None,
                    properties=properties(i),
                    annotations=annotations,
                )
            )
        await producer.send_and_wait(Message(b"subject", properties=MessageProperties(subject="s")))
        await producer.send_and_wait(Message(b"annotated", annotations={"x-opt-only": 1}))

    got = await rstream_read(broker, stream, 6)
    assert [m.body for _, m in got] == [b"p0", b"p1", b"p2", b"p3", b"subject", b"annotated"]

    def as_rstream(value: MessageId) -> object:
        """rstream's view of an id: a string id comes back as its UTF-8 bytes."""
        return value.encode() if isinstance(value, str) else value

    for i, (_, message) in enumerate(got[:4]):
        sent = properties(i)
        assert sent.creation_time is not None
        assert message.properties == Properties(
            message_id=as_rstream(IDS[i]),
            user_id=b"\x00sw\xff" + bytes([i]),
            to=f"/queues/sw-é-{i}".encode(),
            subject=("é" * 200 if i == 3 else "sujet-sw-日本").encode(),
            reply_to="/queues/réponse-sw".encode(),
            correlation_id=as_rstream(IDS[(i + 1) % 4]),
            content_type=b"text/plain",
            content_encoding=b"utf-8",
            absolute_expiry_time=to_ms(expiry) + i,
            creation_time=to_ms(sent.creation_time),
            group_id=b"groupe-sw",
            group_sequence=(2**32 - 1, 0, 1, 42)[i],
            reply_to_group_id=f"rg-é-{i}".encode(),
        )
        # and field for field by Python type (tuple equality alone takes True for 1)
        assert [type(v) for v in message.properties] == [
            type(as_rstream(IDS[i])),
            bytes,
            bytes,
            bytes,
            bytes,
            type(as_rstream(IDS[(i + 1) % 4])),
            bytes,
            bytes,
            int,
            int,
            bytes,
            int,
            bytes,
        ]
        assert message.message_annotations == {
            b"x-opt-a": "α".encode(),
            b"x-opt-n": -5_000_000_000,
            b"x-opt-u32": 4_000_000_000,
            b"x-opt-u": UUID,
            b"x-opt-b": b"\x00\x01",
            b"x-opt-bool": True,
            **({b"x-streamwire-key": b"k0"} if i == 0 else {}),
        }
        assert message.application_properties is None  # the reserved headers are not sent as such
    # literal ms, independent of the helpers
    times = [(m.properties.absolute_expiry_time, m.properties.creation_time) for _, m in got[:4]]
    assert times == [
        (1_714_997_289_123, 1_714_979_289_123),
        (1_714_997_289_124, -1),
        (1_714_997_289_125, 1_714_979_289_125),
        (1_714_997_289_126, 1_714_979_289_126),
    ]
    subject_only = got[4][1]
    assert subject_only.properties == Properties(subject=b"s")
    assert subject_only.message_annotations is None
    annotated = got[5][1]
    assert annotated.properties is None
    assert annotated.message_annotations == {b"x-opt-only": 1}


async def test_streamwire_raw_to_rstream_binary(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """streamwire with ``amqp=False`` → rstream without a decoder: the same bytes."""
    payloads = [b"raw-1", bytes(range(256)), "日本".encode()]
    async with client.producer(stream, amqp=False) as producer:
        for payload in payloads:
            await producer.send_and_wait(payload)
    got = await rstream_read(broker, stream, len(payloads), amqp=False)
    assert got == list(enumerate(payloads))


async def test_named_streamwire_producer_deduplicates_seen_by_rstream(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """A named streamwire producer re-sending publishing ids (a crash replay, in a new
    producer and within the same one) stores each message once; rstream reads them."""
    async with client.producer(stream, name="sw-dedup") as producer:
        for i in range(1, 6):
            await producer.send_and_wait(f"m{i}".encode())
    async with client.producer(stream, name="sw-dedup") as producer:
        assert producer.next_publishing_id == 6
        replay = [await producer.send(f"m{i}".encode(), publishing_id=i) for i in range(1, 6)]
        await producer.flush()
        confirmed = [f.result().publishing_id for f in replay]
        assert confirmed == [1, 2, 3, 4, 5]  # confirmed, not stored again
        await producer.send_and_wait(b"m6")
        # re-send ids 4 and 6 again, from the same producer
        await producer.send_and_wait(b"m4", publishing_id=4)
        await producer.send_and_wait(b"m6", publishing_id=6)
        await producer.send_and_wait(b"m7")
        assert producer.last_publishing_id == 7

    got = await rstream_read(broker, stream, 7, settle=0.5)
    assert [(offset, m.body) for offset, m in got] == [
        (i - 1, f"m{i}".encode()) for i in range(1, 8)
    ]


async def test_rstream_named_publisher_sequence_continues_in_streamwire(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """Dedup across clients: a named rstream publisher writes ids 1..3; a streamwire
    producer with the same name resumes at 4 and its replay of id 3 is not stored."""
    async with rstream_producer(broker) as producer:
        for i in range(1, 4):
            await producer.send_wait(
                stream, AMQPMessage(body=f"r{i}".encode()), publisher_name="shared-ref"
            )
    async with client.producer(stream, name="shared-ref") as producer:
        assert producer.next_publishing_id == 4
        await producer.send_and_wait(b"r3", publishing_id=3)
        await producer.send_and_wait(b"s4")
    got = await rstream_read(broker, stream, 4, settle=0.5)
    assert [m.body for _, m in got] == [b"r1", b"r2", b"r3", b"s4"]


async def test_rstream_reads_while_streamwire_publishes(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """Many messages in several chunks: rstream sees every streamwire message in order."""
    n = 2000
    async with client.producer(stream) as producer:
        await producer.send_batch(
            [Message(str(i).encode(), headers={"n": HeaderValue.uint32(i)}) for i in range(n)]
        )
        await producer.flush()
    got = await rstream_read(broker, stream, n)
    assert [offset for offset, _ in got] == list(range(n))
    assert [m.body for _, m in got] == [str(i).encode() for i in range(n)]
    assert [m.application_properties[b"n"] for _, m in got] == list(range(n))


async def test_rstream_and_streamwire_interleaved(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """Both clients publishing to one stream; each reader sees the other's messages."""
    async with rstream_producer(broker) as rs, client.producer(stream) as sw:
        for i in range(5):
            await rs.send_wait(stream, AMQPMessage(body=f"rs{i}".encode()))
            await sw.send_and_wait(f"sw{i}".encode(), headers={"i": i})
    expected = [f"{who}{i}".encode() for i in range(5) for who in ("rs", "sw")]
    seen_by_sw, seen_by_rs = await asyncio.gather(
        streamwire_read(client, stream, 10), rstream_read(broker, stream, 10)
    )
    assert [m.value for m in seen_by_sw] == expected
    assert [m.body for _, m in seen_by_rs] == expected
    assert [m.headers.get("i") for m in seen_by_sw[1::2]] == [
        HeaderValue.int64(i) for i in range(5)
    ]


async def test_rstream_sub_entry_batches_to_streamwire(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """rstream sub-entry batches (uncompressed and gzip) between simple entries →
    streamwire expands them with one offset per record, also when starting mid-batch."""
    confirmed: list[object] = []
    all_confirmed = asyncio.Event()

    async def on_confirm(status: ConfirmationStatus) -> None:
        confirmed.append(status)
        if len(confirmed) == 2:
            all_confirmed.set()

    plain_batch = [
        AMQPMessage(body=f"n{i}".encode(), application_properties={"i": i}) for i in range(4)
    ]
    gzip_batch = [AMQPMessage(body=f"g{i}".encode() * 50) for i in range(5)]
    async with rstream_producer(broker) as producer:
        await producer.send_wait(stream, AMQPMessage(body=b"before"))
        await producer.send_sub_entry(
            stream, plain_batch, CompressionType.No, on_publish_confirm=on_confirm
        )
        await producer.send_sub_entry(
            stream, gzip_batch, CompressionType.Gzip, on_publish_confirm=on_confirm
        )
        async with asyncio.timeout(10):
            await all_confirmed.wait()
        await producer.send_wait(stream, AMQPMessage(body=b"after"))
    assert all(getattr(status, "is_confirmed", False) for status in confirmed)

    expected = [b"before", *(f"n{i}".encode() for i in range(4))]
    expected += [f"g{i}".encode() * 50 for i in range(5)] + [b"after"]
    got = await streamwire_read(client, stream, len(expected), settle=0.3)
    assert [m.value for m in got] == expected
    assert [m.offset for m in got] == list(range(len(expected)))
    assert [m.headers for m in got[1:5]] == [{"i": HeaderValue.int32(i)} for i in range(4)]
    async with client.consumer(stream, offset=Offset.at(7)) as consumer:  # inside the gzip batch
        mid = await consumer.next_batch(100, timeout=10)
        while len(mid) < len(expected) - 7:
            more = await consumer.next_batch(100, timeout=10)
            assert more, f"only {len(mid)} messages from offset 7"
            mid += more
    assert [m.offset for m in mid] == list(range(7, len(expected)))
    assert [m.value for m in mid] == expected[7:]


async def test_streamwire_gzip_sub_batches_to_rstream(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    """Our gzip sub-batches (one publishing id per 10 messages) are read by rstream, which
    expands them with its own codec: the bytes of the entry format agree."""
    values = [f"gz-{i}".encode() for i in range(35)]
    async with client.producer(stream, sub_batch_size=10, compression="gzip") as producer:
        await producer.send_batch(values)
        await producer.flush()
    got = await rstream_read(broker, stream, 35)
    assert [offset for offset, _ in got] == list(range(35))
    assert [bytes(message.body) for _, message in got] == values
