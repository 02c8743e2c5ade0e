"""Frame base class, the key → class table, and field codecs shared by the frame modules.

Frame layout (all big-endian)::

    Size:uint32 | Key:uint16 | Version:uint16 | body

``encode_frame`` writes the whole frame including ``Size``; ``decode_frame`` takes what
follows ``Size`` (what :class:`~streamwire.codec.FrameAccumulator` hands out) and insists that
every byte is consumed. Field layouts follow docs/protocol/rabbitmq-streams.md §1.5; §1.7 there
records where the broker differs from PROTOCOL.adoc (int16 SASL challenge length, optional
arrays on error).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Self, TypeVar

from streamwire.codec._structs import I16, I32, U32, BytesLike
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.errors import DecodeError, LocalProtocolError
from streamwire.rabbitmq.protocol.constants import (
    MAX_STRING_BYTES,
    CommandKey,
    OffsetType,
    ResponseCode,
)

__all__ = (
    "FRAMES",
    "Frame",
    "ReferenceStreamRequest",
    "Response",
    "decode_frame",
    "encode_frame",
    "register",
)

_K = CommandKey
_OK = ResponseCode.OK

FRAMES: dict[int, type[Frame]] = {}
"""Wire key (response bit included) → frame class."""


_F = TypeVar("_F", bound="type[Frame]")


def register(*keys: int) -> Callable[[_F], _F]:
    """Class decorator: enter a frame class in :data:`FRAMES` under its key(s)."""

    def deco(cls: _F) -> _F:
        for key in keys or (cls.KEY,):
            if key in FRAMES:
                raise RuntimeError(f"frame key {key:#06x} registered twice")
            FRAMES[key] = cls
        return cls

    return deco


class Frame:
    """Base of every frame. Subclasses are frozen, slotted dataclasses."""

    __slots__ = ()
    KEY: ClassVar[int]
    VERSION: ClassVar[int] = 1

    @property
    def key(self) -> int:
        return self.KEY

    @property
    def wire_version(self) -> int:
        return self.VERSION

    def encode_body(self, w: Writer) -> None:
        """Append everything after Key and Version."""

    @classmethod
    def decode_body(cls, r: Reader, key: int, version: int) -> Self:
        """Read everything after Key and Version."""
        return cls()


def encode_frame(frame: Frame) -> bytes:
    """The complete frame, size prefix included."""
    w = Writer()
    pos = w.reserve(U32)
    w.u16(frame.key).u16(frame.wire_version)
    frame.encode_body(w)
    w.patch_length(pos, U32)
    return w.getvalue()


def decode_frame(data: BytesLike) -> Frame:
    """Decode one frame body (without the size prefix). Raises :class:`DecodeError`."""
    r = Reader(data, frame="frame")
    key = r.u16()
    version = r.u16()
    cls = FRAMES.get(key)
    if cls is None:
        raise DecodeError(f"unknown command key {key:#06x}", 0)
    r = Reader(data, frame=cls.__name__, start=4)
    frame = cls.decode_body(r, key, version)
    r.expect_end()
    return frame


# --- shared field codecs ------------------------------------------------------------------


def w_str(w: Writer, value: str) -> None:
    data = value.encode("utf-8")
    if len(data) > MAX_STRING_BYTES:
        raise LocalProtocolError(f"string of {len(data)} bytes exceeds {MAX_STRING_BYTES}")
    w.pack(I16, len(data)).raw(data)


def w_strs(w: Writer, values: tuple[str, ...]) -> None:
    w.i32(len(values))
    for v in values:
        w_str(w, v)


def r_strs(r: Reader) -> tuple[str, ...]:
    return tuple(r.string16() for _ in range(r.count(I32, 2, "string array")))


def w_map(w: Writer, values: dict[str, str]) -> None:
    w.i32(len(values))
    for k, v in values.items():
        w_str(w, k)
        w_str(w, v)


def r_map(r: Reader) -> dict[str, str]:
    n = r.count(I32, 4, "map")
    return {r.string16("key"): r.string16("value") for _ in range(n)}


def check_version(r: Reader, version: int, *allowed: int) -> None:
    if version not in allowed:
        raise r.error(f"version {version}")


def w_offset_spec(w: Writer, offset_type: int, offset: int | None) -> None:
    w.u16(offset_type)
    if offset_type == OffsetType.OFFSET:
        w.u64(offset or 0)
    elif offset_type == OffsetType.TIMESTAMP:
        w.i64(offset or 0)


def r_offset_spec(r: Reader) -> tuple[int, int | None]:
    offset_type = r.u16()
    if offset_type == OffsetType.OFFSET:
        return offset_type, r.u64()
    if offset_type == OffsetType.TIMESTAMP:
        return offset_type, r.i64()
    if offset_type > OffsetType.TIMESTAMP:
        raise r.error(f"offset type {offset_type}")
    return offset_type, None


@dataclass(frozen=True, slots=True)
class Response(Frame):
    """A response: CorrelationId, ResponseCode, then command-specific fields."""

    correlation_id: int
    code: int

    def encode_body(self, w: Writer) -> None:
        w.u32(self.correlation_id).u16(self.code)

    @property
    def ok(self) -> bool:
        return self.code == _OK


@dataclass(frozen=True, slots=True)
class ReferenceStreamRequest(Frame):
    """Requests that carry a publisher/consumer reference and a stream (QueryOffset,
    QueryPublisherSequence): CorrelationId, Reference, Stream."""

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
