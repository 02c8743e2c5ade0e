"""Typed header values: kinds, validation, wire form, accessors."""

from __future__ import annotations

import math

import pytest

from streamwire import HeaderKind, HeaderValue
from streamwire.codec.headers import normalize_headers
from streamwire.errors import ConfigurationError, DecodeError, HeaderKindError


def test_kind_codes_match_iggy() -> None:
    assert [k.value for k in HeaderKind] == list(range(1, 16))
    assert int(HeaderKind.RAW) == 1
    assert int(HeaderKind.FLOAT64) == 15


@pytest.mark.parametrize(
    ("value", "hexbytes"),
    [
        (HeaderValue.raw(b"\x00\xff"), "00ff"),
        (HeaderValue.string("val"), "76616c"),
        (HeaderValue.string("ß"), "c39f"),
        (HeaderValue.boolean(True), "01"),
        (HeaderValue.boolean(False), "00"),
        (HeaderValue.int8(-1), "ff"),
        (HeaderValue.int16(-2), "feff"),
        (HeaderValue.int32(1), "01000000"),
        (HeaderValue.int64(-1), "ff" * 8),
        (HeaderValue.int128(-(1 << 127)), "00" * 15 + "80"),
        (HeaderValue.uint8(255), "ff"),
        (HeaderValue.uint16(0x0102), "0201"),
        (HeaderValue.uint32(0xDEADBEEF), "efbeadde"),
        (HeaderValue.uint64(1 << 63), "00" * 7 + "80"),
        (HeaderValue.uint128((1 << 128) - 1), "ff" * 16),
        (HeaderValue.float32(1.5), "0000c03f"),
        (HeaderValue.float64(-2.0), "00000000000000c0"),
    ],
)
def test_wire_form_golden_and_back(value: HeaderValue, hexbytes: str) -> None:
    data = value.to_bytes()
    assert data.hex() == hexbytes
    assert HeaderValue.from_bytes(value.kind, data) == value


@pytest.mark.parametrize(
    ("make", "arg"),
    [
        (HeaderValue.int8, 128),
        (HeaderValue.int8, -129),
        (HeaderValue.uint8, -1),
        (HeaderValue.uint16, 1 << 16),
        (HeaderValue.int128, 1 << 127),
        (HeaderValue.uint128, 1 << 128),
        (HeaderValue.float32, 1e39),
    ],
)
def test_out_of_range_values_are_refused(make: object, arg: float) -> None:
    with pytest.raises(ConfigurationError):
        make(arg)  # type: ignore[operator]


def test_wrong_python_types_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        HeaderValue(HeaderKind.RAW, "text")
    with pytest.raises(ConfigurationError):
        HeaderValue(HeaderKind.STRING, b"bytes")
    with pytest.raises(ConfigurationError):
        HeaderValue(HeaderKind.BOOL, 1)
    with pytest.raises(ConfigurationError):
        HeaderValue(HeaderKind.INT32, True)
    with pytest.raises(ConfigurationError):
        HeaderValue(HeaderKind.FLOAT64, "1.0")
    with pytest.raises(ConfigurationError):
        HeaderValue(3, True)  # type: ignore[arg-type]


def test_float32_value_is_rounded_to_what_the_wire_carries() -> None:
    v = HeaderValue.float32(0.1)
    assert v.value == HeaderValue.from_bytes(HeaderKind.FLOAT32, v.to_bytes()).value
    assert v.value != 0.1
    assert math.isnan(HeaderValue.float32(math.nan).as_float())
    assert HeaderValue.float32(math.inf).as_float() == math.inf


def test_of_infers_kinds() -> None:
    assert HeaderValue.of(True).kind is HeaderKind.BOOL
    assert HeaderValue.of(5).kind is HeaderKind.INT64
    assert HeaderValue.of(1 << 63).kind is HeaderKind.UINT64
    assert HeaderValue.of(-(1 << 64)).kind is HeaderKind.INT128
    assert HeaderValue.of((1 << 128) - 1).kind is HeaderKind.UINT128
    assert HeaderValue.of(1.0).kind is HeaderKind.FLOAT64
    assert HeaderValue.of("s").kind is HeaderKind.STRING
    assert HeaderValue.of(bytearray(b"b")) == HeaderValue.raw(b"b")
    same = HeaderValue.int8(1)
    assert HeaderValue.of(same) is same
    with pytest.raises(ConfigurationError):
        HeaderValue.of(1 << 128)
    with pytest.raises(ConfigurationError):
        HeaderValue.of(None)  # type: ignore[arg-type]


def test_typed_accessors() -> None:
    assert HeaderValue.string("x").as_str() == "x"
    assert HeaderValue.string("x").as_bytes() == b"x"
    assert HeaderValue.raw(b"y").as_bytes() == b"y"
    assert HeaderValue.boolean(True).as_bool() is True
    assert HeaderValue.uint16(7).as_int() == 7
    assert HeaderValue.float64(0.5).as_float() == 0.5
    with pytest.raises(HeaderKindError, match="Int32, not String"):
        HeaderValue.int32(1).as_str()
    with pytest.raises(TypeError):
        HeaderValue.string("1").as_int()


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        (0, b"x"),
        (16, b"x"),
        (HeaderKind.BOOL, b"\x02"),
        (HeaderKind.BOOL, b""),
        (HeaderKind.INT32, b"\x00\x00"),
        (HeaderKind.UINT128, b"\x00" * 15),
        (HeaderKind.FLOAT64, b"\x00" * 4),
        (HeaderKind.STRING, b"\xc3\x28"),
    ],
)
def test_from_bytes_refuses_malformed(kind: int, data: bytes) -> None:
    with pytest.raises(DecodeError):
        HeaderValue.from_bytes(kind, data)


def test_normalize_headers() -> None:
    out = normalize_headers({"a": 1, "b": "s", "c": HeaderValue.uint8(2)})
    assert out == {
        "a": HeaderValue.int64(1),
        "b": HeaderValue.string("s"),
        "c": HeaderValue.uint8(2),
    }
    assert normalize_headers(None) == {}
    with pytest.raises(ConfigurationError):
        normalize_headers({"": 1})
    with pytest.raises(ConfigurationError):
        normalize_headers({1: 1})  # type: ignore[dict-item]


def test_repr_names_the_constructor() -> None:
    assert repr(HeaderValue.uint8(3)) == "HeaderValue.uint8(3)"
