"""Golden vectors for AMQP message sections (the type codes of docs/amqp.md, hand-derived
from the AMQP 1.0 specification, part 3 "Messaging"), the section rules, and the fast
paths."""

from __future__ import annotations

import uuid
from typing import Any, cast

import pytest

from streamwire.codec.amqp import (
    AmqpMessage,
    AmqpSequence,
    AmqpValue,
    Array,
    Data,
    Described,
    Header,
    MessageId,
    Properties,
    SimpleValue,
    Symbol,
    Timestamp,
    UInt,
    ULong,
    decode_message,
    encode_message,
)
from streamwire.codec.amqp import message as message_module
from streamwire.codec.amqp._sections import read_message
from streamwire.codec.reader import Reader
from streamwire.errors import DecodeError, LocalProtocolError
from tests.unit.codec.amqp.support import (
    assert_prefixes_fail,
    assert_same,
    assert_trailing_fails,
)


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


DATA_M0 = "00 53 75 a0 02 6d30"

# (bytes, message): encode(message) == bytes and decode(bytes) is message, types included
CANONICAL: list[tuple[str, AmqpMessage]] = [
    # notes §3.2: a bytes body as both peers emit it ("m0" here, "hello" in the notes)
    (DATA_M0, AmqpMessage(b"m0")),
    ("00 53 75 a0 05 68656c6c6f", AmqpMessage(b"hello")),
    ("00 53 75 a0 00", AmqpMessage(b"")),
    ("00 53 75 a0 ff" + "78" * 255, AmqpMessage(b"x" * 255)),
    ("00 53 75 b0 00000100" + "78" * 256, AmqpMessage(b"x" * 256)),
    # notes §3.2: rbfly encodes str bodies as amqp-value str8
    ("00 53 77 a1 08 636166c3a92dc39f", AmqpMessage(AmqpValue("café-ß"))),
    # notes §3.2: rstream's application properties {"k": "v"} before the data section
    (
        "00 53 74 c1 07 02 a1016b a10176" + DATA_M0,
        AmqpMessage(b"m0", application_properties={"k": "v"}),
    ),
    (
        "00 53 74 c1 12 02 a108636166c3a92dc39f a105c3bce282ac" + DATA_M0,
        AmqpMessage(b"m0", application_properties={"café-ß": "ü€"}),
    ),
    ("00 53 70 45" + DATA_M0, AmqpMessage(b"m0", header=Header())),
    ("00 53 70 c0 02 01 41" + DATA_M0, AmqpMessage(b"m0", header=Header(durable=True))),
    (
        "00 53 70 c0 0b 05 40 5009 40 40 700000012c" + DATA_M0,
        AmqpMessage(b"m0", header=Header(priority=9, delivery_count=300)),
    ),
    ("00 53 70 c0 04 03 40 40 43" + DATA_M0, AmqpMessage(b"m0", header=Header(ttl=0.0))),
    ("00 53 73 45" + DATA_M0, AmqpMessage(b"m0", properties=Properties())),
    (
        "00 53 73 c0 16 07 a1026964 4040404040 a30a746578742f706c61696e" + DATA_M0,
        AmqpMessage(
            b"m0", properties=Properties(message_id="id", content_type=Symbol("text/plain"))
        ),
    ),
    (
        "00 53 73 c0 0f 0c 5307" + "40" * 10 + "5205" + DATA_M0,
        AmqpMessage(b"m0", properties=Properties(message_id=ULong(7), group_sequence=5)),
    ),
    (
        "00 53 72 c1 0a 02 a305782d6f7074 5501" + DATA_M0,
        AmqpMessage(b"m0", message_annotations={Symbol("x-opt"): 1}),
    ),
    (
        "00 53 71 c1 07 02 a303782d64 40" + DATA_M0,
        AmqpMessage(b"m0", delivery_annotations={Symbol("x-d"): None}),
    ),
    ("00 53 75 a0 01 61 00 53 75 a0 01 62", AmqpMessage(Data(b"a", b"b"))),
    ("00 53 76 c0 03 01 5501 00 53 76 45", AmqpMessage(AmqpSequence([1], []))),
    ("00 53 77 45", AmqpMessage(AmqpValue([]))),
    ("00 53 77 40", AmqpMessage(AmqpValue(None))),
    ("00 53 77 a0 02 6d30", AmqpMessage(AmqpValue(b"m0"))),  # what proton sends for bytes
]

# messages with a footer: the prefix that stops right before the footer is itself valid
WITH_FOOTER: list[tuple[str, str, AmqpMessage]] = [
    (DATA_M0, "00 53 78 c1 05 02 5301 a000", AmqpMessage(b"m0", footer={ULong(1): b""})),
    (
        "00 53 70 c0 02 01 41 00 53 71 c1 07 02 a303782d64 40 00 53 72 c1 0a 02 a305782d6f7074"
        " 5501 00 53 73 c0 16 07 a1026964 4040404040 a30a746578742f706c61696e 00 53 74 c1 07"
        " 02 a1016b a10176" + DATA_M0,
        "00 53 78 c1 08 02 a303782d66 5501",
        AmqpMessage(
            b"m0",
            header=Header(durable=True),
            delivery_annotations={Symbol("x-d"): None},
            message_annotations={Symbol("x-opt"): 1},
            properties=Properties(message_id="id", content_type=Symbol("text/plain")),
            application_properties={"k": "v"},
            footer={Symbol("x-f"): 1},
        ),
    ),
]


def ids(cases: list[tuple[str, AmqpMessage]]) -> list[str]:
    return [c[0][:40] for c in cases]


@pytest.mark.parametrize(("hexa", "msg"), CANONICAL, ids=ids(CANONICAL))
def test_canonical_message(hexa: str, msg: AmqpMessage) -> None:
    data = h(hexa)
    assert encode_message(msg) == data
    assert_same(decode_message(data), msg)
    assert_same(decode_message(memoryview(data)), msg)
    assert_same(decode_message(bytearray(data)), msg)
    if not isinstance(msg.body, (Data, AmqpSequence)):  # those have valid proper prefixes
        assert_prefixes_fail(data, decode_message)
    assert_trailing_fails(data, decode_message)


@pytest.mark.parametrize(("head", "footer", "msg"), WITH_FOOTER)
def test_message_with_footer(head: str, footer: str, msg: AmqpMessage) -> None:
    data = h(head + footer)
    assert encode_message(msg) == data
    assert_same(decode_message(data), msg)
    cut = len(h(head))
    for n in range(len(data)):
        if n == cut:
            without = decode_message(data[:n])
            assert without.footer is None
            assert without.body == msg.body
        else:
            try:
                early = decode_message(data[:n])
            except DecodeError:
                continue
            assert early.body == b"", "only a prefix that stops before the body may decode"
    assert_trailing_fails(data, decode_message)


# other descriptor forms and orders a decoder must accept
ACCEPTED: list[tuple[str, AmqpMessage]] = [
    ("00 80 0000000000000075 a0 02 6d30", AmqpMessage(b"m0")),
    ("00 a3 10 616d71703a646174613a62696e617279 a0 02 6d30", AmqpMessage(b"m0")),
    ("00 b3 00000010 616d71703a646174613a62696e617279 b0 00000002 6d30", AmqpMessage(b"m0")),
    ("00 a3 0c 616d71703a76616c75653a2a a1 01 78", AmqpMessage(AmqpValue("x"))),
    (
        "00 a3 1f 616d71703a6170706c69636174696f6e2d70726f706572746965733a6d6170 c1 01 00"
        + DATA_M0,
        AmqpMessage(b"m0", application_properties={}),
    ),
    # rstream 1.1.1 writes delivery annotations after the body and the footer
    (
        DATA_M0 + "00 53 78 c1 05 02 5301 a000 00 53 71 c1 07 02 a303782d64 40",
        AmqpMessage(b"m0", footer={ULong(1): b""}, delivery_annotations={Symbol("x-d"): None}),
    ),
    # proton: header and properties always present, map32/list32 even when small
    (
        "00 53 70 45 00 53 73 45 00 53 74 d1 0000000a 00000002 a1016b a10176 00 53 77 40",
        AmqpMessage(
            AmqpValue(None),
            header=Header(),
            properties=Properties(),
            application_properties={"k": "v"},
        ),
    ),
    (
        "00 53 70 c0 0c 05 41 50 07 70 000005dc 41 52 02" + DATA_M0,
        AmqpMessage(b"m0", header=Header(True, 7, 1.5, True, 2)),
    ),
]


@pytest.mark.parametrize(("hexa", "msg"), ACCEPTED, ids=ids(ACCEPTED))
def test_other_descriptor_forms_and_orders_decode(hexa: str, msg: AmqpMessage) -> None:
    assert_same(decode_message(h(hexa)), msg)


def test_sections_without_a_body_mean_an_empty_body() -> None:
    # rstream leaves the body out when it is empty; the Java client reads an empty body.
    msg = decode_message(h("00 53 74 c1 0c 04 a1 01 61 a1 01 76 a1 01 6e 54 01"))
    assert msg.body == b""
    assert msg.application_properties == {"a": "v", "n": 1}
    assert decode_message(h("00 53 70 45")).body == b""


REFUSED: list[tuple[str, str, int | None]] = [
    ("", "no body section", 0),
    ("40", "expected an AMQP message section", 0),
    ("00 53 79 40", r"unknown AMQP message section descriptor ULong\(121\)", 0),
    ("00 44 40", r"unknown AMQP message section descriptor ULong\(0\)", 0),
    ("00 a3 03 616263 40", r"unknown AMQP message section descriptor Symbol\('abc'\)", 0),
    ("00 a1 01 75 a000", "descriptor must be a ulong or a symbol", 1),
    ("00 53 70 40" + DATA_M0, "header section holds type 0x40", 3),
    ("00 53 75 a1 01 61", "data section holds type 0xa1", 3),
    ("00 53 76 40", "amqp-sequence section holds type 0x40", 3),
    ("00 53 72 45" + DATA_M0, "annotations section holds type 0x45", 3),
    ("00 53 70 45 00 53 70 45" + DATA_M0, "duplicate amqp:header:list section", 4),
    ("00 53 73 45" + DATA_M0 + "00 53 73 45", "duplicate amqp:properties:list section", 11),
    (DATA_M0 + "00 53 77 40", "unexpected amqp:value:\\* section", 7),
    ("00 53 77 40 00 53 77 40", "unexpected amqp:value:\\* section", 4),
    ("00 53 77 40" + DATA_M0, "unexpected amqp:data:binary section", 4),
    (DATA_M0 + "00 53 74 c1 01 00" + DATA_M0, "body sections must be one run", 13),
    ("00 53 70 c0 07 06 404040404040" + DATA_M0, "header list has 6 fields", 3),
    ("00 53 73 c0 0f 0e" + "40" * 14 + DATA_M0, "properties list has 14 fields", 3),
    ("00 53 70 c0 03 01 5501" + DATA_M0, "header durable not a bool", 3),
    ("00 53 70 c0 04 02 40 5201" + DATA_M0, "header priority not a ubyte", 3),
    ("00 53 70 c0 05 03 40 40 5501" + DATA_M0, "header ttl not a uint", 3),
    ("00 53 73 c0 04 01 a30161" + DATA_M0, "properties message_id is a Symbol", 3),
    ("00 53 73 c0 05 02 40 a10161" + DATA_M0, "properties user_id is a str", 3),
    ("00 53 73 c0 05 03 404052 01" + DATA_M0, "properties to is a UInt", 3),
    ("00 53 74 c1 05 02 a3016b 40" + DATA_M0, "application property key", 3),
    ("00 53 74 c1 05 02 a1016b 45" + DATA_M0, "not a simple value", 3),
    ("00 53 74 c1 08 02 a1016b 00530145" + DATA_M0, "not a simple value", 3),
    ("00 53 72 c1 05 02 a1016b 40" + DATA_M0, "neither a symbol nor a ulong", 3),
    ("00 53 72 c1 04 02 5501 40" + DATA_M0, "neither a symbol nor a ulong", 3),
    ("00 53 75 a0 05 6d30", "need 5 bytes, 2 left", 5),
]


@pytest.mark.parametrize(("hexa", "message", "offset"), REFUSED, ids=[r[0][:40] for r in REFUSED])
def test_malformed_messages_raise_decode_error(hexa: str, message: str, offset: int) -> None:
    with pytest.raises(DecodeError, match=message) as info:
        decode_message(h(hexa))
    assert info.value.offset == offset
    assert info.value.frame == "AMQP message"


@pytest.mark.parametrize(
    "msg",
    [
        AmqpMessage(b"", application_properties=cast(Any, {"k": [1]})),
        AmqpMessage(b"", application_properties=cast(Any, {"k": {}})),
        AmqpMessage(b"", application_properties=cast(Any, {"k": (1,)})),
        AmqpMessage(b"", application_properties=cast(Any, {"k": Array(UInt, [])})),
        AmqpMessage(b"", application_properties=cast(Any, {"k": Described(1, 1)})),
        AmqpMessage(b"", application_properties=cast(Any, {1: "v"})),
        AmqpMessage(b"", application_properties=cast(Any, {"k": object()})),
        AmqpMessage(b"", message_annotations={1.5: 1}),
        AmqpMessage(b"", message_annotations={True: 1}),
        AmqpMessage(b"", message_annotations={"é": 1}),
        AmqpMessage(b"", footer={-1: 1}),
        AmqpMessage(b"", header=Header(priority=256)),
        AmqpMessage(b"", header=Header(ttl=-0.001)),
        AmqpMessage(b"", header=Header(ttl=float("nan"))),
        AmqpMessage(b"", header=Header(ttl=4_294_967.296)),
        AmqpMessage(b"", header=Header(durable=1)),  # type: ignore[arg-type]
        AmqpMessage(b"", header=Header(delivery_count=-1)),
        AmqpMessage(b"", header=Header(priority="x")),  # type: ignore[arg-type]
        AmqpMessage(b"", header=Header(delivery_count=1.5)),  # type: ignore[arg-type]
        AmqpMessage(b"", properties=Properties(to=5)),  # type: ignore[arg-type]
        AmqpMessage(b"", properties=Properties(message_id=-1)),
        AmqpMessage(b"", properties=Properties(message_id=True)),
        AmqpMessage(b"", properties=Properties(message_id=1.5)),  # type: ignore[arg-type]
        AmqpMessage(b"", properties=Properties(group_sequence=2**32)),
        AmqpMessage(b"", properties=Properties(user_id="me")),  # type: ignore[arg-type]
        AmqpMessage(b"", properties=Properties(subject="\ud800")),
        AmqpMessage(AmqpValue(object())),
        AmqpMessage(AmqpSequence([object()])),
    ],
    ids=repr,
)
def test_unencodable_messages_raise_local_protocol_error(msg: AmqpMessage) -> None:
    with pytest.raises(LocalProtocolError):
        encode_message(msg)


@pytest.mark.parametrize("body", ["text", 5, None, Data(), AmqpSequence()])
def test_bodies_are_checked_on_construction(body: Any) -> None:
    with pytest.raises(LocalProtocolError):
        AmqpMessage(body)


def test_construction_normalises_convenience_types() -> None:
    assert AmqpMessage(Data(b"a")).body == b"a"
    assert type(AmqpMessage(bytearray(b"a")).body) is bytes  # type: ignore[arg-type]
    assert AmqpMessage(Data(b"a", bytearray(b"b"))).body_bytes == b"ab"
    assert AmqpMessage(b"x").body_bytes == b"x"
    assert AmqpMessage(AmqpValue(b"x")).body_bytes is None
    props = Properties(
        content_type="text/plain",  # type: ignore[arg-type]
        creation_time=5,  # type: ignore[arg-type]
        user_id=bytearray(b"u"),  # type: ignore[arg-type]
    )
    assert type(props.content_type) is Symbol
    assert type(props.creation_time) is Timestamp
    assert type(props.user_id) is bytes
    with pytest.raises(LocalProtocolError):
        Properties(content_type="é")  # type: ignore[arg-type]


def test_properties_accept_every_message_id_kind() -> None:
    cases: list[tuple[MessageId, str]] = [
        (5, "53 05"),
        (uuid.UUID(int=1), "98" + "00" * 15 + "01"),
        (b"\x01", "a0 01 01"),
        ("é", "a1 02 c3a9"),
        (Symbol("s"), "a1 01 73"),  # a symbol-typed id is sent as the string it is
    ]
    for mid, wire in cases:
        data = encode_message(AmqpMessage(b"", properties=Properties(message_id=mid)))
        assert data.startswith(h("00 53 73 c0") + bytes([len(h(wire)) + 1, 1]) + h(wire))
        decoded = decode_message(data).properties
        assert decoded is not None
        assert decoded.message_id == mid


def test_application_properties_keep_value_types() -> None:
    props: dict[str, SimpleValue] = {
        "u": UInt(1),
        "s": Symbol("x"),
        "t": Timestamp(2),
        "n": None,
        "b": b"",
        "i": -1,
    }
    msg = AmqpMessage(b"", application_properties=props)
    decoded = decode_message(encode_message(msg))
    assert_same(decoded.application_properties, props)


# --- fast paths --------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 255, 256, 65536])
def test_data_body_fast_path_matches_the_generic_codec(size: int) -> None:
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    data = message_module.encode_data_body(body)
    assert data[:4] == (h("005375a0") if size < 256 else h("005375b0"))
    assert message_module.encode_data_body(bytearray(body)) == data
    assert message_module.encode_data_body(memoryview(body)) == data
    assert encode_message(AmqpMessage(body)) == data
    assert message_module.decode_data_body(data) == body
    assert message_module.decode_data_body(memoryview(data)) == body
    generic = read_message(Reader(data))
    assert_same(decode_message(data), generic)


def test_decode_message_does_not_walk_the_generic_decoder_for_a_lone_data_section(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(reader: object) -> AmqpMessage:
        raise AssertionError("generic decoder used")

    monkeypatch.setattr(message_module, "read_message", refuse)
    assert decode_message(h(DATA_M0)).body == b"m0"
    assert decode_message(h("005375b000000002 6d30")).body == b"m0"
    with pytest.raises(AssertionError, match="generic"):
        decode_message(h("00 53 77 40"))


@pytest.mark.parametrize(
    "hexa",
    [
        "",
        "00 53 75",
        "00 53 75 a0",
        "00 53 75 a0 03 6d30",  # truncated
        "00 53 75 a0 01 6d30",  # trailing byte
        "00 53 75 b0 000000",
        "00 53 75 b0 00000003 6d30",
        "00 53 75 a1 02 6d30",
        "00 53 77 a0 02 6d30",
        "00 80 0000000000000075 a0 02 6d30",
        "00 53 75 a0 01 61 00 53 75 a0 01 62",
        "00 53 74 c1 07 02 a1016b a10176" + DATA_M0,
    ],
)
def test_decode_data_body_declines_everything_but_one_data_section(hexa: str) -> None:
    assert message_module.decode_data_body(h(hexa)) is None
