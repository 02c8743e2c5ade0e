"""streamwire ↔ the RabbitMQ Java stream client (com.rabbitmq:stream-client, the reference
implementation; tests/interop/java), both directions, through the real broker.

The Java client can write every AMQP simple type as an application property, so this is
where streamwire's header kinds are checked one for one: byte/short/int/long ↔
Int8/16/32/64, unsigned ↔ Uint8/16/32/64, float ↔ Float32, double ↔ Float64, byte[] ↔ Raw,
String ↔ String. Types Java has and streamwire does not: symbol and char arrive as String,
timestamp as Int64 (ms), uuid as Raw (16 bytes).
"""

from __future__ import annotations

import uuid

import pytest

import streamwire.rabbitmq as rmq
from streamwire import HeaderValue, Message
from streamwire.codec import amqp
from streamwire.codec.headers import HeaderInput
from tests.brokers import BrokerInfo
from tests.interop.rabbitmq._peers import streamwire_read
from tests.interop.rabbitmq.conftest import BUILD_TIMEOUTS, JavaInterop

pytestmark = [
    pytest.mark.interop,
    pytest.mark.integration,
    pytest.mark.rabbitmq,
    # the first test also builds the helper (java_interop fixture): room for that build
    pytest.mark.timeout(sum(BUILD_TIMEOUTS.values()) + 120),
]


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
        "uuid": HeaderValue.raw(uuid.UUID("12345678-1234-5678-1234-567812345678").bytes),
        "ch": HeaderValue.string("λ"),
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
        assert message.headers == expected
        assert {k: v.kind for k, v in message.headers.items()} == {
            k: v.kind for k, v in expected.items()
        }
        assert message.key is None
    # the properties section Java wrote, read by streamwire's AMQP codec
    raw = await streamwire_read(client, stream, 1, amqp=False)
    props = amqp.decode_message(raw[0].value).properties
    assert props is not None
    assert props.message_id == "java-id-0"
    assert props.correlation_id == uuid.UUID("00000000-0000-0000-0000-000000000000")
    assert props.content_type == amqp.Symbol("text/plain")
    assert props.subject == "sujet-é"


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
        "b": False,
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
        await producer.send_and_wait(b"q" * 70_000, headers={"big": True})

    lines = await java_interop.run(broker, "consume", stream, "4")
    assert [line["offset"] for line in lines] == [0, 1, 2, 3]
    assert [bytes.fromhex(line["body_hex"]) for line in lines] == [
        b"v1",
        b"plain",
        b"v3",
        b"q" * 70_000,
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
