"""Typed header values shared by every protocol.

The kinds and their codes are Iggy's (unchanged since its first headers): Raw, String, Bool,
Int8..Int128, Uint8..Uint128, Float32, Float64. A :class:`HeaderValue` holds the kind and a
validated Python value; :meth:`HeaderValue.to_bytes` gives the canonical little-endian wire
form (Iggy's), :meth:`HeaderValue.from_bytes` reads it back with validation. Each protocol
maps these onto its native form (AMQP application properties, Liftbridge's
``map<string, bytes>``, Iggy's TLV block).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from streamwire.codec._structs import BytesLike
from streamwire.errors import ConfigurationError, DecodeError, HeaderKindError

__all__ = ("HeaderInput", "HeaderKind", "HeaderValue", "normalize_headers")


class HeaderKind(IntEnum):
    """Header value kinds with their wire codes."""

    RAW = 1
    STRING = 2
    BOOL = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    INT128 = 8
    UINT8 = 9
    UINT16 = 10
    UINT32 = 11
    UINT64 = 12
    UINT128 = 13
    FLOAT32 = 14
    FLOAT64 = 15


# kind -> (byte width, signed) for the integer kinds
_INTS: Final[dict[HeaderKind, tuple[int, bool]]] = {
    HeaderKind.INT8: (1, True),
    HeaderKind.INT16: (2, True),
    HeaderKind.INT32: (4, True),
    HeaderKind.INT64: (8, True),
    HeaderKind.INT128: (16, True),
    HeaderKind.UINT8: (1, False),
    HeaderKind.UINT16: (2, False),
    HeaderKind.UINT32: (4, False),
    HeaderKind.UINT64: (8, False),
    HeaderKind.UINT128: (16, False),
}
_FLOATS: Final[dict[HeaderKind, struct.Struct]] = {
    HeaderKind.FLOAT32: struct.Struct("<f"),
    HeaderKind.FLOAT64: struct.Struct("<d"),
}

HeaderPython = bytes | str | bool | int | float


def _int_range(kind: HeaderKind) -> tuple[int, int]:
    width, signed = _INTS[kind]
    bits = width * 8
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


@dataclass(frozen=True, slots=True)
class HeaderValue:
    """A header value with its kind. Construct with the class methods or :meth:`of`."""

    kind: HeaderKind
    value: HeaderPython

    def __post_init__(self) -> None:
        kind, value = self.kind, self.value
        if not isinstance(kind, HeaderKind):
            raise ConfigurationError(f"not a header kind: {kind!r}")
        if kind is HeaderKind.RAW:
            if not isinstance(value, bytes):
                raise ConfigurationError("a Raw header value must be bytes")
        elif kind is HeaderKind.STRING:
            if not isinstance(value, str):
                raise ConfigurationError("a String header value must be str")
        elif kind is HeaderKind.BOOL:
            if not isinstance(value, bool):
                raise ConfigurationError("a Bool header value must be bool")
        elif kind in _INTS:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigurationError(f"an {kind.name.title()} header value must be int")
            low, high = _int_range(kind)
            if not low <= value <= high:
                raise ConfigurationError(f"{value} is out of range for {kind.name.title()}")
        else:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigurationError(f"a {kind.name.title()} header value must be float")
            value = float(value)
            if kind is HeaderKind.FLOAT32 and math.isfinite(value):
                try:
                    value = _FLOATS[kind].unpack(_FLOATS[kind].pack(value))[0]
                except OverflowError:
                    raise ConfigurationError(f"{value} does not fit in Float32") from None
            object.__setattr__(self, "value", value)

    # --- construction --------------------------------------------------------------------

    @classmethod
    def raw(cls, value: BytesLike) -> HeaderValue:
        return cls(HeaderKind.RAW, bytes(value))

    @classmethod
    def string(cls, value: str) -> HeaderValue:
        return cls(HeaderKind.STRING, value)

    @classmethod
    def boolean(cls, value: bool) -> HeaderValue:
        return cls(HeaderKind.BOOL, value)

    @classmethod
    def int8(cls, value: int) -> HeaderValue:
        return cls(HeaderKind.INT8, value)

    @classmethod
    def int16(cls, value: int) -> HeaderValue:
        return cls(HeaderKind.INT16, value)

    @classmethod
    def int32(cls, value: int) -> HeaderValue:
        return cls(HeaderKind.INT32, value)

    @classmethod
    def int64(cls, value: int) -> HeaderValue:
        return cls(HeaderKind.INT64, value)

    @classmethod
    def int128(cls, value: int) -> HeaderValue:
        return cls(HeaderKind.INT128, value)

    @classmethod
    def uint8(cls, value: int) -> HeaderValue:
        return cls(HeaderKind.UINT8, value)

    @classmethod
    def uint16(cls, value: int) -> HeaderValue:
        return cls(HeaderKind.UINT16, value)

    @classmethod
    def uint32(cls, value: int) -> HeaderValue:
        return cls(HeaderKind.UINT32, value)

    @classmethod
    def uint64(cls, value: int) -> HeaderValue:
        return cls(HeaderKind.UINT64, value)

    @classmethod
    def uint128(cls, value: int) -> HeaderValue:
        return cls(HeaderKind.UINT128, value)

    @classmethod
    def float32(cls, value: float) -> HeaderValue:
        return cls(HeaderKind.FLOAT32, value)

    @classmethod
    def float64(cls, value: float) -> HeaderValue:
        return cls(HeaderKind.FLOAT64, value)

    @classmethod
    def of(cls, value: HeaderValue | BytesLike | str | bool | int | float) -> HeaderValue:
        """Infer the kind from a Python value: bytes → Raw, str → String, bool → Bool,
        int → Int64 (Uint64, Int128 or Uint128 when it does not fit), float → Float64."""
        if isinstance(value, HeaderValue):
            return value
        if isinstance(value, bool):
            return cls(HeaderKind.BOOL, value)
        if isinstance(value, int):
            for kind in (HeaderKind.INT64, HeaderKind.UINT64, HeaderKind.INT128):
                low, high = _int_range(kind)
                if low <= value <= high:
                    return cls(kind, value)
            return cls(HeaderKind.UINT128, value)
        if isinstance(value, float):
            return cls(HeaderKind.FLOAT64, value)
        if isinstance(value, str):
            return cls(HeaderKind.STRING, value)
        if isinstance(value, bytes | bytearray | memoryview):
            return cls(HeaderKind.RAW, bytes(value))
        raise ConfigurationError(f"cannot use {type(value).__name__} as a header value")

    # --- wire form -----------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Canonical little-endian encoding (Iggy's wire form)."""
        kind, value = self.kind, self.value
        if kind is HeaderKind.RAW:
            return value  # type: ignore[return-value]
        if kind is HeaderKind.STRING:
            return value.encode("utf-8")  # type: ignore[union-attr]
        if kind is HeaderKind.BOOL:
            return b"\x01" if value else b"\x00"
        if kind in _INTS:
            width, signed = _INTS[kind]
            return value.to_bytes(width, "little", signed=signed)  # type: ignore[union-attr]
        return _FLOATS[kind].pack(value)

    @classmethod
    def from_bytes(cls, kind: int, data: BytesLike) -> HeaderValue:
        """Decode the wire form; raises :class:`DecodeError` for a bad kind, size or text."""
        try:
            hk = HeaderKind(kind)
        except ValueError:
            raise DecodeError(f"header kind {kind}") from None
        raw = bytes(data)
        if hk is HeaderKind.RAW:
            return cls(hk, raw)
        if hk is HeaderKind.STRING:
            try:
                return cls(hk, raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise DecodeError("String header: invalid UTF-8") from None
        if hk is HeaderKind.BOOL:
            if raw not in (b"\x00", b"\x01"):
                raise DecodeError(f"Bool header of {len(raw)} bytes {raw[:2].hex()}")
            return cls(hk, raw == b"\x01")
        if hk in _INTS:
            width, signed = _INTS[hk]
            if len(raw) != width:
                raise DecodeError(f"{hk.name.title()} header of {len(raw)} bytes")
            return cls(hk, int.from_bytes(raw, "little", signed=signed))
        st = _FLOATS[hk]
        if len(raw) != st.size:
            raise DecodeError(f"{hk.name.title()} header of {len(raw)} bytes")
        return cls(hk, st.unpack(raw)[0])

    # --- typed accessors -----------------------------------------------------------------

    def _expect(self, *kinds: HeaderKind) -> None:
        if self.kind not in kinds:
            names = "/".join(k.name.title() for k in kinds)
            raise HeaderKindError(f"header is {self.kind.name.title()}, not {names}")

    def as_bytes(self) -> bytes:
        """Raw and String values as bytes (String as UTF-8)."""
        self._expect(HeaderKind.RAW, HeaderKind.STRING)
        return self.to_bytes()

    def as_str(self) -> str:
        self._expect(HeaderKind.STRING)
        return self.value  # type: ignore[return-value]

    def as_bool(self) -> bool:
        self._expect(HeaderKind.BOOL)
        return self.value  # type: ignore[return-value]

    def as_int(self) -> int:
        self._expect(*_INTS)
        return self.value  # type: ignore[return-value]

    def as_float(self) -> float:
        self._expect(HeaderKind.FLOAT32, HeaderKind.FLOAT64)
        return self.value  # type: ignore[return-value]

    def __repr__(self) -> str:
        name = "boolean" if self.kind is HeaderKind.BOOL else self.kind.name.lower()
        return f"HeaderValue.{name}({self.value!r})"


HeaderInput = HeaderValue | BytesLike | str | bool | int | float
"""What a header mapping may hold: a HeaderValue or a plain Python value (see ``of``)."""


def normalize_headers(
    headers: Mapping[str, HeaderInput] | None,
) -> dict[str, HeaderValue]:
    """Turn a user's mapping into ``dict[str, HeaderValue]``; keys must be non-empty str."""
    if not headers:
        return {}
    out: dict[str, HeaderValue] = {}
    for key, value in headers.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"header keys must be non-empty strings, got {key!r}")
        out[key] = value if isinstance(value, HeaderValue) else HeaderValue.of(value)
    return out
