"""Strict AMQP 1.0 value decoder.

Every failure is a :class:`~streamwire.errors.DecodeError` carrying the absolute offset:
unknown type codes, truncation, size fields that disagree with the content, counts that
cannot fit, invalid UTF-8, non-ASCII symbols, invalid booleans and chars, odd map counts,
duplicate or unhashable map keys, and nesting deeper than ``MAX_DEPTH``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Final

from streamwire.codec._structs import U8, U32, BytesLike
from streamwire.codec.amqp import _codes as c
from streamwire.codec.amqp._wrappers import (
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
)
from streamwire.codec.reader import Reader

__all__ = (
    "decode_value",
    "read_binary",
    "read_descriptor",
    "read_list",
    "read_map",
    "read_value",
)

# payload decoder: the reader is just past the constructor; the int is the nesting level
_Payload = Callable[[Reader, int], Any]


def decode_value(data: BytesLike) -> Any:
    """Decode exactly one AMQP value filling ``data`` (trailing bytes are an error)."""
    r = Reader(data, frame="AMQP value")
    value = read_value(r)
    r.expect_end()
    return value


def read_value(r: Reader, depth: int = 0) -> Any:
    """Read one AMQP value (constructor and payload) at the cursor."""
    code = r.u8()
    if code == c.NULL:  # the commonest filler (properties lists), skip the dispatch
        return None
    fn = _PAYLOAD.get(code)
    if fn is None:
        raise r.error(f"unknown AMQP type code {code:#04x}", r.pos - 1)
    return fn(r, depth)


def _check_depth(r: Reader, depth: int) -> None:
    if depth >= c.MAX_DEPTH:
        raise r.error(f"AMQP value nested deeper than {c.MAX_DEPTH} levels", r.pos - 1)


# --- scalars -----------------------------------------------------------------------------


def _boolean(r: Reader, depth: int) -> bool:
    b = r.u8()
    if b > 1:
        raise r.error(f"boolean byte {b:#04x} is neither 0 nor 1", r.pos - 1)
    return b == 1


def _char(r: Reader, depth: int) -> Char:
    cp = r.u32()
    if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
        raise r.error(f"char {cp:#x} is not a Unicode scalar value", r.pos - 4)
    return str.__new__(Char, chr(cp))


def _fixed_int(cls: type[int], read: Callable[[Reader], int]) -> _Payload:
    def dec(r: Reader, depth: int) -> int:
        return int.__new__(cls, read(r))

    return dec


def read_binary(r: Reader, code: int) -> bytes:
    """The payload of a vbin8/vbin32 whose constructor ``code`` was already read."""
    n = r.u8() if code == c.VBIN8 else r.u32()
    return r.bytes(n)


def _string(r: Reader, n: int) -> str:
    view = r.view(n)
    try:
        return str(view, "utf-8")
    except UnicodeDecodeError as exc:
        raise r.error(f"AMQP string: invalid UTF-8 ({exc.reason})", r.pos - n + exc.start) from None


def _symbol(r: Reader, n: int) -> Symbol:
    pos = r.pos
    raw = r.bytes(n)
    if not raw.isascii():
        bad = next(i for i, b in enumerate(raw) if b > 0x7F)
        raise r.error("AMQP symbol is not ASCII", pos + bad)
    return str.__new__(Symbol, raw.decode("ascii"))


# --- compounds ---------------------------------------------------------------------------


def _sub(r: Reader, depth: int, wide: bool, what: str) -> tuple[Reader, int]:
    """The bounded reader over a compound's content, and its item count."""
    _check_depth(r, depth)
    size = r.u32() if wide else r.u8()
    sub = r.sub(size, what)
    count = sub.count(U32 if wide else U8, 1, f"{what} count")
    return sub, count


def _done(sub: Reader, what: str, count: int) -> None:
    if not sub.at_end():
        raise sub.error(f"{what} size field leaves {sub.remaining} bytes after {count} items")


def read_list(r: Reader, code: int, depth: int) -> list[Any]:
    """The payload of a list whose constructor ``code`` was already read."""
    if code == c.LIST0:
        _check_depth(r, depth)
        return []
    sub, count = _sub(r, depth, code == c.LIST32, "AMQP list")
    items = [read_value(sub, depth + 1) for _ in range(count)]
    _done(sub, "AMQP list", count)
    return items


def read_map(r: Reader, code: int, depth: int) -> dict[Any, Any]:
    """The payload of a map whose constructor ``code`` was already read."""
    sub, count = _sub(r, depth, code == c.MAP32, "AMQP map")
    if count % 2:
        raise sub.error(f"AMQP map has an odd number of items ({count})")
    result: dict[Any, Any] = {}
    for _ in range(count // 2):
        at = sub.pos
        key = read_value(sub, depth + 1)
        try:
            if key in result:
                raise sub.error(f"duplicate AMQP map key {key!r}", at)
        except TypeError:
            kind = type(key).__name__
            raise sub.error(f"AMQP map key of type {kind} is unhashable", at) from None
        result[key] = read_value(sub, depth + 1)
    _done(sub, "AMQP map", count)
    return result


def read_descriptor(r: Reader) -> ULong | Symbol:
    """A descriptor: a ulong (0x44/0x53/0x80) or a symbol (0xA3/0xB3)."""
    code = r.u8()
    if code == c.SMALLULONG:
        return int.__new__(ULong, r.u8())
    if code == c.ULONG:
        return int.__new__(ULong, r.u64())
    if code == c.ULONG0:
        return int.__new__(ULong, 0)
    if code == c.SYM8:
        return _symbol(r, r.u8())
    if code == c.SYM32:
        return _symbol(r, r.u32())
    raise r.error(f"AMQP descriptor must be a ulong or a symbol, not type {code:#04x}", r.pos - 1)


def _described(r: Reader, depth: int) -> Described:
    _check_depth(r, depth)
    descriptor = read_descriptor(r)
    return Described(descriptor, read_value(r, depth + 1))


#: Smallest payload of one array item per element constructor (the count check).
_MIN_SIZE: Final[dict[int, int]] = {
    **dict.fromkeys(c.ZERO_WIDTH, 0),
    **dict.fromkeys((c.BOOLEAN, c.UBYTE, c.BYTE, c.SMALLUINT, c.SMALLULONG), 1),
    **dict.fromkeys((c.SMALLINT, c.SMALLLONG, c.VBIN8, c.STR8, c.SYM8), 1),
    **dict.fromkeys((c.USHORT, c.SHORT, c.LIST8, c.MAP8), 2),
    **dict.fromkeys((c.UINT, c.INT, c.FLOAT, c.CHAR, c.DECIMAL32, c.VBIN32), 4),
    **dict.fromkeys((c.STR32, c.SYM32), 4),
    **dict.fromkeys((c.ULONG, c.LONG, c.DOUBLE, c.TIMESTAMP, c.DECIMAL64), 8),
    **dict.fromkeys((c.LIST32, c.MAP32), 8),
    c.ARRAY8: 3,
    c.ARRAY32: 9,
    c.DECIMAL128: 16,
    c.UUID: 16,
}


def _array(r: Reader, depth: int, wide: bool) -> Array:
    _check_depth(r, depth)
    size = r.u32() if wide else r.u8()
    sub = r.sub(size, "AMQP array")
    count = sub.u32() if wide else sub.u8()
    descriptor = None
    code = sub.u8()
    if code == c.DESCRIBED:
        descriptor = read_descriptor(sub)
        code = sub.u8()
    at = sub.pos - 1
    fn = _PAYLOAD.get(code)
    if fn is None or code == c.DESCRIBED:
        raise sub.error(f"unknown AMQP array element constructor {code:#04x}", at)
    least = _MIN_SIZE[code]
    if count * least > sub.remaining or (least == 0 and count > size):
        raise sub.error(f"AMQP array count {count} does not fit in {sub.remaining} bytes", at)
    items = [fn(sub, depth + 1) for _ in range(count)]
    _done(sub, "AMQP array", count)
    return Array(_ELEMENT_TYPE[code], items, descriptor)


_ELEMENT_TYPE: Final[dict[int, type]] = {
    c.NULL: type(None),
    c.TRUE: bool,
    c.FALSE: bool,
    c.BOOLEAN: bool,
    c.UBYTE: UByte,
    c.USHORT: UShort,
    c.UINT: UInt,
    c.SMALLUINT: UInt,
    c.UINT0: UInt,
    c.ULONG: ULong,
    c.SMALLULONG: ULong,
    c.ULONG0: ULong,
    c.BYTE: Byte,
    c.SHORT: Short,
    c.INT: Int,
    c.SMALLINT: Int,
    c.LONG: int,
    c.SMALLLONG: int,
    c.FLOAT: Float,
    c.DOUBLE: float,
    c.DECIMAL32: Decimal32,
    c.DECIMAL64: Decimal64,
    c.DECIMAL128: Decimal128,
    c.CHAR: Char,
    c.TIMESTAMP: Timestamp,
    c.UUID: uuid.UUID,
    c.VBIN8: bytes,
    c.VBIN32: bytes,
    c.STR8: str,
    c.STR32: str,
    c.SYM8: Symbol,
    c.SYM32: Symbol,
    c.LIST0: list,
    c.LIST8: list,
    c.LIST32: list,
    c.MAP8: dict,
    c.MAP32: dict,
    c.ARRAY8: Array,
    c.ARRAY32: Array,
}

_PAYLOAD: Final[dict[int, _Payload]] = {
    c.DESCRIBED: _described,
    c.NULL: lambda r, d: None,
    c.TRUE: lambda r, d: True,
    c.FALSE: lambda r, d: False,
    c.BOOLEAN: _boolean,
    c.UBYTE: _fixed_int(UByte, Reader.u8),
    c.BYTE: _fixed_int(Byte, Reader.i8),
    c.USHORT: _fixed_int(UShort, Reader.u16),
    c.SHORT: _fixed_int(Short, Reader.i16),
    c.UINT: _fixed_int(UInt, Reader.u32),
    c.SMALLUINT: _fixed_int(UInt, Reader.u8),
    c.UINT0: lambda r, d: int.__new__(UInt, 0),
    c.ULONG: _fixed_int(ULong, Reader.u64),
    c.SMALLULONG: _fixed_int(ULong, Reader.u8),
    c.ULONG0: lambda r, d: int.__new__(ULong, 0),
    c.INT: _fixed_int(Int, Reader.i32),
    c.SMALLINT: _fixed_int(Int, Reader.i8),
    c.LONG: lambda r, d: r.i64(),
    c.SMALLLONG: lambda r, d: r.i8(),
    c.TIMESTAMP: _fixed_int(Timestamp, Reader.i64),
    c.FLOAT: lambda r, d: float.__new__(Float, r.f32()),
    c.DOUBLE: lambda r, d: r.f64(),
    c.DECIMAL32: lambda r, d: Decimal32(r.bytes(4)),
    c.DECIMAL64: lambda r, d: Decimal64(r.bytes(8)),
    c.DECIMAL128: lambda r, d: Decimal128(r.bytes(16)),
    c.CHAR: _char,
    c.UUID: lambda r, d: uuid.UUID(bytes=r.bytes(16)),
    c.VBIN8: lambda r, d: r.bytes(r.u8()),
    c.VBIN32: lambda r, d: r.bytes(r.u32()),
    c.STR8: lambda r, d: _string(r, r.u8()),
    c.STR32: lambda r, d: _string(r, r.u32()),
    c.SYM8: lambda r, d: _symbol(r, r.u8()),
    c.SYM32: lambda r, d: _symbol(r, r.u32()),
    c.LIST0: lambda r, d: read_list(r, c.LIST0, d),
    c.LIST8: lambda r, d: read_list(r, c.LIST8, d),
    c.LIST32: lambda r, d: read_list(r, c.LIST32, d),
    c.MAP8: lambda r, d: read_map(r, c.MAP8, d),
    c.MAP32: lambda r, d: read_map(r, c.MAP32, d),
    c.ARRAY8: lambda r, d: _array(r, d, False),
    c.ARRAY32: lambda r, d: _array(r, d, True),
}
