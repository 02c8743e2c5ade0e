"""Publishing frames: declare/delete publisher, Publish v1/v2, confirms, errors, sequences.

``encode_publish`` is the hot path: it builds a whole Publish frame from (publishing id,
message bytes) pairs in one pass with precompiled structs and a single join.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, Self

from streamwire.codec._structs import I16, I32
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.errors import LocalProtocolError
from streamwire.rabbitmq.protocol._frame import Frame, Response, check_version, register, w_str
from streamwire.rabbitmq.protocol.constants import MAX_REFERENCE_BYTES, RESPONSE_FLAG, CommandKey

__all__ = (
    "DeclarePublisherRequest",
    "DeletePublisherRequest",
    "Publish",
    "PublishConfirm",
    "PublishEntry",
    "PublishError",
    "QueryPublisherSequenceRequest",
    "QueryPublisherSequenceResponse",
    "encode_publish",
    "publish_header_size",
    "validate_reference",
)

_K = CommandKey
_HEADER: Final = struct.Struct(">IHHBi")  # size, key, version, publisher id, count
_ENTRY_V1: Final = struct.Struct(">QI")  # publishing id, simple-entry size
_ID: Final = struct.Struct(">Q")
_SIZE: Final = struct.Struct(">I")
_NULL_FILTER: Final = I16.pack(-1)


def validate_reference(reference: str) -> None:
    """Publisher/consumer references are refused by the broker above 255 UTF-8 bytes."""
    if len(reference.encode("utf-8")) > MAX_REFERENCE_BYTES:
        raise LocalProtocolError(f"reference {reference!r} is longer than 255 bytes")


@register()
@dataclass(frozen=True, slots=True)
class DeclarePublisherRequest(Frame):
    """``reference`` "" means no deduplication (never null: 3.10 closes the connection)."""

    KEY: ClassVar[int] = _K.DECLARE_PUBLISHER
    correlation_id: int
    publisher_id: int
    reference: str
    stream: str

    def encode_body(self, w: Writer) -> None:
        validate_reference(self.reference)
        w.u32(self.correlation_id).u8(self.publisher_id)
        w_str(w, self.reference)
        w_str(w, self.stream)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.u8(), r.opt_string16("reference") or "", r.string16("stream"))


@register()
@dataclass(frozen=True, slots=True)
class DeletePublisherRequest(Frame):
    KEY: ClassVar[int] = _K.DELETE_PUBLISHER
    correlation_id: int
    publisher_id: int

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u8(self.publisher_id)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.u8())


@register()
@dataclass(frozen=True, slots=True)
class QueryPublisherSequenceRequest(Frame):
    KEY: ClassVar[int] = _K.QUERY_PUBLISHER_SEQUENCE
    correlation_id: int
    reference: str
    stream: str

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id)
        w_str(w, self.reference)
        w_str(w, self.stream)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.string16("reference"), r.string16("stream"))


@register()
@dataclass(frozen=True, slots=True)
class QueryPublisherSequenceResponse(Response):
    KEY: ClassVar[int] = _K.QUERY_PUBLISHER_SEQUENCE | RESPONSE_FLAG
    sequence: int = 0

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code).u64(self.sequence)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, code = r.u32(), r.u16()
        return cls(corr, code, r.u64() if r.remaining else 0)


@dataclass(frozen=True, slots=True)
class PublishEntry:
    """One entry of a Publish frame: ``data`` is the complete osiris entry as stored (a
    simple entry's 4-byte size included, or a sub-batch entry)."""

    publishing_id: int
    data: bytes
    filter_value: str | None = None


def _read_entry(r: Reader) -> bytes:
    start = r.pos
    first = r.u8()
    if first & 0x80:  # sub-batch: flags, records u16, uncompressed u32, size u32, body
        r.skip(2 + 4)
        size = r.u32()
    else:
        r.pos = start
        size = r.u32()
    r.skip(size)
    return bytes(r.buffer[start : r.pos])


@register()
@dataclass(frozen=True, slots=True)
class Publish(Frame):
    """Publish v1 (entries) or v2 (entries with filter values; simple entries only)."""

    KEY: ClassVar[int] = _K.PUBLISH
    publisher_id: int
    entries: tuple[PublishEntry, ...]
    version: int = 1

    @property
    def wire_version(self) -> int:
        return self.version

    def encode_body(self, w: Writer) -> None:
        w.u8(self.publisher_id).i32(len(self.entries))
        for e in self.entries:
            w.u64(e.publishing_id)
            if self.version >= 2:
                if e.filter_value is None:
                    w.raw(_NULL_FILTER)
                else:
                    w_str(w, e.filter_value)
            w.raw(e.data)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        check_version(r, version, 1, 2)
        publisher_id = r.u8()
        n = r.count(I32, 12, "entries")
        entries = []
        for _ in range(n):
            pid = r.u64()
            fv = r.opt_string16("filter value") if version >= 2 else None
            entries.append(PublishEntry(pid, _read_entry(r), fv))
        return cls(publisher_id, tuple(entries), version)


def publish_header_size() -> int:
    """Bytes of a Publish frame before its first entry (size prefix included)."""
    return _HEADER.size


def encode_publish(
    publisher_id: int,
    messages: Sequence[tuple[int, bytes] | tuple[int, bytes, str | None]],
    *,
    filter_values: Sequence[str | None] | None = None,
) -> bytes:
    """A complete Publish frame of simple entries: v1, or v2 when ``filter_values`` is given.

    ``messages`` are (publishing id, message bytes) pairs (items may carry more fields after
    those two, which are ignored). One pass, one join.
    """
    parts: list[bytes] = [b""]
    append = parts.append
    size = _HEADER.size - 4
    try:
        if filter_values is None:
            pack = _ENTRY_V1.pack
            for item in messages:
                body = item[1]
                n = len(body)
                append(pack(item[0], n))
                append(body)
                size += 12 + n
            version = 1
        else:
            for item, fv in zip(messages, filter_values, strict=True):
                body = item[1]
                append(_ID.pack(item[0]))
                if fv is None:
                    append(_NULL_FILTER)
                    size += 2
                else:
                    raw = fv.encode("utf-8")
                    append(I16.pack(len(raw)) + raw)
                    size += 2 + len(raw)
                append(_SIZE.pack(len(body)))
                append(body)
                size += 12 + len(body)
            version = 2
        parts[0] = _HEADER.pack(size, _K.PUBLISH, version, publisher_id, len(messages))
    except (struct.error, ValueError) as exc:  # ValueError: filter_values of another length
        raise LocalProtocolError(f"cannot encode Publish: {exc}") from exc
    return b"".join(parts)


@register()
@dataclass(frozen=True, slots=True)
class PublishConfirm(Frame):
    KEY: ClassVar[int] = _K.PUBLISH_CONFIRM
    publisher_id: int
    publishing_ids: tuple[int, ...]

    def encode_body(self, w: Writer) -> None:
        w.u8(self.publisher_id).i32(len(self.publishing_ids))
        for pid in self.publishing_ids:
            w.u64(pid)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        publisher_id = r.u8()
        n = r.count(I32, 8, "publishing ids")
        buf, pos = r.buffer, r.pos
        r.skip(8 * n)
        ids = struct.unpack_from(f">{n}Q", buf, pos)
        return cls(publisher_id, ids)


@register()
@dataclass(frozen=True, slots=True)
class PublishError(Frame):
    KEY: ClassVar[int] = _K.PUBLISH_ERROR
    publisher_id: int
    errors: tuple[tuple[int, int], ...]
    """(publishing id, response code) pairs."""

    def encode_body(self, w: Writer) -> None:
        w.u8(self.publisher_id).i32(len(self.errors))
        for pid, code in self.errors:
            w.u64(pid).u16(code)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        publisher_id = r.u8()
        n = r.count(I32, 10, "publishing errors")
        return cls(publisher_id, tuple((r.u64(), r.u16()) for _ in range(n)))
