"""AMQP 1.0 array encoder: one element constructor, then the items' payloads packed.

Fixed-width items use the full-width constructor (uint 0x70, ulong 0x80, long 0x81,
boolean 0x56; never the zero-width or "small" forms, which peers handle unevenly);
variable-width items (binary, string, symbol, list, map, array) use the 8-bit form when
every item fits it, else the 32-bit form.
"""

from __future__ import annotations

import datetime as _dt
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from streamwire.codec._structs import U32
from streamwire.codec.amqp import _codes as c
from streamwire.codec.amqp._encode import (
    ARRAY_BODY,
    array_descriptor_prefix,
    list_body,
    map_body,
    utf8,
)
from streamwire.codec.amqp._wrappers import (
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
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
from streamwire.errors import LocalProtocolError

__all__ = ("array_body",)

_U32_MAX: Final = 0xFFFF_FFFF
# element encoder: (items, depth of the items) -> (constructor code, packed payloads)
_Elements = Callable[[tuple[Any, ...], int], tuple[int, bytes]]


def array_body(v: Array, depth: int) -> tuple[int, bytes, bool]:
    """``(count, constructor + packed items, constructor is zero-width)`` of an array at
    nesting level ``depth``."""
    if depth >= c.MAX_DEPTH:
        raise LocalProtocolError(f"AMQP value nested deeper than {c.MAX_DEPTH} levels")
    code, payload = _ELEMENTS[v.element](v.items, depth + 1)
    body = b"".join((array_descriptor_prefix(v), bytes((code,)), payload))
    return len(v.items), body, code in c.ZERO_WIDTH


def _bad(element: str, exc: BaseException | None = None) -> LocalProtocolError:
    detail = f": {exc}" if exc is not None else ""
    return LocalProtocolError(f"item of an AMQP array of {element} does not fit{detail}")


def _fixed(code: int, fmt: str) -> _Elements:
    def enc(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
        if any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in items):
            raise _bad(fmt)
        try:
            return code, struct.pack(f">{len(items)}{fmt}", *items)
        except (struct.error, OverflowError) as exc:
            raise _bad(fmt, exc) from exc

    return enc


def _timestamps(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
    ms = [Timestamp.from_datetime(x) if isinstance(x, _dt.datetime) else x for x in items]
    return _fixed(c.TIMESTAMP, "q")(tuple(ms), depth)


def _bools(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
    if not all(isinstance(x, bool) for x in items):
        raise _bad("booleans")
    return c.BOOLEAN, bytes(1 if x else 0 for x in items)


def _chars(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
    return c.CHAR, struct.pack(f">{len(items)}I", *(ord(Char(x)) for x in items))


def _uuids(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
    if not all(isinstance(x, uuid.UUID) for x in items):
        raise _bad("uuids")
    return c.UUID, b"".join(x.bytes for x in items)


def _decimals(code: int, cls: type[Decimal32 | Decimal64 | Decimal128]) -> _Elements:
    def enc(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
        if not all(isinstance(x, cls) for x in items):
            raise _bad(cls.__name__)
        return code, b"".join(x.raw for x in items)

    return enc


def _nulls(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
    if any(x is not None for x in items):
        raise _bad("nulls")
    return c.NULL, b""


def _variable(code8: int, code32: int, datas: list[bytes]) -> tuple[int, bytes]:
    longest = max(map(len, datas), default=0)
    if longest <= 0xFF:
        return code8, b"".join(b"%c%s" % (len(d), d) for d in datas)
    if longest > _U32_MAX:
        raise _bad("binary/string/symbol")
    return code32, b"".join(U32.pack(len(d)) + d for d in datas)


def _binaries(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
    if not all(isinstance(x, (bytes, bytearray, memoryview)) for x in items):
        raise _bad("binaries")
    return _variable(c.VBIN8, c.VBIN32, [bytes(x) for x in items])


def _strings(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
    if not all(isinstance(x, str) for x in items):
        raise _bad("strings")
    return _variable(c.STR8, c.STR32, [utf8(x) for x in items])


def _symbols(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
    if not all(isinstance(x, str) for x in items):
        raise _bad("symbols")
    return _variable(c.SYM8, c.SYM32, [Symbol(x).encode("ascii") for x in items])


def _compounds(
    code8: int, code32: int, parts: Sequence[tuple[int, bytes | bytearray, bool]]
) -> tuple[int, bytes]:
    """Items with a size and a count (lists, maps, arrays), all in the 8- or 32-bit form."""
    wide = False
    for count, body, zero_width in parts:
        if count > 0xFF or len(body) >= 0xFF or (zero_width and count > len(body) + 1):
            wide = True
        if len(body) + 4 > _U32_MAX or (zero_width and count > len(body) + 4):
            raise _bad("compounds")
    if wide:
        out = [U32.pack(len(b) + 4) + U32.pack(n) + b for n, b, _ in parts]
        return code32, b"".join(out)
    return code8, b"".join(bytes((len(b) + 1, n)) + b for n, b, _ in parts)


def _lists(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
    if not all(isinstance(x, (list, tuple)) for x in items):
        raise _bad("lists")
    return _compounds(c.LIST8, c.LIST32, [(len(x), list_body(x, depth), False) for x in items])


def _maps(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
    if not all(isinstance(x, Mapping) for x in items):
        raise _bad("maps")
    parts = [(2 * len(x), map_body(x, depth), False) for x in items]
    return _compounds(c.MAP8, c.MAP32, parts)


def _arrays(items: tuple[Any, ...], depth: int) -> tuple[int, bytes]:
    if not all(isinstance(x, Array) for x in items):
        raise _bad("arrays")
    return _compounds(c.ARRAY8, c.ARRAY32, [array_body(x, depth) for x in items])


_ELEMENTS: Final[dict[type, _Elements]] = {
    type(None): _nulls,
    bool: _bools,
    UByte: _fixed(c.UBYTE, "B"),
    UShort: _fixed(c.USHORT, "H"),
    UInt: _fixed(c.UINT, "I"),
    ULong: _fixed(c.ULONG, "Q"),
    Byte: _fixed(c.BYTE, "b"),
    Short: _fixed(c.SHORT, "h"),
    Int: _fixed(c.INT, "i"),
    int: _fixed(c.LONG, "q"),
    Float: _fixed(c.FLOAT, "f"),
    float: _fixed(c.DOUBLE, "d"),
    Timestamp: _timestamps,
    Char: _chars,
    uuid.UUID: _uuids,
    Decimal32: _decimals(c.DECIMAL32, Decimal32),
    Decimal64: _decimals(c.DECIMAL64, Decimal64),
    Decimal128: _decimals(c.DECIMAL128, Decimal128),
    bytes: _binaries,
    str: _strings,
    Symbol: _symbols,
    list: _lists,
    dict: _maps,
    Array: _arrays,
}


ARRAY_BODY.append(array_body)
