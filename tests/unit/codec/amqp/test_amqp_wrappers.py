"""The wrapper types: ranges, equality with plain values, conversions, reprs."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from streamwire.codec.amqp import (
    ARRAY_ELEMENT_TYPES,
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Int,
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)
from streamwire.errors import DecodeError, LocalProtocolError

RANGES = [
    (UByte, 0, 2**8 - 1),
    (UShort, 0, 2**16 - 1),
    (UInt, 0, 2**32 - 1),
    (ULong, 0, 2**64 - 1),
    (Byte, -(2**7), 2**7 - 1),
    (Short, -(2**15), 2**15 - 1),
    (Int, -(2**31), 2**31 - 1),
    (Long, -(2**63), 2**63 - 1),
    (Timestamp, -(2**63), 2**63 - 1),
]


@pytest.mark.parametrize(("cls", "low", "high"), RANGES)
def test_integer_wrappers_check_their_range(cls: type[int], low: int, high: int) -> None:
    assert cls(low) == low
    assert cls(high) == high
    assert type(cls(high)) is cls
    for outside in (low - 1, high + 1):
        with pytest.raises(LocalProtocolError, match="does not fit"):
            cls(outside)
    with pytest.raises(TypeError):
        cls(1.5)


def test_wrappers_behave_as_plain_values() -> None:
    assert UInt(5) == 5
    assert hash(UInt(5)) == hash(5)
    assert UInt(5) + 1 == 6
    assert type(UInt(5) + 1) is int
    assert repr(UInt(5)) == "UInt(5)"
    assert str(UInt(5)) == "5"
    assert f"{UInt(5)}" == "5"
    assert Symbol("x-opt") == "x-opt"
    assert {"x-opt": 1}[Symbol("x-opt")] == 1
    assert repr(Symbol("a")) == "Symbol('a')"
    assert str(Symbol("a")) == "a"
    assert repr(Float(1.5)) == "Float(1.5)"
    assert str(Float(1.5)) == "1.5"
    assert repr(Char("é")) == "Char('é')"


def test_float_rounds_to_single_precision() -> None:
    assert Float(0.1) != 0.1
    assert Float(0.1) == Float(Float(0.1))
    assert math.isinf(Float(float("inf")))
    assert math.isnan(Float(float("nan")))
    with pytest.raises(LocalProtocolError):
        Float(1e300)


def test_symbol_and_char_validation() -> None:
    with pytest.raises(LocalProtocolError, match="ASCII"):
        Symbol("é")
    with pytest.raises(TypeError):
        Symbol(b"x")  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        Char("ab")
    with pytest.raises(LocalProtocolError):
        Char("")
    with pytest.raises(LocalProtocolError, match="surrogate"):
        Char("\ud800")


def test_timestamp_conversions() -> None:
    moment = dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.UTC)
    ts = Timestamp.from_datetime(moment)
    assert ts == 1_700_000_000_123
    assert type(ts) is Timestamp
    assert ts.to_datetime() == moment.replace(microsecond=123000)
    assert Timestamp.from_datetime(dt.datetime(1969, 12, 31, 23, 59, 59, 999500, dt.UTC)) == -1
    with pytest.raises(LocalProtocolError, match="naive"):
        Timestamp.from_datetime(dt.datetime(2024, 1, 1))
    with pytest.raises(DecodeError, match="outside datetime's range"):
        Timestamp(2**62).to_datetime()


def test_decimals_keep_raw_bytes_of_the_right_size() -> None:
    assert Decimal32(bytearray(b"1234")).raw == b"1234"  # type: ignore[arg-type]
    assert Decimal64(bytes(8)).raw == bytes(8)
    assert Decimal128(bytes(16)) == Decimal128(bytes(16))
    for cls, size in ((Decimal32, 4), (Decimal64, 8), (Decimal128, 16)):
        with pytest.raises(LocalProtocolError, match=f"takes {size} raw bytes"):
            cls(bytes(size + 1))


def test_described_normalises_its_descriptor() -> None:
    assert Described(5, None).descriptor == 5
    assert type(Described(5, None).descriptor) is ULong
    assert type(Described("a:b", None).descriptor) is Symbol
    assert hash(Described(5, "x")) == hash(Described(ULong(5), "x"))
    with pytest.raises(LocalProtocolError):
        Described(1.5, None)  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        Described(True, None)
    with pytest.raises(LocalProtocolError):
        Described(-1, None)


def test_array_coerces_items_to_its_element_type() -> None:
    moment = dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
    assert Array(UInt, [1]).items == (UInt(1),)
    assert type(Array(UInt, [1]).items[0]) is UInt
    assert type(Array(Long, [UInt(1)]).items[0]) is int
    assert Array(Long, []).element is int
    assert Array(Timestamp, [moment]).items == (Timestamp(1000),)
    assert type(Array(float, [1]).items[0]) is float
    assert type(Array(Symbol, ["a"]).items[0]) is Symbol
    assert type(Array(str, [Symbol("a")]).items[0]) is str
    assert Array(bytes, [bytearray(b"x")]).items == (b"x",)
    assert repr(Array(UInt, [1], descriptor=2)) == "Array(UInt, (UInt(1),), descriptor=ULong(2))"
    with pytest.raises(LocalProtocolError):
        Array(UByte, [256])
    with pytest.raises(LocalProtocolError, match="cannot make an AMQP array"):
        Array(object, [])
    assert Array in {Array}
    assert bool in ARRAY_ELEMENT_TYPES
