"""Reader and Writer: golden bytes, bounds, UTF-8 byte lengths, back-patching."""

from __future__ import annotations

import struct

import pytest

from streamwire.codec import Reader, Writer
from streamwire.codec._structs import I16, U8, U16, U32, U32LE
from streamwire.errors import DecodeError, LocalProtocolError


def test_big_endian_integers_golden() -> None:
    w = Writer()
    w.u8(0xAB).i8(-2).u16(0x0102).i16(-3).u32(0x01020304).i32(-4)
    w.u64(0x0102030405060708).i64(-5)
    expected = bytes.fromhex(
        "ab fe 0102 fffd 01020304 fffffffc 0102030405060708 fffffffffffffffb".replace(" ", "")
    )
    assert w.getvalue() == expected
    r = Reader(expected)
    assert [r.u8(), r.i8(), r.u16(), r.i16(), r.u32(), r.i32(), r.u64(), r.i64()] == [
        0xAB,
        -2,
        0x0102,
        -3,
        0x01020304,
        -4,
        0x0102030405060708,
        -5,
    ]
    r.expect_end()


def test_little_endian_integers_golden() -> None:
    w = Writer().u16le(0x0102).u32le(0x01020304).u64le(1).i32le(-1).u128le((1 << 127) + 5)
    data = w.getvalue()
    assert data[:6] == bytes.fromhex("0201 04030201")
    assert data[-16:] == (5).to_bytes(8, "little") + (1 << 63).to_bytes(8, "little")
    r = Reader(data)
    assert (r.u16le(), r.u32le(), r.u64le(), r.i32le(), r.u128le()) == (
        0x0102,
        0x01020304,
        1,
        -1,
        (1 << 127) + 5,
    )


def test_floats_round_trip() -> None:
    data = Writer().f32(1.5).f64(-2.25).f32le(0.5).f64le(1e300).getvalue()
    r = Reader(data)
    assert (r.f32(), r.f64(), r.f32le(), r.f64le()) == (1.5, -2.25, 0.5, 1e300)


def test_string16_counts_utf8_bytes_not_characters() -> None:
    # 'café-ß' is 6 characters but 8 UTF-8 bytes: both Python peers get this wrong.
    data = Writer().string16("café-ß").getvalue()
    assert data == bytes.fromhex("0008") + "café-ß".encode()
    assert Reader(data).string16() == "café-ß"


def test_null_string_and_bytes() -> None:
    data = Writer().string16(None).bytes32(None).bytes32(b"").getvalue()
    assert data == bytes.fromhex("ffff ffffffff 00000000".replace(" ", ""))
    r = Reader(data)
    assert r.opt_string16() is None
    assert r.bytes32() is None
    assert r.bytes32() == b""


def test_non_null_string_refuses_null() -> None:
    with pytest.raises(DecodeError, match="unexpected null"):
        Reader(b"\xff\xff").string16()


def test_negative_length_other_than_minus_one_is_an_error() -> None:
    with pytest.raises(DecodeError, match="negative length -2"):
        Reader(b"\xff\xfe").opt_string16()


def test_invalid_utf8_is_a_decode_error_with_offset() -> None:
    with pytest.raises(DecodeError) as info:
        Reader(b"\x00\x02\xc3\x28").string16()
    assert info.value.offset == 2


@pytest.mark.parametrize("method", ["u8", "u16", "u32", "u64", "i64", "u128le", "f64"])
def test_truncation_raises_decode_error(method: str) -> None:
    r = Reader(b"", frame="TestFrame")
    with pytest.raises(DecodeError) as info:
        getattr(r, method)()
    assert "TestFrame" in str(info.value)
    assert info.value.offset == 0


def test_expect_end_reports_trailing_bytes() -> None:
    r = Reader(b"\x01\x02")
    r.u8()
    with pytest.raises(DecodeError, match="1 trailing bytes"):
        r.expect_end()


def test_reader_window_start_end() -> None:
    r = Reader(b"\x00\x01\x02\x03", start=1, end=3)
    assert r.remaining == 2
    assert r.bytes(2) == b"\x01\x02"
    with pytest.raises(DecodeError):
        r.u8()


def test_view_is_zero_copy_and_rest() -> None:
    buf = bytearray(b"abcdef")
    r = Reader(buf)
    v = r.view(2)
    buf[0] = ord("z")
    assert bytes(v) == b"zb"
    assert bytes(r.rest()) == b"cdef"
    assert r.at_end()


def test_count_guards_against_hostile_counts() -> None:
    data = U32.pack(1_000_000) + b"\x00" * 8
    with pytest.raises(DecodeError, match="count 1000000"):
        Reader(data).count(U32, 8)
    assert Reader(U32.pack(1) + b"\x00" * 8).count(U32, 8) == 1


def test_reader_accepts_non_byte_memoryviews() -> None:
    import array

    arr = array.array("H", [1, 2])
    r = Reader(memoryview(arr))
    assert r.remaining == 4


def test_writer_out_of_range_is_local_protocol_error() -> None:
    with pytest.raises(LocalProtocolError):
        Writer().u8(256)
    with pytest.raises(LocalProtocolError):
        Writer().u128le(-1)
    with pytest.raises(LocalProtocolError):
        Writer().string16("x" * 40_000)


def test_reserve_and_patch_length() -> None:
    w = Writer()
    pos = w.reserve(U32)
    w.u16(7).raw(b"xyz")
    w.patch_length(pos, U32)
    assert w.getvalue() == bytes.fromhex("00000005 0007 78797a".replace(" ", ""))
    w2 = Writer(b"\xaa")
    pos2 = w2.reserve(U32LE)
    w2.zeros(3)
    w2.patch_length(pos2, U32LE, include_prefix=True)
    assert w2.getvalue() == b"\xaa" + (7).to_bytes(4, "little") + b"\x00\x00\x00"
    with pytest.raises(LocalProtocolError):
        w2.patch(pos2, U8, 300)


def test_prefixed_generic_roundtrip() -> None:
    data = Writer().prefixed(b"ab", U8).prefixed_str("é", U16).prefixed(None, I16).getvalue()
    r = Reader(data)
    assert r.prefixed(U8) == b"ab"
    assert r.prefixed_str(U16) == "é"
    assert r.prefixed(I16) is None
    r.expect_end()


def test_unpack_generic() -> None:
    st = struct.Struct(">HB")
    assert Reader(b"\x00\x05\x07").unpack(st) == (5, 7)
    with pytest.raises(DecodeError):
        Reader(b"\x00").unpack(st, "pair")
