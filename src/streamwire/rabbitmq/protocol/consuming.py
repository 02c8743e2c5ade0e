"""Consuming frames: subscribe, deliver, credit, unsubscribe, offsets, consumer updates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Self

from streamwire.codec.offset import Offset, OffsetKind
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.rabbitmq.protocol._frame import (
    Frame,
    ReferenceStreamRequest,
    Response,
    check_version,
    r_map,
    r_offset_spec,
    register,
    w_map,
    w_offset_spec,
    w_str,
)
from streamwire.rabbitmq.protocol.constants import RESPONSE_FLAG, CommandKey, OffsetType
from streamwire.rabbitmq.protocol.publishing import validate_reference

__all__ = (
    "offset_spec",
    "ConsumerUpdateRequest",
    "ConsumerUpdateResponse",
    "Credit",
    "CreditResponse",
    "Deliver",
    "QueryOffsetRequest",
    "QueryOffsetResponse",
    "ResolveOffsetSpecRequest",
    "ResolveOffsetSpecResponse",
    "StoreOffset",
    "SubscribeRequest",
    "UnsubscribeRequest",
)

_K = CommandKey


@register()
@dataclass(frozen=True, slots=True)
class SubscribeRequest(Frame):
    """``offset`` is the offset for type OFFSET, milliseconds since the epoch for TIMESTAMP."""

    KEY: ClassVar[int] = _K.SUBSCRIBE
    correlation_id: int
    subscription_id: int
    stream: str
    offset_type: int
    offset: int | None
    credit: int
    properties: dict[str, str] = field(default_factory=dict)

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u8(self.subscription_id)
        w_str(w, self.stream)
        w_offset_spec(w, self.offset_type, self.offset)
        w.u16(self.credit)
        w_map(w, self.properties)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, sub, stream = r.u32(), r.u8(), r.string16("stream")
        offset_type, offset = r_offset_spec(r)
        credit = r.u16()
        return cls(corr, sub, stream, offset_type, offset, credit, r_map(r) if r.remaining else {})


@register()
@dataclass(frozen=True, slots=True)
class Deliver(Frame):
    """One osiris chunk (v2 adds the committed chunk id). ``chunk`` is the raw chunk:
    48-byte header then entries; see :mod:`streamwire.rabbitmq.protocol.chunk`."""

    KEY: ClassVar[int] = _K.DELIVER
    subscription_id: int
    chunk: bytes | memoryview = field(repr=False)
    committed_chunk_id: int | None = None

    @property
    def wire_version(self) -> int:
        return 1 if self.committed_chunk_id is None else 2

    def encode_body(self, w: Writer) -> None:
        w.u8(self.subscription_id)
        if self.committed_chunk_id is not None:
            w.u64(self.committed_chunk_id)
        w.raw(self.chunk)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        check_version(r, version, 1, 2)
        sub = r.u8()
        committed = r.u64() if version == 2 else None
        return cls(sub, r.rest(), committed)  # a view of the frame: no copy


@register()
@dataclass(frozen=True, slots=True)
class Credit(Frame):
    KEY: ClassVar[int] = _K.CREDIT
    subscription_id: int
    credit: int

    def encode_body(self, w: Writer) -> None:
        w.u8(self.subscription_id).i16(self.credit)  # the broker parses it signed

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u8(), r.i16())


@register()
@dataclass(frozen=True, slots=True)
class CreditResponse(Frame):
    """Sent only when a Credit failed; it has no correlation id."""

    KEY: ClassVar[int] = _K.CREDIT | RESPONSE_FLAG
    code: int
    subscription_id: int

    def encode_body(self, w: Writer) -> None:
        w.u16(self.code).u8(self.subscription_id)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u16(), r.u8())


@register()
@dataclass(frozen=True, slots=True)
class UnsubscribeRequest(Frame):
    KEY: ClassVar[int] = _K.UNSUBSCRIBE
    correlation_id: int
    subscription_id: int

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u8(self.subscription_id)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.u8())


@register()
@dataclass(frozen=True, slots=True)
class StoreOffset(Frame):
    """Fire-and-forget: the broker never answers."""

    KEY: ClassVar[int] = _K.STORE_OFFSET
    reference: str
    stream: str
    offset: int

    def encode_body(self, w: Writer) -> None:
        validate_reference(self.reference)
        w_str(w, self.reference)
        w_str(w, self.stream)
        w.u64(self.offset)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.string16("reference"), r.string16("stream"), r.u64())


@register()
@dataclass(frozen=True, slots=True)
class QueryOffsetRequest(ReferenceStreamRequest):
    KEY: ClassVar[int] = _K.QUERY_OFFSET


@register()
@dataclass(frozen=True, slots=True)
class QueryOffsetResponse(Response):
    KEY: ClassVar[int] = _K.QUERY_OFFSET | RESPONSE_FLAG
    offset: int = 0

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code).u64(self.offset)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, code = r.u32(), r.u16()
        return cls(corr, code, r.u64() if r.remaining else 0)


@register()
@dataclass(frozen=True, slots=True)
class ConsumerUpdateRequest(Frame):
    """Broker → client (single active consumer): answer with ConsumerUpdateResponse."""

    KEY: ClassVar[int] = _K.CONSUMER_UPDATE
    correlation_id: int
    subscription_id: int
    active: bool

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u8(self.subscription_id).u8(1 if self.active else 0)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, sub, active = r.u32(), r.u8(), r.u8()
        if active > 1:
            raise r.error(f"active flag {active}", r.pos - 1)
        return cls(corr, sub, active == 1)


@register()
@dataclass(frozen=True, slots=True)
class ConsumerUpdateResponse(Response):
    """Client → broker. Offset type 0 (none) keeps the subscription's own spec."""

    KEY: ClassVar[int] = _K.CONSUMER_UPDATE | RESPONSE_FLAG
    offset_type: int = 0
    offset: int | None = None

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code)
        w_offset_spec(w, self.offset_type, self.offset)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, code = r.u32(), r.u16()
        offset_type, offset = r_offset_spec(r)
        return cls(corr, code, offset_type, offset)


def offset_spec(offset: Offset) -> tuple[int, int | None]:
    """The wire offset specification (type, value) of a start position; a timestamp goes on
    the wire in milliseconds."""
    kind = offset.kind
    if kind is OffsetKind.FIRST:
        return OffsetType.FIRST, None
    if kind is OffsetKind.LAST:
        return OffsetType.LAST, None
    if kind is OffsetKind.NEXT:
        return OffsetType.NEXT, None
    if kind is OffsetKind.OFFSET:
        return OffsetType.OFFSET, offset.value
    return OffsetType.TIMESTAMP, (offset.value or 0) // 1000


@register()
@dataclass(frozen=True, slots=True)
class ResolveOffsetSpecRequest(Frame):
    """RabbitMQ 4.3+."""

    KEY: ClassVar[int] = _K.RESOLVE_OFFSET_SPEC
    correlation_id: int
    stream: str
    offset_type: int
    offset: int | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id)
        w_str(w, self.stream)
        w_offset_spec(w, self.offset_type, self.offset)
        w_map(w, self.properties)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, stream = r.u32(), r.string16("stream")
        offset_type, offset = r_offset_spec(r)
        return cls(corr, stream, offset_type, offset, r_map(r))


@register()
@dataclass(frozen=True, slots=True)
class ResolveOffsetSpecResponse(Response):
    KEY: ClassVar[int] = _K.RESOLVE_OFFSET_SPEC | RESPONSE_FLAG
    offset_type: int = 0
    offset: int | None = None

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code)
        if self.offset is not None or self.offset_type:
            w_offset_spec(w, self.offset_type, self.offset)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, code = r.u32(), r.u16()
        if not r.remaining:
            return cls(corr, code)
        offset_type, offset = r_offset_spec(r)
        return cls(corr, code, offset_type, offset)
