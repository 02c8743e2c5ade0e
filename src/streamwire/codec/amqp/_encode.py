"""AMQP 1.0 value encoder: Python values to the smallest AMQP encoding.

Dispatch is on the exact type first (one dict lookup), then by ``isinstance`` for
subclasses (``IntEnum``, ``OrderedDict``, ``StrEnum``, ...). Everything the wire cannot
carry raises :class:`~streamwire.errors.LocalProtocolError`.
"""

from __future__ import annotations

import datetime as _dt
import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from streamwire.codec._structs import BytesLike
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
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)
from streamwire.codec.writer import Writer
from streamwire.errors import LocalProtocolError

__all__ = (
    "array_descriptor_prefix",
    "encode_value",
    "list_body",
    "map_body",
    "utf8",
    "write_binary",
    "write_compound",
    "write_described_code",
    "write_string",
    "write_symbol",
    "write_ulong",
    "write_value",
)

_Encoder = Callable[[Writer, Any, int], None]
_U32_MAX: Final = 0xFFFF_FFFF
_LONG_MIN: Final = -(1 << 63)
_LONG_MAX: Final = (1 << 63) - 1


def encode_value(value: object) -> bytes:
    """The AMQP encoding of ``value`` (see :mod:`streamwire.codec.amqp.types`)."""
    w = Writer()
    write_value(w, value)
    return w.getvalue()


def write_value(w: Writer, value: object, depth: int = 0) -> None:
    """Append the AMQP encoding of ``value``; ``depth`` is its nesting level."""
    enc = _BY_TYPE.get(type(value))
    if enc is None:
        enc = _resolve(value)
    enc(w, value, depth)


def _resolve(value: object) -> _Encoder:
    for cls, enc in _BY_ISINSTANCE:
        if isinstance(value, cls):
            return enc
    raise LocalProtocolError(f"cannot encode a {type(value).__name__} as an AMQP value")


def _check_depth(depth: int) -> None:
    if depth >= c.MAX_DEPTH:
        raise LocalProtocolError(f"AMQP value nested deeper than {c.MAX_DEPTH} levels")


# --- scalars -----------------------------------------------------------------------------


def _null(w: Writer, v: None, depth: int) -> None:
    w.u8(c.NULL)


def _bool(w: Writer, v: bool, depth: int) -> None:
    w.u8(c.TRUE if v else c.FALSE)


def _int(w: Writer, v: int, depth: int) -> None:
    """A plain int is a long (smalllong when it fits), or a ulong from 2**63 up."""
    if -128 <= v <= 127:
        w.u8(c.SMALLLONG).i8(v)
    elif _LONG_MIN <= v <= _LONG_MAX:
        w.u8(c.LONG).i64(v)
    elif 0 <= v <= 0xFFFF_FFFF_FFFF_FFFF:
        w.u8(c.ULONG).u64(v)
    else:
        raise LocalProtocolError(f"{v} fits neither AMQP long nor ulong")


def _long(w: Writer, v: int, depth: int) -> None:
    if -128 <= v <= 127:
        w.u8(c.SMALLLONG).i8(v)
    else:
        w.u8(c.LONG).i64(v)


def write_ulong(w: Writer, v: int, depth: int = 0) -> None:
    if v == 0:
        w.u8(c.ULONG0)
    elif 0 < v <= 0xFF:
        w.u8(c.SMALLULONG).u8(v)
    else:
        w.u8(c.ULONG).u64(v)


def _uint(w: Writer, v: int, depth: int) -> None:
    if v == 0:
        w.u8(c.UINT0)
    elif 0 < v <= 0xFF:
        w.u8(c.SMALLUINT).u8(v)
    else:
        w.u8(c.UINT).u32(v)


def _int32(w: Writer, v: int, depth: int) -> None:
    if -128 <= v <= 127:
        w.u8(c.SMALLINT).i8(v)
    else:
        w.u8(c.INT).i32(v)


def _fixed(code: int, st: struct.Struct) -> _Encoder:
    prefix = bytes((code,))

    def enc(w: Writer, v: Any, depth: int) -> None:
        w.raw(prefix).pack(st, v)

    return enc


def _timestamp(w: Writer, v: int | _dt.datetime, depth: int) -> None:
    ms = Timestamp.from_datetime(v) if isinstance(v, _dt.datetime) else v
    w.u8(c.TIMESTAMP).i64(ms)


def _char(w: Writer, v: str, depth: int) -> None:
    w.u8(c.CHAR).u32(ord(Char(v)))


def _uuid(w: Writer, v: uuid.UUID, depth: int) -> None:
    w.u8(c.UUID).raw(v.bytes)


def _decimal(code: int) -> _Encoder:
    def enc(w: Writer, v: Decimal32 | Decimal64 | Decimal128, depth: int) -> None:
        w.u8(code).raw(v.raw)

    return enc


def _sized(w: Writer, code8: int, code32: int, data: BytesLike) -> None:
    n = len(data)
    if n <= 0xFF:
        w.raw(bytes((code8, n)))
    elif n <= _U32_MAX:
        w.u8(code32).u32(n)
    else:
        raise LocalProtocolError(f"{n} bytes do not fit in an AMQP 32-bit length")
    w.raw(data)


def write_binary(w: Writer, v: BytesLike, depth: int = 0) -> None:
    _sized(w, c.VBIN8, c.VBIN32, v if isinstance(v, bytes) else bytes(v))


def utf8(v: str) -> bytes:
    """``v`` as UTF-8; lone surrogates are a :class:`LocalProtocolError`."""
    try:
        return v.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(f"string is not valid Unicode: {exc.reason}") from exc


def write_string(w: Writer, v: str, depth: int = 0) -> None:
    _sized(w, c.STR8, c.STR32, utf8(v))


def write_symbol(w: Writer, v: str, depth: int = 0) -> None:
    if not v.isascii():
        raise LocalProtocolError(f"AMQP symbols are ASCII: {v!r}")
    _sized(w, c.SYM8, c.SYM32, v.encode("ascii"))


# --- compounds ---------------------------------------------------------------------------


def write_compound(w: Writer, code8: int, code32: int, count: int, body: BytesLike) -> None:
    """A list/map/array: the 8-bit form when size and count fit in a byte, else 32-bit."""
    n = len(body)
    if count <= 0xFF and n < 0xFF:
        w.raw(bytes((code8, n + 1, count)))
    elif count <= _U32_MAX and n + 4 <= _U32_MAX:
        w.u8(code32).u32(n + 4).u32(count)
    else:
        raise LocalProtocolError(f"AMQP compound of {n} bytes / {count} items is too large")
    w.raw(body)


def list_body(v: Any, depth: int) -> bytearray:
    _check_depth(depth)
    sub = Writer()
    for item in v:
        write_value(sub, item, depth + 1)
    return sub.buffer


def _list(w: Writer, v: list[Any] | tuple[Any, ...], depth: int) -> None:
    body = list_body(v, depth)
    if v:
        write_compound(w, c.LIST8, c.LIST32, len(v), body)
    else:
        w.u8(c.LIST0)


def map_body(v: Mapping[Any, Any], depth: int) -> bytearray:
    _check_depth(depth)
    sub = Writer()
    for key, value in v.items():
        write_value(sub, key, depth + 1)
        write_value(sub, value, depth + 1)
    return sub.buffer


def _map(w: Writer, v: Mapping[Any, Any], depth: int) -> None:
    write_compound(w, c.MAP8, c.MAP32, 2 * len(v), map_body(v, depth))


def _write_descriptor(w: Writer, d: ULong | Symbol) -> None:
    if isinstance(d, Symbol):
        write_symbol(w, d)
    else:
        write_ulong(w, d)


def write_described_code(w: Writer, code: int) -> None:
    """The start of a described value with a numeric descriptor: ``00 53 <code>``."""
    if 0 < code <= 0xFF:
        w.raw(bytes((c.DESCRIBED, c.SMALLULONG, code)))
    else:
        w.u8(c.DESCRIBED)
        write_ulong(w, code)


def _described(w: Writer, v: Described, depth: int) -> None:
    _check_depth(depth)
    w.u8(c.DESCRIBED)
    _write_descriptor(w, v.descriptor)
    write_value(w, v.value, depth + 1)


#: The array encoder (``_encode_array.array_body``), entered when that module is imported,
#: which ``streamwire.codec.amqp`` does: arrays hold values and values hold arrays, and the
#: entry keeps the imports one way (``_encode_array`` imports this module, not the reverse).
ARRAY_BODY: list[Callable[[Array, int], tuple[int, bytes, bool]]] = []


def _array(w: Writer, v: Array, depth: int) -> None:
    _check_depth(depth)
    count, body, zero_width = ARRAY_BODY[0](v, depth)
    if zero_width and count > len(body) + 1:
        # zero-width items: the decoder bounds their count by the array's size field
        if count > len(body) + 4:
            raise LocalProtocolError(f"AMQP array of {count} zero-width items is too long")
        w.u8(c.ARRAY32).u32(len(body) + 4).u32(count).raw(body)
        return
    write_compound(w, c.ARRAY8, c.ARRAY32, count, body)


def array_descriptor_prefix(v: Array) -> bytes:
    """``00 <descriptor>`` for arrays of described values, else nothing."""
    if v.descriptor is None:
        return b""
    w = Writer(b"\x00")
    _write_descriptor(w, v.descriptor)
    return w.getvalue()


_BY_TYPE: Final[dict[type, _Encoder]] = {
    type(None): _null,
    bool: _bool,
    int: _int,
    float: _fixed(c.DOUBLE, struct.Struct(">d")),
    str: write_string,
    bytes: write_binary,
    bytearray: write_binary,
    memoryview: write_binary,
    list: _list,
    tuple: _list,
    dict: _map,
    uuid.UUID: _uuid,
    _dt.datetime: _timestamp,
    UByte: _fixed(c.UBYTE, struct.Struct(">B")),
    UShort: _fixed(c.USHORT, struct.Struct(">H")),
    UInt: _uint,
    ULong: write_ulong,
    Byte: _fixed(c.BYTE, struct.Struct(">b")),
    Short: _fixed(c.SHORT, struct.Struct(">h")),
    Int: _int32,
    Long: _long,
    Timestamp: _timestamp,
    Float: _fixed(c.FLOAT, struct.Struct(">f")),
    Char: _char,
    Symbol: write_symbol,
    Decimal32: _decimal(c.DECIMAL32),
    Decimal64: _decimal(c.DECIMAL64),
    Decimal128: _decimal(c.DECIMAL128),
    Described: _described,
    Array: _array,
}

_WRAPPERS: Final = (UByte, UShort, UInt, ULong, Byte, Short, Int, Long, Timestamp, Float)
_WRAPPERS2: Final = (Char, Symbol, Decimal32, Decimal64, Decimal128, Described, Array)
# Subclasses: the most specific classes first (the wrappers before int/str/float).
_BY_ISINSTANCE: Final[tuple[tuple[type, _Encoder], ...]] = (
    *((cls, _BY_TYPE[cls]) for cls in (*_WRAPPERS, *_WRAPPERS2)),
    (bool, _bool),
    (int, _int),
    (float, _BY_TYPE[float]),
    (str, write_string),
    (bytes, write_binary),
    (bytearray, write_binary),
    (memoryview, write_binary),
    (uuid.UUID, _uuid),
    (_dt.datetime, _timestamp),
    (list, _list),
    (tuple, _list),
    (Mapping, _map),
)
