"""Golden vectors for every AMQP 1.0 type code at its boundaries, hand-derived from the
AMQP 1.0 specification (part 1, "Types"). Each canonical vector is checked both ways
(encode gives exactly these bytes; decode gives exactly this value, types included) and
fed whole, as every strict prefix, and with trailing bytes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from streamwire.codec.amqp import (
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Int,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
    decode_value,
    encode_value,
)
from tests.unit.codec.amqp.support import (
    assert_prefixes_fail,
    assert_same,
    assert_trailing_fails,
)

U = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
CAFE = "café-ß"  # 6 characters, 8 UTF-8 bytes
E127A = "é" * 127 + "a"  # 128 characters, 255 bytes: still str8
E128 = "é" * 128  # 128 characters, 256 bytes: str32 although under 255 characters


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


# (bytes, value): encode(value) == bytes and decode(bytes) is value, types included
CANONICAL: list[tuple[str, Any]] = [
    ("40", None),
    ("41", True),
    ("42", False),
    ("50 00", UByte(0)),
    ("50 ff", UByte(255)),
    ("51 80", Byte(-128)),
    ("51 7f", Byte(127)),
    ("60 0000", UShort(0)),
    ("60 ffff", UShort(65535)),
    ("61 8000", Short(-32768)),
    ("61 7fff", Short(32767)),
    ("43", UInt(0)),
    ("52 01", UInt(1)),
    ("52 ff", UInt(255)),
    ("70 00000100", UInt(256)),
    ("70 ffffffff", UInt(2**32 - 1)),
    ("44", ULong(0)),
    ("53 01", ULong(1)),
    ("53 ff", ULong(255)),
    ("80 0000000000000100", ULong(256)),
    ("80 ffffffffffffffff", ULong(2**64 - 1)),
    ("54 80", Int(-128)),
    ("54 7f", Int(127)),
    ("71 ffffff7f", Int(-129)),
    ("71 00000080", Int(128)),
    ("71 80000000", Int(-(2**31))),
    ("71 7fffffff", Int(2**31 - 1)),
    ("55 00", 0),
    ("55 80", -128),
    ("55 7f", 127),
    ("81 0000000000000080", 128),
    ("81 ffffffffffffff7f", -129),
    ("81 7fffffffffffffff", 2**63 - 1),
    ("81 8000000000000000", -(2**63)),
    ("72 3fc00000", Float(1.5)),
    ("72 7f800000", Float(float("inf"))),
    ("82 3ff8000000000000", 1.5),
    ("82 8000000000000000", -0.0),
    ("74 01020304", Decimal32(h("01020304"))),
    ("84 0102030405060708", Decimal64(h("0102030405060708"))),
    ("94 000102030405060708090a0b0c0d0e0f", Decimal128(bytes(range(16)))),
    ("73 00000041", Char("A")),
    ("73 000000e9", Char("é")),
    ("73 0001f600", Char("\U0001f600")),
    ("83 0000018bcfe56800", Timestamp(1_700_000_000_000)),
    ("83 ffffffffffffffff", Timestamp(-1)),
    ("98 0f0e0d0c0b0a09080706050403020100", U),
    ("a0 00", b""),
    ("a0 02 6d30", b"m0"),
    ("a0 ff" + "ab" * 255, b"\xab" * 255),
    ("b0 00000100" + "ab" * 256, b"\xab" * 256),
    ("a1 00", ""),
    ("a1 08 636166c3a92dc39f", CAFE),
    ("a1 ff" + "c3a9" * 127 + "61", E127A),
    ("b1 00000100" + "c3a9" * 128, E128),
    ("a3 00", Symbol("")),
    ("a3 03 73796d", Symbol("sym")),
    ("a3 ff" + "78" * 255, Symbol("x" * 255)),
    ("b3 00000100" + "78" * 256, Symbol("x" * 256)),
    ("45", []),
    ("c0 03 01 5501", [1]),
    ("c0 09 02 5501 c0 04 02 45 a000", [1, [[], b""]]),
    ("c0 ff 01 a0 fc" + "78" * 252, [b"x" * 252]),  # size 255: the largest list8
    ("d0 00000103 00000001 a0 fd" + "78" * 253, [b"x" * 253]),  # size 256: list32
    ("c0 ff fe" + "40" * 254, [None] * 254),
    ("d0 00000103 000000ff" + "40" * 255, [None] * 255),  # count 255, size 256
    ("c1 01 00", {}),
    ("c1 06 02 a10161 5501", {"a": 1}),
    ("c1 0b 04 a30161 43 5301 a1 02 c3a9", {Symbol("a"): UInt(0), ULong(1): "é"}),
    ("c1 ff 02 a1 01 6b a0 f9" + "00" * 249, {"k": bytes(249)}),  # size 255: largest map8
    ("d1 00000103 00000002 a1 01 6b a0 fa" + "00" * 250, {"k": bytes(250)}),
    ("e0 0a 02 70 00000001 00000002", Array(UInt, [1, 2])),
    ("e0 02 00 a1", Array(str, [])),
    ("e0 08 02 a1 0161 0362c3a9", Array(str, ["a", "bé"])),
    ("e0 04 02 56 01 00", Array(bool, [True, False])),
    ("e0 06 01 a3 03 73796d", Array(Symbol, ["sym"])),
    ("e0 0a 01 81 0000000000000007", Array(int, [7])),
    ("e0 12 01 98 0f0e0d0c0b0a09080706050403020100", Array(uuid.UUID, [U])),
    ("e0 06 01 73 000000e9", Array(Char, ["é"])),
    ("e0 0a 01 83 0000018bcfe56800", Array(Timestamp, [1_700_000_000_000])),
    ("e0 06 01 72 3fc00000", Array(Float, [1.5])),
    ("e0 06 01 74 01020304", Array(Decimal32, [Decimal32(h("01020304"))])),
    ("e0 08 02 c0 03 01 5501 01 00", Array(list, [[1], []])),
    ("e0 09 01 c1 06 02 a10161 5501", Array(dict, [{"a": 1}])),
    (
        "e0 11 02 e0 0a 01 81 0000000000000001 03 01 56 01",
        Array(Array, [Array(int, [1]), Array(bool, [True])]),
    ),
    ("e0 0e 01 00 a3 01 64 81 0000000000000001", Array(int, [1], descriptor=Symbol("d"))),
    ("e0 0d 02 00 53 07 70 00000001 00000002", Array(UInt, [1, 2], descriptor=7)),
    ("e0 02 02 40", Array(type(None), [None, None])),
    ("00 53 75 a0 02 6d30", Described(ULong(0x75), b"m0")),
    ("00 a3 01 78 55 05", Described(Symbol("x"), 5)),
    ("00 53 01 00 53 02 40", Described(1, Described(2, None))),
    ("00 80 ffffffffffffffff 45", Described(2**64 - 1, [])),
]


@pytest.mark.parametrize(("hexa", "value"), CANONICAL, ids=[v[0][:24] for v in CANONICAL])
def test_canonical_vector(hexa: str, value: Any) -> None:
    data = h(hexa)
    assert encode_value(value) == data
    assert_same(decode_value(data), value)
    assert_same(decode_value(bytearray(data)), value)
    assert_same(decode_value(memoryview(data)), value)
    assert_prefixes_fail(data, decode_value)
    assert_trailing_fails(data, decode_value)


# (bytes, value): valid but non-minimal encodings some peers emit; decode gives the value
# and re-encoding gives the minimal form
DECODE_ONLY: list[tuple[str, Any, str]] = [
    ("56 01", True, "41"),
    ("56 00", False, "42"),
    ("70 00000000", UInt(0), "43"),
    ("52 00", UInt(0), "43"),
    ("70 00000005", UInt(5), "5205"),
    ("80 0000000000000000", ULong(0), "44"),
    ("53 00", ULong(0), "44"),
    ("71 00000005", Int(5), "5405"),
    ("81 0000000000000005", 5, "5505"),
    ("b0 00000002 6d30", b"m0", "a0026d30"),
    ("b1 00000008 636166c3a92dc39f", CAFE, "a108636166c3a92dc39f"),
    ("b3 00000001 78", Symbol("x"), "a30178"),
    ("c0 01 00", [], "45"),
    ("d0 00000004 00000000", [], "45"),
    ("d0 00000006 00000001 5501", [1], "c003015501"),
    ("d1 00000004 00000000", {}, "c10100"),
    (
        "f0 00000011 00000003 70 00000000 00000000 00000001",
        Array(UInt, [0, 0, 1]),
        "e00e0370 00000000 00000000 00000001",
    ),
    ("e0 02 02 43", Array(UInt, [0, 0]), "e00a027000000000 00000000"),
    (
        "e0 07 02 00 53 07 52 01 02",
        Array(UInt, [1, 2], descriptor=7),
        "e00d020053077000000001 00000002",
    ),
    ("e0 02 02 41", Array(bool, [True, True]), "e00402560101"),
    ("e0 02 01 45", Array(list, [[]]), "e00401c00100"),
    ("00 80 0000000000000075 a0 02 6d30", Described(0x75, b"m0"), "005375a0026d30"),
    ("00 44 40", Described(0, None), "004440"),
    ("00 b3 00000001 78 40", Described("x", None), "00a3017840"),
]


@pytest.mark.parametrize(("hexa", "value", "minimal"), DECODE_ONLY)
def test_non_minimal_encodings_decode(hexa: str, value: Any, minimal: str) -> None:
    data = h(hexa)
    decoded = decode_value(data)
    assert_same(decoded, value)
    assert encode_value(decoded) == h(minimal)
    assert_prefixes_fail(data, decode_value)
    assert_trailing_fails(data, decode_value)


def test_string_lengths_are_utf8_byte_counts() -> None:
    assert len(CAFE) == 6
    assert encode_value(CAFE)[1] == 8
    assert len(E128) < 255
    assert encode_value(E128)[0] == 0xB1


def test_array_of_described_lists_nested() -> None:
    value = Array(list, [[Symbol("a")], [UInt(7), None]], descriptor="amqp:x")
    data = encode_value(value)
    assert data[:13] == h("e0 15 02 00 a3 06 616d71703a78 c0")
    assert_same(decode_value(data), value)
    assert_prefixes_fail(data, decode_value)
