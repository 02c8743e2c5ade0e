"""streamwire ↔ the RabbitMQ Java stream client (com.rabbitmq:stream-client, the reference
implementation; tests/interop/java), both directions, through the real broker.

The Java client can write every AMQP simple type as an application property, so this is
where streamwire's header kinds are checked one for one: byte/short/int/long ↔
Int8/16/32/64, unsigned ↔ Uint8/16/32/64, float ↔ Float32, double ↔ Float64, byte[] ↔ Raw,
String ↔ String, UUID ↔ Uint128. Types Java has and streamwire does not: symbol and char
arrive as String, timestamp as Int64 (ms).

Properties section and message annotations (observed with stream-client 1.4.0, whose
default codec is Qpid Proton-J):

* Java writes the message and correlation ids with the type it is given: ``messageId(long)`` →
  ulong (``-1L`` is 2**64 - 1), ``UUID`` → uuid, ``byte[]`` → binary, ``String`` → string;
  streamwire reads them as int, ``uuid.UUID``, bytes and str. The user id is binary, content
  type and encoding are symbols, the times are timestamps (ms; negative before 1970), the
  group sequence a uint; streamwire's :class:`MessageProperties` has them as bytes, str,
  aware UTC datetimes and int. Annotations set with ``entry(name, long)`` arrive as Int64,
  ``UUID`` as Uint128, ``entrySymbol`` as String, ``entryTimestamp`` as Int64 (ms);
* Java reading streamwire's properties (``com.rabbitmq.stream.Properties``): ids come back as
  Qpid's ``UnsignedLong``, ``UUID``, ``Binary`` and ``String``; the user id as ``byte[]``;
  the string fields (content type and encoding included) as ``String``; the times and the
  group sequence as primitive longs (ms; 0, 0 and -1 when not set). ``getProperties()`` is
  null for a message without a properties section. Annotations streamwire sends: String →
  ``String``, Int64 → ``Long``, Uint32 → ``UnsignedInteger``, Uint128 → ``UUID``, Raw →
  ``byte[]``, Bool → ``Boolean``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import streamwire.rabbitmq as rmq
from streamwire import HeaderValue, Message, MessageProperties
from streamwire.codec import amqp
from streamwire.codec.headers import HeaderInput
from streamwire.codec.properties import MessageId
from tests.brokers import BrokerInfo
from tests.interop.rabbitmq._peers import (
    application_headers,
    assert_properties,
    ms,
    streamwire_read,
    to_ms,
)
from tests.interop.rabbitmq.conftest import BUILD_TIMEOUTS, JavaInterop

pytestmark = [
    pytest.mark.interop,
    pytest.mark.integration,
    pytest.mark.rabbitmq,
    # the first test also builds the helper (java_interop fixture): room for that build
    pytest.mark.timeout(sum(BUILD_TIMEOUTS.values()) + 120),
]


UUID = uuid.UUID("12345678-1234-5678-1234-567812345678")
#: the high 64 bits of Interop.java's ``new UUID(0x0123456789abcdefL, i)``
_UUID_HIGH = 0x0123456789ABCDEF << 64


def _java_headers(i: int) -> dict[str, HeaderValue]:
    """What Interop.java's ``publish`` puts on message ``i``, as streamwire headers."""
    return {
        "s": HeaderValue.string("café-ß"),
        "clé-日本": HeaderValue.string("ü"),
        "empty": HeaderValue.string(""),
        "empty-bin": HeaderValue.raw(b""),
        "jp": HeaderValue.string("日本"),
        "i": HeaderValue.int32(i),
        "neg": HeaderValue.int32(-7),
        "l": HeaderValue.int64(5_000_000_000),
        "b": HeaderValue.boolean(True),
        "byte": HeaderValue.int8(-5),
        "short": HeaderValue.int16(-300),
        "ubyte": HeaderValue.uint8(200),
        "ushort": HeaderValue.uint16(65535),
        "uint": HeaderValue.uint32(4_000_000_000),
        "ulong": HeaderValue.uint64(2**64 - 1),
        "f": HeaderValue.float32(1.5),
        "d": HeaderValue.float64(2.25),
        "bin": HeaderValue.raw(b"\x00\xff\x07"),
        "sym": HeaderValue.string("a-symbol"),
        "ts": HeaderValue.int64(1_700_000_000_123),
        "uuid": HeaderValue.uint128(UUID.int),
        "ch": HeaderValue.string("λ"),
    }


def _java_message_id(i: int) -> MessageId:
    """Interop.java's ``messageId`` for message ``i``: ulong, uuid, binary, string in turn."""
    return (
        2**64 - 1 if i == 0 else 1_000_000 + i,  # messageId(-1L) is the largest ulong
        uuid.UUID(int=_UUID_HIGH | i),
        bytes([0xFF, 0, i & 0xFF]),
        f"java-id-{i}-é",
    )[i % 4]


def _java_correlation_id(i: int) -> MessageId:
    return (i, uuid.UUID(int=i), bytes([i & 0xFF]), f"corr-{i}")[(i + 1) % 4]


def _java_properties(i: int) -> MessageProperties:
    """What Interop.java's ``publish`` puts in message ``i``'s properties section."""
    return MessageProperties(
        message_id=_java_message_id(i),
        user_id=bytes([ord("u"), 0, 0xFF, i & 0xFF]),
        to="" if i == 10 else f"/queues/dest-é-{i}",
        subject="é" * 200 if i == 9 else "sujet-é",  # 400 UTF-8 bytes: str32
        reply_to="/queues/réponse",
        correlation_id=_java_correlation_id(i),
        content_type="application/json",
        content_encoding="gzip",
        absolute_expiry_time=ms(1_700_000_000_123 + i),
        creation_time=ms(-31_536_000_001 if i == 5 else 1_600_000_000_456 + i),
        group_id="groupe-日本",
        group_sequence=4_294_967_295 if i == 7 else i,
        reply_to_group_id=f"réponse-groupe-{i}",
    )


def _java_annotations(i: int) -> dict[str, HeaderValue]:
    """Interop.java's message annotations on message ``i``, as streamwire reads them."""
    return {
        "x-opt-a": HeaderValue.string(f"α-{i}"),
        "x-opt-n": HeaderValue.int64(i * 1_000_000_000),
        "x-opt-u": HeaderValue.uint128(_UUID_HIGH | i),
        "x-opt-sym": HeaderValue.string(f"sym-{i}"),  # symbol
        "x-opt-ts": HeaderValue.int64(1_700_000_000_123 + i),  # timestamp
    }


async def test_java_to_streamwire(
    broker: BrokerInfo, client: rmq.Client, stream: str, java_interop: JavaInterop
) -> None:
    n = 200  # several Java batches
    assert await java_interop.run(broker, "publish", stream, str(n)) == [{"published": n}]
    got = await streamwire_read(client, stream, n, settle=0.3)
    assert [m.offset for m in got] == list(range(n))
    assert [m.value for m in got] == [f"java-{i}".encode() for i in range(n)]
    for i, message in enumerate(got):
        expected = _java_headers(i)
        headers = application_headers(message)
        assert headers == expected
        assert {k: v.kind for k, v in headers.items()} == {k: v.kind for k, v in expected.items()}
        assert_properties(message.properties, _java_properties(i))
        assert message.annotations == _java_annotations(i)
        assert message.key is None

    # spot checks against literal values (not through the helpers above)
    assert got[0].properties is not None
    assert got[5].properties is not None
    assert got[0].properties.message_id == 18_446_744_073_709_551_615
    assert got[0].properties.creation_time == datetime(2020, 9, 13, 12, 26, 40, 456_000, UTC)
    assert got[0].properties.absolute_expiry_time == datetime(
        2023, 11, 14, 22, 13, 20, 123_000, UTC
    )
    assert got[5].properties.creation_time == datetime(1968, 12, 31, 23, 59, 59, 999_000, UTC)
    # the reserved headers that carry them, by name and kind (message 1: a uuid message id,
    # a binary correlation id)
    assert {k: v for k, v in got[1].headers.items() if k.startswith("amqp.")} == {
        "amqp.message-id": HeaderValue.uint128(_UUID_HIGH | 1),
        "amqp.user-id": HeaderValue.raw(b"u\x00\xff\x01"),
        "amqp.to": HeaderValue.string("/queues/dest-é-1"),
        "amqp.subject": HeaderValue.string("sujet-é"),
        "amqp.reply-to": HeaderValue.string("/queues/réponse"),
        "amqp.correlation-id": HeaderValue.raw(b"\x01"),
        "amqp.content-type": HeaderValue.string("application/json"),
        "amqp.content-encoding": HeaderValue.string("gzip"),
        "amqp.absolute-expiry-time": HeaderValue.int64(1_700_000_000_124),
        "amqp.creation-time": HeaderValue.int64(1_600_000_000_457),
        "amqp.group-id": HeaderValue.string("groupe-日本"),
        "amqp.group-sequence": HeaderValue.uint32(1),
        "amqp.reply-to-group-id": HeaderValue.string("réponse-groupe-1"),
        "amqp.annotation.x-opt-a": HeaderValue.string("α-1"),
        "amqp.annotation.x-opt-n": HeaderValue.int64(1_000_000_000),
        "amqp.annotation.x-opt-u": HeaderValue.uint128(_UUID_HIGH | 1),
        "amqp.annotation.x-opt-sym": HeaderValue.string("sym-1"),
        "amqp.annotation.x-opt-ts": HeaderValue.int64(1_700_000_000_124),
    }

    # the AMQP types Java wrote, read by streamwire's AMQP codec from the raw records
    raw = await streamwire_read(client, stream, 4, amqp=False)
    sections = [amqp.decode_message(r.value).properties for r in raw]
    assert all(p is not None for p in sections)
    assert [type(p.message_id) for p in sections if p is not None] == [
        amqp.ULong,
        uuid.UUID,
        bytes,
        str,
    ]
    first = sections[0]
    assert first is not None
    assert type(first.content_type) is amqp.Symbol
    assert type(first.content_encoding) is amqp.Symbol
    assert type(first.creation_time) is amqp.Timestamp
    assert type(first.absolute_expiry_time) is amqp.Timestamp
    assert first.creation_time == 1_600_000_000_456


#: message and correlation ids of streamwire's messages 4..7: one of each AMQP id type each
SW_MESSAGE_IDS: list[MessageId] = [2**64 - 1, UUID, b"\x00\xff\x10", "sw-id-é"]
SW_CORRELATION_IDS: list[MessageId] = ["corr-é", 0, uuid.UUID(int=1), b""]
SW_EXPIRY = datetime(2024, 5, 6, 7, 8, 9, 123_000, timezone(timedelta(hours=2)))
SW_CREATED = datetime(2001, 2, 3, 4, 5, 6, 789_000, UTC)
SW_BEFORE_1970 = datetime(1969, 12, 31, 23, 59, 59, 999_000, UTC)  # -1 ms


def _sw_properties(i: int) -> MessageProperties:
    """Every field set; ids, times, lengths and the group sequence vary with ``i``."""
    return MessageProperties(
        message_id=SW_MESSAGE_IDS[i],
        user_id=b"\x00sw\xff" + bytes([i]),
        to=f"/queues/sw-é-{i}",
        subject="é" * 200 if i == 2 else "sujet-sw-日本",
        reply_to="/queues/réponse-sw",
        correlation_id=SW_CORRELATION_IDS[i],
        content_type="application/octet-stream",
        content_encoding="utf-8",
        absolute_expiry_time=SW_EXPIRY + timedelta(milliseconds=i),
        creation_time=SW_BEFORE_1970 if i == 3 else SW_CREATED + timedelta(milliseconds=i),
        group_id="groupe-sw",
        group_sequence=(0, 1, 2**32 - 1, 123_456)[i],
        reply_to_group_id=f"rg-é-{i}",
    )


def _sw_annotations(i: int) -> dict[str, HeaderInput]:
    return {
        "x-opt-a": f"α-{i}",
        "x-opt-n": HeaderValue.int64(-5_000_000_000 + i),
        "x-opt-u32": HeaderValue.uint32(4_000_000_000),
        "x-opt-u": HeaderValue.uint128(UUID.int),
        "x-opt-b": b"\x00\x01",
        "x-opt-bool": True,
    }


def _java_id(value: MessageId) -> dict[str, Any]:
    """How Interop.java prints a streamwire id (``Properties.getMessageId()`` and co.)."""
    if isinstance(value, int):
        return {"type": "UnsignedLong", "value": str(value)}
    if isinstance(value, uuid.UUID):
        return {"type": "UUID", "value": str(value)}
    if isinstance(value, bytes):
        return {"type": "Binary", "value": value.hex()}
    return {"type": "String", "value": value}


def _java_string(value: str | None) -> dict[str, Any]:
    return {"type": "null", "value": None} if value is None else {"type": "String", "value": value}


async def test_streamwire_to_java(
    broker: BrokerInfo, client: rmq.Client, stream: str, java_interop: JavaInterop
) -> None:
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
        "u128": HeaderValue.uint128(UUID.int),  # sent as an AMQP uuid
        "b": False,
        "f32": HeaderValue.float32(1.5),
        "f64": 2.25,
        "r": b"\x00\xff",
        "clé-日本": "ü",
        "empty": "",
        "empty-raw": b"",
        "long": "é" * 200,
    }
    with_properties = [
        Message(
            f"p{i}".encode(),
            key=b"k4" if i == 0 else None,
            headers={"i": i},
            properties=_sw_properties(i),
            annotations=_sw_annotations(i),
        )
        for i in range(4)
    ]
    async with client.producer(stream) as producer:
        await producer.send_and_wait(b"v1", key="clé".encode(), headers=headers)
        await producer.send_and_wait(b"plain")
        await producer.send_and_wait(Message(b"v3", key=b"k3"))
        await producer.send_and_wait(b"q" * 70_000, headers={"big": True})
        for message in with_properties:
            await producer.send_and_wait(message)
        await producer.send_and_wait(
            Message(b"subject only", properties=MessageProperties(subject="s"))
        )
        await producer.send_and_wait(Message(b"annotation only", annotations={"x-opt-only": 1}))

    lines = await java_interop.run(broker, "consume", stream, "10")
    assert [line["offset"] for line in lines] == list(range(10))
    assert [bytes.fromhex(line["body_hex"]) for line in lines] == [
        b"v1",
        b"plain",
        b"v3",
        b"q" * 70_000,
        b"p0",
        b"p1",
        b"p2",
        b"p3",
        b"subject only",
        b"annotation only",
    ]
    assert lines[0]["props"] == {
        "s": {"type": "String", "value": "café-ß"},
        "jp": {"type": "String", "value": "日本"},
        "i8": {"type": "Byte", "value": "-5"},
        "i16": {"type": "Short", "value": "-300"},
        "i32": {"type": "Integer", "value": "100000"},
        "i64": {"type": "Long", "value": "5000000000"},
        "u8": {"type": "UnsignedByte", "value": "200"},
        "u16": {"type": "UnsignedShort", "value": "65535"},
        "u32": {"type": "UnsignedInteger", "value": "4000000000"},
        "u64": {"type": "UnsignedLong", "value": str(2**64 - 1)},
        "u128": {"type": "UUID", "value": str(UUID)},
        "b": {"type": "Boolean", "value": False},
        "f32": {"type": "Float", "value": "1.5"},
        "f64": {"type": "Double", "value": "2.25"},
        "r": {"type": lines[0]["props"]["r"]["type"], "value": "00ff"},
        "clé-日本": {"type": "String", "value": "ü"},
        "empty": {"type": "String", "value": ""},
        "empty-raw": {"type": lines[0]["props"]["r"]["type"], "value": ""},
        "long": {"type": "String", "value": "é" * 200},  # str32 inside a map32
    }
    assert lines[0]["props"]["r"]["type"] in ("byte[]", "Binary")
    key = lines[0]["annotations"]["x-streamwire-key"]
    assert bytes.fromhex(key["value"]) == "clé".encode()
    assert lines[1]["props"] == {}
    assert lines[1]["annotations"] == {}
    assert lines[2]["props"] == {}
    assert bytes.fromhex(lines[2]["annotations"]["x-streamwire-key"]["value"]) == b"k3"
    assert lines[3]["props"] == {"big": {"type": "Boolean", "value": True}}
    # no properties section without properties (the reserved headers are not sent as such)
    assert [line["properties"] for line in lines[:4]] == [None] * 4

    for i, line in enumerate(lines[4:8]):
        props = _sw_properties(i)
        assert props.absolute_expiry_time is not None
        assert props.creation_time is not None
        assert line["properties"] == {
            "message_id": _java_id(SW_MESSAGE_IDS[i]),
            "user_id": {"type": "byte[]", "value": (b"\x00sw\xff" + bytes([i])).hex()},
            "to": _java_string(f"/queues/sw-é-{i}"),
            "subject": _java_string(props.subject),
            "reply_to": _java_string("/queues/réponse-sw"),
            "correlation_id": _java_id(SW_CORRELATION_IDS[i]),
            "content_type": _java_string("application/octet-stream"),  # a symbol on the wire
            "content_encoding": _java_string("utf-8"),
            "absolute_expiry_time": {"type": "long", "value": to_ms(SW_EXPIRY) + i},
            "creation_time": {"type": "long", "value": to_ms(props.creation_time)},
            "group_id": _java_string("groupe-sw"),
            "group_sequence": {"type": "long", "value": props.group_sequence},
            "reply_to_group_id": _java_string(f"rg-é-{i}"),
        }
        assert line["annotations"] == {
            "x-opt-a": {"type": "String", "value": f"α-{i}"},
            "x-opt-n": {"type": "Long", "value": str(-5_000_000_000 + i)},
            "x-opt-u32": {"type": "UnsignedInteger", "value": "4000000000"},
            "x-opt-u": {"type": "UUID", "value": str(UUID)},
            "x-opt-b": {"type": "byte[]", "value": "0001"},
            "x-opt-bool": {"type": "Boolean", "value": True},
            **({"x-streamwire-key": {"type": "byte[]", "value": b"k4".hex()}} if i == 0 else {}),
        }
        assert line["props"] == {"i": {"type": "Long", "value": str(i)}}
    # literal values for the times (ms since the epoch), independent of the helpers
    times = [
        (
            line["properties"]["absolute_expiry_time"]["value"],
            line["properties"]["creation_time"]["value"],
        )
        for line in lines[4:8]
    ]
    assert times == [
        (1_714_972_089_123, 981_173_106_789),
        (1_714_972_089_124, 981_173_106_790),
        (1_714_972_089_125, 981_173_106_791),
        (1_714_972_089_126, -1),
    ]
    assert lines[4]["properties"]["message_id"]["value"] == "18446744073709551615"
    assert lines[4]["properties"]["group_sequence"]["value"] == 0
    assert lines[6]["properties"]["group_sequence"]["value"] == 4_294_967_295
    assert lines[7]["properties"]["correlation_id"] == {"type": "Binary", "value": ""}

    # only the subject set: Java's getters give null, 0 for the times, -1 for the sequence
    unset = _java_string(None)
    assert lines[8]["properties"] == {
        "message_id": unset,
        "user_id": unset,
        "to": unset,
        "subject": _java_string("s"),
        "reply_to": unset,
        "correlation_id": unset,
        "content_type": unset,
        "content_encoding": unset,
        "absolute_expiry_time": {"type": "long", "value": 0},
        "creation_time": {"type": "long", "value": 0},
        "group_id": unset,
        "group_sequence": {"type": "long", "value": -1},
        "reply_to_group_id": unset,
    }
    assert lines[8]["annotations"] == {}
    assert lines[8]["props"] == {}
    assert lines[9]["properties"] is None
    assert lines[9]["annotations"] == {"x-opt-only": {"type": "Long", "value": "1"}}
    assert lines[9]["props"] == {}
