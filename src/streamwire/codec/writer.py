"""An append-only encoder over a ``bytearray`` with back-patched lengths.

String lengths are always UTF-8 byte counts. Out-of-range values and over-long strings
raise :class:`~streamwire.errors.LocalProtocolError` (we were asked to encode something the
wire cannot carry), never ``struct.error``.
"""

from __future__ import annotations

import struct
from typing import Final

from streamwire.codec._structs import (
    F32,
    F32LE,
    F64,
    F64LE,
    I8,
    I16,
    I16LE,
    I32,
    I32LE,
    I64,
    I64LE,
    U16,
    U16LE,
    U32,
    U32LE,
    U64,
    U64LE,
    BytesLike,
)
from streamwire.errors import LocalProtocolError

__all__ = ("Writer",)

_U128LE: Final = struct.Struct("<QQ")
_MASK64: Final = (1 << 64) - 1


class Writer:
    """Encode into a growing buffer. ``getvalue()`` returns the bytes written so far."""

    __slots__ = ("_buf",)

    def __init__(self, initial: BytesLike = b"") -> None:
        self._buf = bytearray(initial)

    def __len__(self) -> int:
        return len(self._buf)

    def getvalue(self) -> bytes:
        return bytes(self._buf)

    @property
    def buffer(self) -> bytearray:
        return self._buf

    def pack(self, st: struct.Struct, *values: object) -> Writer:
        """Append values packed with a precompiled struct."""
        try:
            self._buf += st.pack(*values)
        except struct.error as exc:
            raise LocalProtocolError(f"cannot encode {values!r} as {st.format!r}: {exc}") from exc
        return self

    # --- fixed width ---------------------------------------------------------------------

    def u8(self, v: int) -> Writer:
        try:  # bytearray.append: the hottest write (type codes, tags), no struct call
            self._buf.append(v)
        except (ValueError, TypeError) as exc:
            raise LocalProtocolError(f"cannot encode {v!r} as uint8: {exc}") from exc
        return self

    def i8(self, v: int) -> Writer:
        return self.pack(I8, v)

    def u16(self, v: int) -> Writer:
        return self.pack(U16, v)

    def i16(self, v: int) -> Writer:
        return self.pack(I16, v)

    def u32(self, v: int) -> Writer:
        return self.pack(U32, v)

    def i32(self, v: int) -> Writer:
        return self.pack(I32, v)

    def u64(self, v: int) -> Writer:
        return self.pack(U64, v)

    def i64(self, v: int) -> Writer:
        return self.pack(I64, v)

    def f32(self, v: float) -> Writer:
        return self.pack(F32, v)

    def f64(self, v: float) -> Writer:
        return self.pack(F64, v)

    def u16le(self, v: int) -> Writer:
        return self.pack(U16LE, v)

    def i16le(self, v: int) -> Writer:
        return self.pack(I16LE, v)

    def u32le(self, v: int) -> Writer:
        return self.pack(U32LE, v)

    def i32le(self, v: int) -> Writer:
        return self.pack(I32LE, v)

    def u64le(self, v: int) -> Writer:
        return self.pack(U64LE, v)

    def i64le(self, v: int) -> Writer:
        return self.pack(I64LE, v)

    def u128le(self, v: int) -> Writer:
        if not 0 <= v < 1 << 128:
            raise LocalProtocolError(f"{v} does not fit in uint128")
        return self.pack(_U128LE, v & _MASK64, v >> 64)

    def f32le(self, v: float) -> Writer:
        return self.pack(F32LE, v)

    def f64le(self, v: float) -> Writer:
        return self.pack(F64LE, v)

    # --- raw and length-prefixed ---------------------------------------------------------

    def raw(self, data: BytesLike) -> Writer:
        self._buf += data
        return self

    def zeros(self, n: int) -> Writer:
        self._buf += bytes(n)
        return self

    def prefixed(self, data: BytesLike | None, prefix: struct.Struct) -> Writer:
        """Bytes behind a length prefix; ``None`` is written as length -1 (signed prefixes)."""
        if data is None:
            return self.pack(prefix, -1)
        self.pack(prefix, len(data))
        self._buf += data
        return self

    def prefixed_str(self, value: str | None, prefix: struct.Struct) -> Writer:
        """A UTF-8 string behind its **byte** length."""
        return self.prefixed(None if value is None else value.encode("utf-8"), prefix)

    def string16(self, value: str | None) -> Writer:
        """RabbitMQ Streams string: int16 byte length (-1 = null) then UTF-8."""
        return self.prefixed_str(value, I16)

    def bytes32(self, data: BytesLike | None) -> Writer:
        """RabbitMQ Streams bytes: int32 length (-1 = null) then the bytes."""
        return self.prefixed(data, I32)

    # --- back-patching -------------------------------------------------------------------

    def reserve(self, st: struct.Struct) -> int:
        """Reserve room for a value written later with :meth:`patch`; returns its position."""
        pos = len(self._buf)
        self._buf += bytes(st.size)
        return pos

    def patch(self, pos: int, st: struct.Struct, value: object) -> None:
        try:
            st.pack_into(self._buf, pos, value)
        except struct.error as exc:
            raise LocalProtocolError(f"cannot encode {value!r} as {st.format!r}: {exc}") from exc

    def patch_length(self, pos: int, st: struct.Struct, *, include_prefix: bool = False) -> None:
        """Write the number of bytes after the reserved slot at ``pos`` (or from ``pos``)."""
        start = pos if include_prefix else pos + st.size
        self.patch(pos, st, len(self._buf) - start)
