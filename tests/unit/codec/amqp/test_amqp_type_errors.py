"""Negative vectors for the AMQP value decoder (each a DecodeError with an offset) and the
values the encoder must refuse (each a LocalProtocolError)."""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from collections import OrderedDict
from typing import Any

import pytest

from streamwire.codec._structs import U32
from streamwire.codec.amqp import (
    MAX_DEPTH,
    Array,
    Decimal32,
    Described,
    Long,
    UInt,
    decode_value,
    encode_value,
)
from streamwire.errors import DecodeError, LocalProtocolError

KNOWN = {
    0x00, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56,
    0x60, 0x61, 0x70, 0x71, 0x72, 0x73, 0x74, 0x80, 0x81, 0x82, 0x83, 0x84, 0x94, 0x98,
    0xA0, 0xA1, 0xA3, 0xB0, 0xB1, 0xB3, 0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0,
}  # fmt: skip


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


@pytest.mark.parametrize("code", sorted(set(range(256)) - KNOWN))
def test_unknown_type_codes_are_refused_with_their_offset(code: int) -> None:
    with pytest.raises(DecodeError, match="unknown AMQP type code") as info:
        decode_value(bytes([code]) + bytes(32))
    assert info.value.offset == 0
    with pytest.raises(DecodeError, match="unknown AMQP type code") as info:
        decode_value(h("c0 03 02 40") + bytes([code]))  # inside a list, at offset 4
    assert info.value.offset == 4


BAD: list[tuple[str, str, int]] = [
    # (bytes, message fragment, offset)
    ("56 02", "neither 0 nor 1", 1),
    ("73 0000d800", "not a Unicode scalar", 1),
    ("73 00110000", "not a Unicode scalar", 1),
    ("a1 02 c328", "invalid UTF-8", 2),
    ("a1 02 c0af", "invalid UTF-8", 2),  # overlong encoding
    ("a1 03 eda080", "invalid UTF-8", 2),  # encoded surrogate
    ("a3 03 61e961", "not ASCII", 3),
    ("b0 ffffffff 00", "need 4294967295 bytes", 5),  # no allocation for a lying length
    ("c0 03 02 5501", "need 1 bytes", 5),  # count 2, one item inside the size
    ("c0 04 01 5501 40", "leaves 1 bytes after 1 items", 5),
    ("c0 01 ff", "count 255 does not fit", 3),
    ("c0 00", "need 1 bytes", 2),  # a size that cannot even hold the count
    ("d0 00000004 ffffffff", "count 4294967295 does not fit", 9),
    ("c0 03 01 a1 05 6161616161", "need 5 bytes, 0 left", 5),  # item past the list's size
    ("c1 02 01 40", "odd number of items", 3),
    ("c1 09 04 a10161 40 a10161 40", "duplicate AMQP map key", 7),
    ("c1 09 04 a10161 40 a30161 40", "duplicate AMQP map key", 7),  # str and symbol "a"
    ("c1 07 04 5501 40 5201 40", "duplicate AMQP map key", 6),  # long 1 and uint 1
    ("c1 03 02 45 40", "unhashable", 3),
    ("c1 06 02 c003015501 40", "unhashable", 3),
    ("e0 02 ff 70", "count 255 does not fit", 3),
    ("e0 02 ff 40", "count 255 does not fit", 3),  # zero-width items: count <= size
    ("e0 02 01 01", "array element constructor 0x01", 3),
    ("e0 06 01 00 53 01 00 53", "array element constructor 0x00", 6),
    ("e0 03 01 56 02", "neither 0 nor 1", 4),
    ("e0 04 01 70 0000", "count 1 does not fit in 2 bytes", 3),
    ("00 a1 01 61 40", "descriptor must be a ulong or a symbol", 1),
    ("00 52 01 40", "descriptor must be a ulong or a symbol", 1),
    ("00 00 53 01 40 40", "descriptor must be a ulong or a symbol", 1),
    ("00 a3 01 e9 40", "not ASCII", 3),
]


@pytest.mark.parametrize(("hexa", "message", "offset"), BAD, ids=[b[0] for b in BAD])
def test_malformed_values_raise_decode_error(hexa: str, message: str, offset: int) -> None:
    with pytest.raises(DecodeError, match=message) as info:
        decode_value(h(hexa))
    assert info.value.offset == offset


def test_trailing_bytes_after_a_value_are_an_error() -> None:
    with pytest.raises(DecodeError, match="1 trailing bytes") as info:
        decode_value(h("5501 40"))
    assert info.value.offset == 2


def nested_lists(levels: int) -> bytes:
    data = b"\x45"
    for _ in range(levels - 1):
        data = b"\xd0" + U32.pack(len(data) + 4) + U32.pack(1) + data
    return data


def test_depth_limit_is_the_same_for_encoder_and_decoder() -> None:
    deepest: list[Any] = []
    for _ in range(MAX_DEPTH - 1):
        deepest = [deepest]
    assert decode_value(encode_value(deepest)) == deepest
    assert decode_value(nested_lists(MAX_DEPTH)) == deepest
    with pytest.raises(LocalProtocolError, match="nested deeper"):
        encode_value([deepest])
    with pytest.raises(DecodeError, match="nested deeper"):
        decode_value(nested_lists(MAX_DEPTH + 1))


@pytest.mark.parametrize("prefix", [b"\xc0\x03\x01", b"\xe0\x04\x01\xe0", b"\x00\x53\x00"])
def test_hostile_nesting_cannot_recurse_without_bound(prefix: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_value(prefix * 5000)


def test_self_referential_containers_are_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(LocalProtocolError, match="nested deeper"):
        encode_value(loop)
    mapping: dict[str, Any] = {}
    mapping["me"] = mapping
    with pytest.raises(LocalProtocolError, match="nested deeper"):
        encode_value(mapping)


class Colour(enum.IntEnum):
    RED = 1


class Text(str):
    pass


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ((1, "a"), "c0 06 02 5501 a10161"),
        (bytearray(b"m0"), "a0 02 6d30"),
        (memoryview(b"m0"), "a0 02 6d30"),
        (Colour.RED, "55 01"),
        (OrderedDict(a=None), "c1 05 02 a10161 40"),
        (Text("x"), "a1 01 78"),
        (Long(5), "55 05"),
        (Long(-(2**63)), "81 8000000000000000"),
        (2**63, "80 8000000000000000"),  # plain ints above long's range become ulong
        (dt.datetime(1970, 1, 1, 0, 0, 1, 999, tzinfo=dt.UTC), "83 00000000000003e8"),
        (dt.datetime(1970, 1, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2))), "83" + "00" * 8),
        (Described("amqp:x", None), "00 a3 06 616d71703a78 40"),
    ],
)
def test_non_canonical_inputs_encode(value: object, expected: str) -> None:
    assert encode_value(value) == h(expected)


@pytest.mark.parametrize(
    "value",
    [
        2**64,
        -(2**63) - 1,
        "\ud800",
        dt.datetime(2024, 1, 1),  # naive: refused rather than guessed
        object(),
        {1, 2},
        dt.date(2024, 1, 1),
        Array(UInt, ["x"]),
        Array(bool, [1]),
        Array(uuid.UUID, [b"x"]),
        Array(str, ["\udc00"]),
        Array(list, [1]),
        Array(Array, [[1]]),
        Array(type(None), [None] * 6),
        Array(Decimal32, [b"1234"]),
    ],
    ids=repr,
)
def test_unencodable_values_raise_local_protocol_error(value: object) -> None:
    with pytest.raises(LocalProtocolError):
        encode_value(value)


def test_zero_width_array_fits_as_array32_when_short() -> None:
    data = encode_value(Array(type(None), [None] * 5))
    assert data == h("f0 00000005 00000005 40")
    assert decode_value(data) == Array(type(None), [None] * 5)
