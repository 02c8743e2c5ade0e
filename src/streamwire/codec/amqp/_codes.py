"""AMQP 1.0 type codes (format codes) and the limits shared by the encoder and decoder."""

from __future__ import annotations

from typing import Final

__all__ = (
    "ARRAY8",
    "ARRAY32",
    "BINARY_CODES",
    "BOOLEAN",
    "BYTE",
    "CHAR",
    "DECIMAL32",
    "DECIMAL64",
    "DECIMAL128",
    "DESCRIBED",
    "DOUBLE",
    "FALSE",
    "FLOAT",
    "INT",
    "LIST0",
    "LIST8",
    "LIST32",
    "LIST_CODES",
    "LONG",
    "MAP8",
    "MAP32",
    "MAP_CODES",
    "MAX_DEPTH",
    "NULL",
    "SHORT",
    "SMALLINT",
    "SMALLLONG",
    "SMALLUINT",
    "SMALLULONG",
    "STR8",
    "STR32",
    "SYM8",
    "SYM32",
    "TIMESTAMP",
    "TRUE",
    "UBYTE",
    "UINT",
    "UINT0",
    "ULONG",
    "ULONG0",
    "USHORT",
    "UUID",
    "VBIN8",
    "VBIN32",
    "ZERO_WIDTH",
)

DESCRIBED: Final = 0x00
NULL: Final = 0x40
TRUE: Final = 0x41
FALSE: Final = 0x42
BOOLEAN: Final = 0x56
UBYTE: Final = 0x50
BYTE: Final = 0x51
USHORT: Final = 0x60
SHORT: Final = 0x61
UINT: Final = 0x70
SMALLUINT: Final = 0x52
UINT0: Final = 0x43
INT: Final = 0x71
SMALLINT: Final = 0x54
ULONG: Final = 0x80
SMALLULONG: Final = 0x53
ULONG0: Final = 0x44
LONG: Final = 0x81
SMALLLONG: Final = 0x55
FLOAT: Final = 0x72
DOUBLE: Final = 0x82
DECIMAL32: Final = 0x74
DECIMAL64: Final = 0x84
DECIMAL128: Final = 0x94
CHAR: Final = 0x73
TIMESTAMP: Final = 0x83
UUID: Final = 0x98
VBIN8: Final = 0xA0
VBIN32: Final = 0xB0
STR8: Final = 0xA1
STR32: Final = 0xB1
SYM8: Final = 0xA3
SYM32: Final = 0xB3
LIST0: Final = 0x45
LIST8: Final = 0xC0
LIST32: Final = 0xD0
MAP8: Final = 0xC1
MAP32: Final = 0xD1
ARRAY8: Final = 0xE0
ARRAY32: Final = 0xF0

BINARY_CODES: Final = frozenset((VBIN8, VBIN32))
LIST_CODES: Final = frozenset((LIST0, LIST8, LIST32))
MAP_CODES: Final = frozenset((MAP8, MAP32))
#: Constructors whose values take no bytes after the constructor.
ZERO_WIDTH: Final = frozenset((NULL, TRUE, FALSE, UINT0, ULONG0, LIST0))

#: Deepest nesting of compound values (list, map, array, described) either side accepts,
#: so hostile input cannot recurse without bound.
MAX_DEPTH: Final = 64
