"""Diagnostics and cluster-mode commands (docs/protocol/iggy.md §3 codes 11, 13, 14).

streamwire's client does not use them; they are here so that every layout of
docs/protocol/iggy.md has a codec (and so that the test double can parse them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.iggy.protocol._wire import (
    NAME,
    REST,
    STR32,
    U8,
    U64,
    Codec,
    Counted,
    Nested,
    Payload,
    RequestPayload,
    wire,
)
from streamwire.iggy.protocol.constants import Command

__all__ = (
    "AttachConsumerSession",
    "DescribeOptions",
    "GetSnapshot",
    "OptionSpec",
    "OptionSpecs",
    "Snapshot",
)


class _U128(Codec[int]):
    __slots__ = ()

    def write(self, w: Writer, value: int) -> None:
        w.u128le(value)

    def read(self, r: Reader) -> int:
        return r.u128le()


class _U8List(Codec[tuple[int, ...]]):
    """``[count u8][u8 × count]``."""

    __slots__ = ()

    def write(self, w: Writer, value: tuple[int, ...]) -> None:
        w.u8(len(value))
        for item in value:
            w.u8(item)

    def read(self, r: Reader) -> tuple[int, ...]:
        return tuple(r.bytes(r.u8()))


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot(Payload):
    """A zipped diagnostics archive."""

    archive: bytes = field(default=b"", repr=False, metadata=wire(REST))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetSnapshot(RequestPayload[Snapshot]):
    """Compression 1 (stored) .. 6 (xz); types 1..6, 100 = all."""

    command: ClassVar = Command.GET_SNAPSHOT
    reply: ClassVar = Snapshot

    compression: int = field(default=1, metadata=wire(U8))
    types: tuple[int, ...] = field(default=(100,), metadata=wire(_U8List()))


@dataclass(frozen=True, slots=True, kw_only=True)
class OptionSpec(Payload):
    key: str = field(metadata=wire(NAME))
    kind: int = field(metadata=wire(U8))
    default: str = field(metadata=wire(STR32))
    description: str = field(metadata=wire(STR32))


@dataclass(frozen=True, slots=True, kw_only=True)
class OptionSpecs(Payload):
    options: tuple[OptionSpec, ...] = field(
        default=(), metadata=wire(Counted(Nested(OptionSpec), 10))
    )


@dataclass(frozen=True, slots=True)
class DescribeOptions(RequestPayload[OptionSpecs]):
    """``scope``: 1 topic, 2 stream, 3 user."""

    command: ClassVar = Command.DESCRIBE_OPTIONS
    reply: ClassVar = OptionSpecs

    scope: int = field(metadata=wire(U8))


@dataclass(frozen=True, slots=True, kw_only=True)
class AttachConsumerSession(RequestPayload[None]):
    """Cluster-mode data connections only (the reply is not used)."""

    command: ClassVar = Command.ATTACH_CONSUMER_SESSION

    client_id: int = field(metadata=wire(_U128()))
    session: int = field(metadata=wire(U64))
    metadata_watermark: int = field(metadata=wire(U64))
