"""Precompiled ``struct.Struct`` objects shared by every codec (big- and little-endian)."""

from __future__ import annotations

import struct
from typing import Final

__all__ = (
    "F32",
    "F32LE",
    "F64",
    "F64LE",
    "I8",
    "I16",
    "I16LE",
    "I32",
    "I32LE",
    "I64",
    "I64LE",
    "U8",
    "U16",
    "U16LE",
    "U32",
    "U32LE",
    "U64",
    "U64LE",
    "BytesLike",
)

BytesLike = bytes | bytearray | memoryview

U8: Final = struct.Struct(">B")
I8: Final = struct.Struct(">b")
U16: Final = struct.Struct(">H")
I16: Final = struct.Struct(">h")
U32: Final = struct.Struct(">I")
I32: Final = struct.Struct(">i")
U64: Final = struct.Struct(">Q")
I64: Final = struct.Struct(">q")
F32: Final = struct.Struct(">f")
F64: Final = struct.Struct(">d")

U16LE: Final = struct.Struct("<H")
I16LE: Final = struct.Struct("<h")
U32LE: Final = struct.Struct("<I")
I32LE: Final = struct.Struct("<i")
U64LE: Final = struct.Struct("<Q")
I64LE: Final = struct.Struct("<q")
F32LE: Final = struct.Struct("<f")
F64LE: Final = struct.Struct("<d")
