"""The TLV block of user headers and option blocks (docs/protocol/iggy.md §4.8–§4.10, §6.6).

A block is a flat run of ``[kind u8][length u32][data]`` fields consumed in pairs (key, then
value). Every length is 1..255, kinds are non-zero, the field count is even and the block
ends exactly at its boundary. Values use the shared :class:`~streamwire.codec.HeaderValue`
kinds and encodings.

Mapping onto ``dict[str, HeaderValue]`` (what :class:`~streamwire.codec.Message` carries):

* keys are sent as String TLVs (what the official Python SDK does by default);
* received keys of another kind become text: Raw keys as their hex digits, the others as
  ``str()`` of their value (Bool ``True``/``False``);
* received values of a kind newer than this table (code > 15, "forwarded" by servers for
  forward compatibility) are kept as Raw bytes.

Option blocks must use String keys without duplicates; requests send them sorted by key
(as the Rust SDK does) and without a length prefix, responses prefix them with a u32 length.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Final

from streamwire.codec._structs import BytesLike
from streamwire.codec.headers import HeaderKind, HeaderValue
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.errors import ConfigurationError, DecodeError
from streamwire.iggy.protocol._wire import Codec

__all__ = (
    "MAX_OPTIONS",
    "MAX_OPTIONS_BYTES",
    "MAX_USER_HEADERS_BYTES",
    "OPTIONS32",
    "OPTIONS_REST",
    "USER_HEADERS32",
    "decode_options",
    "decode_tlv",
    "decode_user_headers",
    "encode_options",
    "encode_tlv",
    "encode_user_headers",
)

MAX_USER_HEADERS_BYTES: Final = 100_000
MAX_OPTIONS: Final = 1024
MAX_OPTIONS_BYTES: Final = 100_000

_FIELD: Final = struct.Struct("<BI")
_KNOWN_KINDS: Final = frozenset(int(k) for k in HeaderKind)


def encode_tlv(pairs: Iterable[tuple[HeaderValue, HeaderValue]]) -> bytes:
    """Encode typed key/value pairs; raises :class:`ConfigurationError` on a length outside
    1..255 bytes."""
    w = Writer()
    for key, value in pairs:
        for part, what in ((key, "key"), (value, "value")):
            data = part.to_bytes()
            if not 1 <= len(data) <= 255:
                raise ConfigurationError(f"a header {what} must be 1..255 bytes, not {len(data)}")
            w.pack(_FIELD, part.kind, len(data)).raw(data)
    return w.getvalue()


def decode_tlv(data: BytesLike, *, what: str = "TLV block") -> list[tuple[int, bytes]]:
    """Validate a block and return its raw ``(kind, data)`` fields (an even number)."""
    r = Reader(data, frame=what)
    fields: list[tuple[int, bytes]] = []
    while not r.at_end():
        pos = r.pos
        kind = r.u8()
        n = r.u32le()
        if kind == 0:
            raise r.error("TLV kind 0", pos)
        if not 1 <= n <= 255:
            raise r.error(f"TLV length {n}", pos)
        fields.append((kind, r.bytes(n)))
    if len(fields) % 2:
        raise r.error(f"odd number of TLV fields ({len(fields)})")
    return fields


def _value(kind: int, data: bytes) -> HeaderValue:
    if kind not in _KNOWN_KINDS:
        return HeaderValue.raw(data)  # a newer kind: forwarded as its bytes
    return HeaderValue.from_bytes(kind, data)


def _key_text(kind: int, data: bytes) -> str:
    if kind == HeaderKind.STRING:
        return HeaderValue.from_bytes(kind, data).as_str()
    if kind not in _KNOWN_KINDS or kind == HeaderKind.RAW:
        return data.hex()
    return str(HeaderValue.from_bytes(kind, data).value)


def encode_user_headers(headers: Mapping[str, HeaderValue]) -> bytes:
    """String keys, in the mapping's order; the block may not exceed 100,000 bytes."""
    if not headers:
        return b""
    block = encode_tlv((HeaderValue.string(k), v) for k, v in headers.items())
    if len(block) > MAX_USER_HEADERS_BYTES:
        raise ConfigurationError(f"user headers of {len(block)} bytes exceed 100,000")
    return block


def decode_user_headers(data: BytesLike) -> dict[str, HeaderValue]:
    """A user-headers block as ``{key: value}`` (see the module notes for non-String keys)."""
    if not data:
        return {}
    fields = decode_tlv(data, what="user headers")
    out: dict[str, HeaderValue] = {}
    for i in range(0, len(fields), 2):
        (key_kind, key), (value_kind, value) = fields[i], fields[i + 1]
        out[_key_text(key_kind, key)] = _value(value_kind, value)
    return out


def encode_options(options: Mapping[str, HeaderValue]) -> bytes:
    """An options block: String keys sorted, at most 1024 entries and 100,000 bytes."""
    if len(options) > MAX_OPTIONS:
        raise ConfigurationError(f"{len(options)} options exceed {MAX_OPTIONS}")
    block = encode_tlv((HeaderValue.string(k), options[k]) for k in sorted(options))
    if len(block) > MAX_OPTIONS_BYTES:
        raise ConfigurationError(f"options block of {len(block)} bytes exceeds 100,000")
    return block


def decode_options(data: BytesLike) -> dict[str, HeaderValue]:
    """An options block: keys must be String and unique."""
    fields = decode_tlv(data, what="options block")
    out: dict[str, HeaderValue] = {}
    for i in range(0, len(fields), 2):
        (key_kind, key), (value_kind, value) = fields[i], fields[i + 1]
        if key_kind != HeaderKind.STRING:
            raise DecodeError(f"option key of kind {key_kind}", frame="options block")
        name = HeaderValue.from_bytes(key_kind, key).as_str()
        if name in out:
            raise DecodeError(f"duplicate option {name!r}", frame="options block")
        out[name] = _value(value_kind, value)
    return out


class _OptionsRest(Codec[dict[str, HeaderValue]]):
    """Request form: the block runs to the end of the body."""

    __slots__ = ()

    def write(self, w: Writer, value: dict[str, HeaderValue]) -> None:
        w.raw(encode_options(value))

    def read(self, r: Reader) -> dict[str, HeaderValue]:
        pos = r.pos
        data = bytes(r.rest())
        try:
            return decode_options(data)
        except DecodeError as exc:
            raise r.error(exc.what, pos) from None


class _Prefixed(Codec[dict[str, HeaderValue]]):
    """Response form: ``[length u32][block]``."""

    __slots__ = ("_options",)

    def __init__(self, *, options: bool) -> None:
        self._options = options

    def write(self, w: Writer, value: dict[str, HeaderValue]) -> None:
        block = encode_options(value) if self._options else encode_user_headers(value)
        w.u32le(len(block)).raw(block)

    def read(self, r: Reader) -> dict[str, HeaderValue]:
        pos = r.pos
        data = r.bytes(r.u32le())
        try:
            return decode_options(data) if self._options else decode_user_headers(data)
        except DecodeError as exc:
            raise r.error(exc.what, pos) from None


OPTIONS_REST: Final[Codec[dict[str, HeaderValue]]] = _OptionsRest()
OPTIONS32: Final[Codec[dict[str, HeaderValue]]] = _Prefixed(options=True)
USER_HEADERS32: Final[Codec[dict[str, HeaderValue]]] = _Prefixed(options=False)
