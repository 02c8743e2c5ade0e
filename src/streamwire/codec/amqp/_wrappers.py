"""Python types for AMQP 1.0 values that plain Python types cannot tell apart.

Integer wrappers subclass :class:`int` (and :class:`Symbol`/:class:`Char` subclass
:class:`str`, :class:`Float` subclasses :class:`float`), so they behave as the plain values
everywhere and compare equal to them; their only job is to pick the AMQP type on encode and
to keep it on decode. Out-of-range values raise :class:`~streamwire.errors.LocalProtocolError`.
"""

from __future__ import annotations

import datetime as _dt
import operator
import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Self, SupportsFloat, SupportsIndex

from streamwire.codec._structs import F32
from streamwire.errors import DecodeError, LocalProtocolError

__all__ = (
    "ARRAY_ELEMENT_TYPES",
    "EPOCH",
    "Array",
    "Byte",
    "Char",
    "Decimal32",
    "Decimal64",
    "Decimal128",
    "Described",
    "Float",
    "Int",
    "Long",
    "Short",
    "Symbol",
    "Timestamp",
    "UByte",
    "UInt",
    "ULong",
    "UShort",
)

EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_ONE_MS: Final = _dt.timedelta(milliseconds=1)


class _BoundedInt(int):
    """An int that must fit the AMQP type it names."""

    __slots__ = ()
    _MIN: ClassVar[int] = 0
    _MAX: ClassVar[int] = 0

    def __new__(cls, value: SupportsIndex = 0) -> Self:
        v = operator.index(value)
        if not cls._MIN <= v <= cls._MAX:
            raise LocalProtocolError(f"{v} does not fit in AMQP {cls.__name__.lower()}")
        return int.__new__(cls, v)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"

    __str__ = int.__repr__


class UByte(_BoundedInt):
    """AMQP ubyte (0x50)."""

    __slots__ = ()
    _MAX = 0xFF


class UShort(_BoundedInt):
    """AMQP ushort (0x60)."""

    __slots__ = ()
    _MAX = 0xFFFF


class UInt(_BoundedInt):
    """AMQP uint (0x70, smalluint 0x52, uint0 0x43)."""

    __slots__ = ()
    _MAX = 0xFFFF_FFFF


class ULong(_BoundedInt):
    """AMQP ulong (0x80, smallulong 0x53, ulong0 0x44)."""

    __slots__ = ()
    _MAX = 0xFFFF_FFFF_FFFF_FFFF


class Byte(_BoundedInt):
    """AMQP byte (0x51)."""

    __slots__ = ()
    _MIN, _MAX = -0x80, 0x7F


class Short(_BoundedInt):
    """AMQP short (0x61)."""

    __slots__ = ()
    _MIN, _MAX = -0x8000, 0x7FFF


class Int(_BoundedInt):
    """AMQP int (0x71, smallint 0x54)."""

    __slots__ = ()
    _MIN, _MAX = -0x8000_0000, 0x7FFF_FFFF


class Long(_BoundedInt):
    """AMQP long (0x81, smalllong 0x55). A plain ``int`` in range encodes the same way;
    ``Long`` only refuses to fall back to ulong for values of 2**63 and above."""

    __slots__ = ()
    _MIN, _MAX = -(1 << 63), (1 << 63) - 1


class Timestamp(_BoundedInt):
    """AMQP timestamp (0x83): milliseconds since the Unix epoch, as a signed 64-bit int.

    Kept as an int so every wire value survives a round trip (``datetime`` covers only
    years 1-9999 and has microseconds); convert with :meth:`from_datetime` and
    :meth:`to_datetime`."""

    __slots__ = ()
    _MIN, _MAX = -(1 << 63), (1 << 63) - 1

    @classmethod
    def from_datetime(cls, value: _dt.datetime) -> Self:
        """Milliseconds since the epoch of an aware datetime (sub-millisecond part floored).
        Naive datetimes are refused: their meaning depends on the local time zone."""
        if value.tzinfo is None or value.utcoffset() is None:
            raise LocalProtocolError("naive datetime: attach a tzinfo (e.g. timezone.utc)")
        return cls((value - EPOCH) // _ONE_MS)

    def to_datetime(self) -> _dt.datetime:
        """An aware UTC datetime; :class:`DecodeError` if outside datetime's range."""
        try:
            return EPOCH + _dt.timedelta(milliseconds=int(self))
        except OverflowError:
            raise DecodeError(f"timestamp {int(self)} ms is outside datetime's range") from None


class Float(float):
    """AMQP float (0x72, IEEE 754 binary32). The value is rounded to single precision on
    construction, so it equals what a decoder returns."""

    __slots__ = ()

    def __new__(cls, value: SupportsFloat | SupportsIndex = 0.0) -> Self:
        try:
            single = F32.unpack(F32.pack(float(value)))[0]
        except (OverflowError, struct.error) as exc:
            raise LocalProtocolError(f"{value!r} does not fit in AMQP float") from exc
        return float.__new__(cls, single)

    def __repr__(self) -> str:
        return f"Float({float(self)!r})"

    __str__ = float.__repr__


class Symbol(str):
    """AMQP symbol (0xA3 sym8 / 0xB3 sym32): an ASCII string from a constrained domain.

    Equal to (and hashed as) the same plain string, so ``annotations["x-opt-key"]`` finds a
    decoded ``Symbol("x-opt-key")`` key."""

    __slots__ = ()

    def __new__(cls, value: str = "") -> Self:
        if not isinstance(value, str):
            raise TypeError(f"Symbol() takes a str, not {type(value).__name__}")
        if not value.isascii():
            raise LocalProtocolError(f"AMQP symbols are ASCII: {value!r}")
        return str.__new__(cls, value)

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"


class Char(str):
    """AMQP char (0x73): one Unicode scalar value, encoded as UTF-32BE."""

    __slots__ = ()

    def __new__(cls, value: str) -> Self:
        if not isinstance(value, str) or len(value) != 1:
            raise LocalProtocolError(f"AMQP char is exactly one character: {value!r}")
        if 0xD800 <= ord(value) <= 0xDFFF:
            raise LocalProtocolError(f"AMQP char cannot be a surrogate: {value!r}")
        return str.__new__(cls, value)

    def __repr__(self) -> str:
        return f"Char({str.__repr__(self)})"


@dataclass(frozen=True, slots=True)
class _Decimal:
    """IEEE 754 decimal, kept as its raw big-endian bytes (no arithmetic is offered)."""

    raw: bytes
    SIZE: ClassVar[int] = 0

    def __post_init__(self) -> None:
        raw: object = self.raw
        if isinstance(raw, (bytearray, memoryview)):
            raw = bytes(raw)
            object.__setattr__(self, "raw", raw)
        if not isinstance(raw, bytes) or len(raw) != self.SIZE:
            name = type(self).__name__
            raise LocalProtocolError(f"{name} takes {self.SIZE} raw bytes, got {raw!r}")


@dataclass(frozen=True, slots=True)
class Decimal32(_Decimal):
    """AMQP decimal32 (0x74), 4 raw bytes."""

    SIZE: ClassVar[int] = 4


@dataclass(frozen=True, slots=True)
class Decimal64(_Decimal):
    """AMQP decimal64 (0x84), 8 raw bytes."""

    SIZE: ClassVar[int] = 8


@dataclass(frozen=True, slots=True)
class Decimal128(_Decimal):
    """AMQP decimal128 (0x94), 16 raw bytes."""

    SIZE: ClassVar[int] = 16


def _descriptor(value: object) -> ULong | Symbol:
    if isinstance(value, (ULong, Symbol)):
        return value
    if isinstance(value, str):
        return Symbol(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return ULong(value)
    raise LocalProtocolError(f"an AMQP descriptor is a ulong or a symbol, not {value!r}")


@dataclass(frozen=True, slots=True, init=False)
class Described:
    """A described value (constructor 0x00): ``descriptor`` (a ulong code or a symbolic
    name; ints and strs are converted) and the ``value`` it describes."""

    descriptor: ULong | Symbol
    value: Any

    def __init__(self, descriptor: ULong | Symbol | int | str, value: Any) -> None:
        object.__setattr__(self, "descriptor", _descriptor(descriptor))
        object.__setattr__(self, "value", value)


#: What :class:`Array` accepts as ``element``: the Python type its items decode to.
#: ``Long`` is accepted as a synonym of ``int``; ``type(None)`` arrays are decode-only
#: curiosities (some peers emit them) and can be re-encoded when short.
ARRAY_ELEMENT_TYPES: Final[frozenset[type]] = frozenset(
    (
        type(None),
        bool,
        UByte,
        UShort,
        UInt,
        ULong,
        Byte,
        Short,
        Int,
        int,
        Float,
        float,
        Decimal32,
        Decimal64,
        Decimal128,
        Char,
        Timestamp,
        uuid.UUID,
        bytes,
        str,
        Symbol,
        list,
        dict,
    )
)


def _coerce(element: type[Any], x: object) -> object:
    """An array item as the element type (so ``Array(UInt, [1])`` holds ``UInt(1)``);
    items of other kinds are left for the encoder to refuse."""
    if type(x) is element:
        return x
    if isinstance(x, bool):
        return x
    if issubclass(element, _BoundedInt):
        if element is Timestamp and isinstance(x, _dt.datetime):
            return Timestamp.from_datetime(x)
        if isinstance(x, int):
            return element(x)
    elif issubclass(element, Float) and isinstance(x, int | float):
        return Float(x)
    elif issubclass(element, Symbol | Char) and isinstance(x, str):
        return element(x)
    elif element is int and isinstance(x, int):
        return int(x)
    elif element is float and isinstance(x, int | float):
        return float(x)
    elif element is str and isinstance(x, str):
        return str(x)
    elif element is bytes and isinstance(x, bytearray | memoryview):
        return bytes(x)
    return x


@dataclass(frozen=True, slots=True, init=False)
class Array:
    """An AMQP array (0xE0 array8 / 0xF0 array32): one element constructor, packed items.

    ``element`` is the Python type of the items (``UInt``, ``str``, ``Symbol``, ``int`` for
    long, ``float`` for double, ``list``, ``dict``, ``Array``, ...). With ``descriptor`` set,
    every item is a value described by it (an array of described types); ``items`` then
    holds the undescribed values."""

    element: type[Any]
    items: tuple[Any, ...] = ()
    descriptor: ULong | Symbol | None = field(default=None)

    def __init__(
        self,
        element: type[Any],
        items: Iterable[Any] = (),
        descriptor: ULong | Symbol | int | str | None = None,
    ) -> None:
        if element is Long:
            element = int
        if element not in ARRAY_ELEMENT_TYPES and element is not Array:
            raise LocalProtocolError(f"cannot make an AMQP array of {element!r}")
        object.__setattr__(self, "element", element)
        object.__setattr__(self, "items", tuple(_coerce(element, x) for x in items))
        desc = None if descriptor is None else _descriptor(descriptor)
        object.__setattr__(self, "descriptor", desc)

    def __repr__(self) -> str:
        described = "" if self.descriptor is None else f", descriptor={self.descriptor!r}"
        return f"Array({self.element.__name__}, {self.items!r}{described})"
