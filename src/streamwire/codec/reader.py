"""A bounds-checked cursor over bytes, for every decoder in streamwire.

All reads raise :class:`~streamwire.errors.DecodeError` (never ``struct.error`` or
``IndexError``) when the data runs short, carrying the offset and what was being read.
Big-endian readers have plain names (``u16``); little-endian ones end in ``le``.
"""

from __future__ import annotations

import builtins
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
from streamwire.errors import DecodeError

__all__ = ("Reader",)

_U128LE: Final = struct.Struct("<QQ")


class Reader:
    """Sequential reader over a buffer.

    ``frame`` names what is being decoded, for error messages. The reader never copies the
    underlying buffer; :meth:`bytes` returns copies of the pieces asked for, :meth:`view`
    zero-copy slices.
    """

    __slots__ = ("_buf", "_end", "_frame", "pos")

    def __init__(
        self, data: BytesLike, *, frame: str | None = None, start: int = 0, end: int | None = None
    ) -> None:
        buf = data if isinstance(data, memoryview) else memoryview(data)
        if buf.ndim != 1 or buf.itemsize != 1:
            buf = buf.cast("B")
        self._buf = buf
        self._end = len(buf) if end is None else min(end, len(buf))
        self._frame = frame
        self.pos = start

    # --- state ---------------------------------------------------------------------------

    @property
    def remaining(self) -> int:
        """Bytes left before the end."""
        return self._end - self.pos

    @property
    def buffer(self) -> memoryview:
        """The whole underlying buffer."""
        return self._buf

    def at_end(self) -> bool:
        return self.pos >= self._end

    def expect_end(self) -> None:
        """Raise :class:`DecodeError` unless every byte was consumed."""
        if self.pos != self._end:
            raise self.error(f"{self._end - self.pos} trailing bytes")

    def error(self, what: str, offset: int | None = None) -> DecodeError:
        """A :class:`DecodeError` at the current (or given) offset for this frame."""
        return DecodeError(what, self.pos if offset is None else offset, frame=self._frame)

    def _need(self, n: int, what: str) -> int:
        pos = self.pos
        if n < 0 or pos + n > self._end:
            raise self.error(f"{what}: need {n} bytes, {self._end - pos} left")
        self.pos = pos + n
        return pos

    def unpack(self, st: struct.Struct, what: str = "value") -> tuple[object, ...]:
        """Unpack a precompiled struct at the cursor."""
        pos = self._need(st.size, what)
        return st.unpack_from(self._buf, pos)

    # --- fixed width, big-endian ---------------------------------------------------------

    def u8(self) -> int:
        pos = self.pos
        if pos >= self._end:  # inlined _need: the hottest read (type codes, tags)
            raise self.error(f"uint8: need 1 bytes, {self._end - pos} left")
        self.pos = pos + 1
        return self._buf[pos]

    def i8(self) -> int:
        return int(I8.unpack_from(self._buf, self._need(1, "int8"))[0])

    def u16(self) -> int:
        return int(U16.unpack_from(self._buf, self._need(2, "uint16"))[0])

    def i16(self) -> int:
        return int(I16.unpack_from(self._buf, self._need(2, "int16"))[0])

    def u32(self) -> int:
        return int(U32.unpack_from(self._buf, self._need(4, "uint32"))[0])

    def i32(self) -> int:
        return int(I32.unpack_from(self._buf, self._need(4, "int32"))[0])

    def u64(self) -> int:
        return int(U64.unpack_from(self._buf, self._need(8, "uint64"))[0])

    def i64(self) -> int:
        return int(I64.unpack_from(self._buf, self._need(8, "int64"))[0])

    def f32(self) -> float:
        return float(F32.unpack_from(self._buf, self._need(4, "float32"))[0])

    def f64(self) -> float:
        return float(F64.unpack_from(self._buf, self._need(8, "float64"))[0])

    # --- fixed width, little-endian ------------------------------------------------------

    def u16le(self) -> int:
        return int(U16LE.unpack_from(self._buf, self._need(2, "uint16"))[0])

    def i16le(self) -> int:
        return int(I16LE.unpack_from(self._buf, self._need(2, "int16"))[0])

    def u32le(self) -> int:
        return int(U32LE.unpack_from(self._buf, self._need(4, "uint32"))[0])

    def i32le(self) -> int:
        return int(I32LE.unpack_from(self._buf, self._need(4, "int32"))[0])

    def u64le(self) -> int:
        return int(U64LE.unpack_from(self._buf, self._need(8, "uint64"))[0])

    def i64le(self) -> int:
        return int(I64LE.unpack_from(self._buf, self._need(8, "int64"))[0])

    def u128le(self) -> int:
        lo, hi = _U128LE.unpack_from(self._buf, self._need(16, "uint128"))
        return int(lo) | (int(hi) << 64)

    def f32le(self) -> float:
        return float(F32LE.unpack_from(self._buf, self._need(4, "float32"))[0])

    def f64le(self) -> float:
        return float(F64LE.unpack_from(self._buf, self._need(8, "float64"))[0])

    # --- raw and length-prefixed ---------------------------------------------------------

    def skip(self, n: int) -> None:
        self._need(n, "skipped bytes")

    def bytes(self, n: int) -> bytes:
        """Copy ``n`` bytes out."""
        pos = self._need(n, "bytes")
        return bytes(self._buf[pos : pos + n])

    def view(self, n: int) -> memoryview:
        """A zero-copy slice of ``n`` bytes."""
        pos = self._need(n, "bytes")
        return self._buf[pos : pos + n]

    def sub(self, n: int, what: str = "nested value") -> Reader:
        """A reader over the next ``n`` bytes of the same buffer, for a nested structure
        with its own size field; this cursor moves past them. Offsets stay absolute, and
        the sub-reader cannot read past its end."""
        pos = self._need(n, what)
        sub = Reader.__new__(Reader)
        sub._buf = self._buf
        sub._end = pos + n
        sub._frame = self._frame
        sub.pos = pos
        return sub

    def rest(self) -> memoryview:
        """A zero-copy slice of everything left; the cursor moves to the end."""
        pos = self.pos
        self.pos = self._end
        return self._buf[pos : self._end]

    def _length(self, prefix: struct.Struct, what: str) -> int:
        return int(prefix.unpack_from(self._buf, self._need(prefix.size, f"{what} length"))[0])

    def prefixed(self, prefix: struct.Struct, what: str = "bytes") -> builtins.bytes | None:
        """Bytes behind a length prefix; a negative length (signed prefixes) is null."""
        n = self._length(prefix, what)
        if n < 0:
            if n != -1:
                raise self.error(f"{what}: negative length {n}", self.pos - prefix.size)
            return None
        pos = self._need(n, what)
        return builtins.bytes(self._buf[pos : pos + n])

    def prefixed_str(self, prefix: struct.Struct, what: str = "string") -> str | None:
        """A UTF-8 string behind a byte-length prefix; negative length is null."""
        n = self._length(prefix, what)
        if n < 0:
            if n != -1:
                raise self.error(f"{what}: negative length {n}", self.pos - prefix.size)
            return None
        pos = self._need(n, what)
        return self.decode_utf8(pos, n, what)

    def decode_utf8(self, pos: int, n: int, what: str = "string") -> str:
        """Decode ``n`` bytes at ``pos`` as UTF-8, as a :class:`DecodeError` on failure."""
        try:
            return str(self._buf[pos : pos + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"{what}: invalid UTF-8 ({exc.reason})", pos + exc.start) from None

    def count(self, prefix: struct.Struct, item_size: int, what: str = "array") -> int:
        """An element count, checked against the bytes left (``item_size`` is each item's
        minimum size), so a hostile count cannot make a decoder loop or allocate."""
        n = self._length(prefix, what)
        if n < 0 or n * item_size > self._end - self.pos:
            raise self.error(f"{what}: count {n} does not fit in {self._end - self.pos} bytes")
        return n

    # --- RabbitMQ Streams conventions (int16 strings, int32 bytes) ----------------------

    def string16(self, what: str = "string") -> str:
        """A non-null int16-length UTF-8 string."""
        value = self.prefixed_str(I16, what)
        if value is None:
            raise self.error(f"{what}: unexpected null")
        return value

    def opt_string16(self, what: str = "string") -> str | None:
        return self.prefixed_str(I16, what)

    def bytes32(self, what: str = "bytes") -> builtins.bytes | None:
        return self.prefixed(I32, what)
