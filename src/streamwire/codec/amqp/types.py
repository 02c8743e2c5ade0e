"""The AMQP 1.0 type system: encode and decode every primitive and compound type.

Encoding (:func:`encode_value`, :func:`write_value`) picks the AMQP type from the Python
type and then the smallest encoding of it; wrap a value to force another type.

=====================  ===============================================================
Python value           AMQP encoding
=====================  ===============================================================
``None``               null 0x40
``bool``               true 0x41 / false 0x42
``int``                long: smalllong 0x55 (-128..127) or long 0x81; ulong 0x80 from
                       2**63 to 2**64-1; beyond that LocalProtocolError
``float``              double 0x82
``str``                string: str8 0xA1 when the UTF-8 form is <= 255 bytes, else str32
``bytes``/bytearray/   binary: vbin8 0xA0 / vbin32 0xB0
memoryview
``uuid.UUID``          uuid 0x98
``datetime`` (aware)   timestamp 0x83 (ms since the epoch; naive datetimes are refused)
``list``/``tuple``     list0 0x45 when empty, list8 0xC0 when size and count < 256,
                       else list32 0xD0
``dict``/Mapping       map8 0xC1 when size and count < 256, else map32 0xD1
``UByte``/``UShort``   ubyte 0x50 / ushort 0x60
``UInt``               uint0 0x43 (0), smalluint 0x52 (< 256), uint 0x70
``ULong``              ulong0 0x44 (0), smallulong 0x53 (< 256), ulong 0x80
``Byte``/``Short``     byte 0x51 / short 0x61
``Int``                smallint 0x54 (-128..127), int 0x71
``Long``               as ``int``, without the ulong fallback
``Float``              float 0x72
``Char``               char 0x73 (UTF-32BE)
``Timestamp``          timestamp 0x83
``Symbol``             sym8 0xA3 / sym32 0xB3 (ASCII)
``Decimal32/64/128``   decimal32 0x74 / decimal64 0x84 / decimal128 0x94 (raw bytes)
``Described``          0x00, descriptor (smallulong/ulong/symbol), value
``Array``              array8 0xE0 / array32 0xF0, one element constructor
=====================  ===============================================================

Decoding (:func:`decode_value`, :func:`read_value`) returns the type that keeps the AMQP
type visible wherever plain Python would lose it: null ``None``; booleans ``bool``; ubyte
``UByte``; ushort ``UShort``; uint (all three codes) ``UInt``; ulong (all three)
``ULong``; byte ``Byte``; short ``Short``; int/smallint ``Int``; long/smalllong plain
``int``; float ``Float``; double plain ``float``; decimals ``Decimal32/64/128``; char
``Char``; timestamp ``Timestamp``; uuid ``uuid.UUID``; binary ``bytes``; string ``str``;
symbol ``Symbol``; lists ``list``; maps ``dict``; arrays ``Array``; described values
``Described``. Every decoded value re-encodes to an equivalent encoding (the smallest one).

The wrappers compare equal to the plain values (``UInt(5) == 5``, ``Symbol("a") == "a"``),
so maps whose keys are equal in Python but distinct in AMQP (``1`` and ``UInt(1)``, a
string and a symbol with the same text) are refused by the decoder as duplicate keys, and
maps with unhashable keys (lists, maps) as unhashable.
"""

from __future__ import annotations

from streamwire.codec.amqp._codes import MAX_DEPTH
from streamwire.codec.amqp._decode import decode_value, read_value
from streamwire.codec.amqp._encode import encode_value, write_value
from streamwire.codec.amqp._wrappers import (
    ARRAY_ELEMENT_TYPES,
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

__all__ = (
    "ARRAY_ELEMENT_TYPES",
    "MAX_DEPTH",
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
    "decode_value",
    "encode_value",
    "read_value",
    "write_value",
)
