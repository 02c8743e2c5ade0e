"""Stream management and topology frames: create/delete, metadata, stats, super streams."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Self

from streamwire.codec._structs import I32
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.rabbitmq.protocol._frame import (
    Frame,
    Response,
    r_map,
    r_strs,
    register,
    w_map,
    w_str,
    w_strs,
)
from streamwire.rabbitmq.protocol.constants import RESPONSE_FLAG, CommandKey, ResponseCode

__all__ = (
    "NO_LEADER",
    "Broker",
    "CreateRequest",
    "CreateSuperStreamRequest",
    "DeleteRequest",
    "DeleteSuperStreamRequest",
    "MetadataRequest",
    "MetadataResponse",
    "MetadataUpdate",
    "PartitionsRequest",
    "PartitionsResponse",
    "RouteRequest",
    "RouteResponse",
    "StreamMetadata",
    "StreamStatsRequest",
    "StreamStatsResponse",
)

_K = CommandKey
NO_LEADER = 0xFFFF


@register()
@dataclass(frozen=True, slots=True)
class CreateRequest(Frame):
    KEY: ClassVar[int] = _K.CREATE
    correlation_id: int
    stream: str
    arguments: dict[str, str] = field(default_factory=dict)

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id)
        w_str(w, self.stream)
        w_map(w, self.arguments)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.string16("stream"), r_map(r))


@dataclass(frozen=True, slots=True)
class _NamedRequest(Frame):
    correlation_id: int
    name: str

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id)
        w_str(w, self.name)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.string16())


@register()
@dataclass(frozen=True, slots=True)
class DeleteRequest(_NamedRequest):
    """Delete the stream ``name``."""

    KEY: ClassVar[int] = _K.DELETE


@register()
@dataclass(frozen=True, slots=True)
class StreamStatsRequest(_NamedRequest):
    """Statistics of the stream ``name`` (3.11+)."""

    KEY: ClassVar[int] = _K.STREAM_STATS


@register()
@dataclass(frozen=True, slots=True)
class PartitionsRequest(_NamedRequest):
    """Partition streams of the super stream ``name``."""

    KEY: ClassVar[int] = _K.PARTITIONS


@register()
@dataclass(frozen=True, slots=True)
class DeleteSuperStreamRequest(_NamedRequest):
    """Delete the super stream ``name`` (3.13+)."""

    KEY: ClassVar[int] = _K.DELETE_SUPER_STREAM


@register()
@dataclass(frozen=True, slots=True)
class MetadataRequest(Frame):
    KEY: ClassVar[int] = _K.METADATA
    correlation_id: int
    streams: tuple[str, ...]

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id)
        w_strs(w, self.streams)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r_strs(r))


@dataclass(frozen=True, slots=True)
class Broker:
    reference: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class StreamMetadata:
    """``leader`` is a broker reference; :data:`NO_LEADER` when none is elected or on error."""

    stream: str
    code: int
    leader: int
    replicas: tuple[int, ...]


@register()
@dataclass(frozen=True, slots=True)
class MetadataResponse(Frame):
    """The Metadata reply has no top-level response code: per-stream codes instead."""

    KEY: ClassVar[int] = _K.METADATA | RESPONSE_FLAG
    correlation_id: int
    brokers: tuple[Broker, ...]
    streams: tuple[StreamMetadata, ...]

    @property
    def code(self) -> int:
        return int(ResponseCode.OK)

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).i32(len(self.brokers))
        for b in self.brokers:
            w.u16(b.reference)
            w_str(w, b.host)
            w.u32(b.port)
        w.i32(len(self.streams))
        for s in self.streams:
            w_str(w, s.stream)
            w.u16(s.code).u16(s.leader).i32(len(s.replicas))
            for ref in s.replicas:
                w.u16(ref)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr = r.u32()
        brokers = tuple(
            Broker(r.u16(), r.string16("host"), r.u32()) for _ in range(r.count(I32, 8, "brokers"))
        )
        streams = []
        for _ in range(r.count(I32, 10, "streams")):
            name, code, leader = r.string16("stream"), r.u16(), r.u16()
            replicas = tuple(r.u16() for _ in range(r.count(I32, 2, "replicas")))
            streams.append(StreamMetadata(name, code, leader, replicas))
        return cls(corr, brokers, tuple(streams))


@register()
@dataclass(frozen=True, slots=True)
class MetadataUpdate(Frame):
    """Broker → client: the stream was deleted, moved or lost its local member."""

    KEY: ClassVar[int] = _K.METADATA_UPDATE
    code: int
    stream: str

    def encode_body(self, w: Writer) -> None:
        w.u16(self.code)
        w_str(w, self.stream)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u16(), r.string16("stream"))


@register()
@dataclass(frozen=True, slots=True)
class StreamStatsResponse(Response):
    KEY: ClassVar[int] = _K.STREAM_STATS | RESPONSE_FLAG
    stats: dict[str, int] = field(default_factory=dict)

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code).i32(len(self.stats))
        for k, v in self.stats.items():
            w_str(w, k)
            w.i64(v)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, code = r.u32(), r.u16()
        if not r.remaining:
            return cls(corr, code)
        n = r.count(I32, 10, "stats")
        return cls(corr, code, {r.string16("stat"): r.i64() for _ in range(n)})


@register()
@dataclass(frozen=True, slots=True)
class RouteRequest(Frame):
    KEY: ClassVar[int] = _K.ROUTE
    correlation_id: int
    routing_key: str
    super_stream: str

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id)
        w_str(w, self.routing_key)
        w_str(w, self.super_stream)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.string16("routing key"), r.string16("super stream"))


@dataclass(frozen=True, slots=True)
class _StreamListResponse(Response):
    streams: tuple[str, ...] = ()

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code)
        w_strs(w, self.streams)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        corr, code = r.u32(), r.u16()
        return cls(corr, code, r_strs(r) if r.remaining else ())


@register()
@dataclass(frozen=True, slots=True)
class RouteResponse(_StreamListResponse):
    """Streams bound to the routing key (3.10+: a list; empty when nothing matches)."""

    KEY: ClassVar[int] = _K.ROUTE | RESPONSE_FLAG


@register()
@dataclass(frozen=True, slots=True)
class PartitionsResponse(_StreamListResponse):
    """Partition streams in partition order."""

    KEY: ClassVar[int] = _K.PARTITIONS | RESPONSE_FLAG


@register()
@dataclass(frozen=True, slots=True)
class CreateSuperStreamRequest(Frame):
    KEY: ClassVar[int] = _K.CREATE_SUPER_STREAM
    correlation_id: int
    name: str
    partitions: tuple[str, ...]
    binding_keys: tuple[str, ...]
    arguments: dict[str, str] = field(default_factory=dict)

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id)
        w_str(w, self.name)
        w_strs(w, self.partitions)
        w_strs(w, self.binding_keys)
        w_map(w, self.arguments)

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        return cls(r.u32(), r.string16("name"), r_strs(r), r_strs(r), r_map(r))
