"""Identifiers, consumers, partitioning and polling strategies (docs/protocol/iggy.md §4.2–§4.6)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.errors import ConfigurationError
from streamwire.iggy.protocol._wire import Codec
from streamwire.iggy.protocol.constants import U32_MAX, U64_MAX

__all__ = (
    "CONSUMER",
    "IDENT",
    "OPT_PARTITION",
    "PARTITIONING",
    "STRATEGY",
    "Consumer",
    "ConsumerKind",
    "Identifier",
    "IdentifierLike",
    "Partitioning",
    "PartitioningKind",
    "PollingKind",
    "PollingStrategy",
)


@dataclass(frozen=True, slots=True)
class Identifier:
    """A stream, topic, user or group: a numeric id (u32, 0-based) or a name (1..255 bytes)."""

    value: int | str

    def __post_init__(self) -> None:
        v = self.value
        if isinstance(v, bool) or not isinstance(v, int | str):
            raise ConfigurationError(f"an identifier is an int or a str, not {v!r}")
        if isinstance(v, int) and not 0 <= v <= U32_MAX:
            raise ConfigurationError(f"numeric identifier {v} does not fit in uint32")
        if isinstance(v, str) and not 1 <= len(v.encode("utf-8")) <= 255:
            raise ConfigurationError(f"identifier {v!r} must be 1..255 bytes of UTF-8")

    @classmethod
    def of(cls, value: IdentifierLike) -> Identifier:
        return value if isinstance(value, Identifier) else cls(value)

    @property
    def is_numeric(self) -> bool:
        return isinstance(self.value, int)

    def __str__(self) -> str:
        return str(self.value)


IdentifierLike = Identifier | int | str


class _IdentCodec(Codec[Identifier]):
    __slots__ = ()

    def write(self, w: Writer, value: Identifier) -> None:
        v = value.value
        if isinstance(v, int):
            w.u8(1).u8(4).u32le(v)
        else:
            data = v.encode("utf-8")
            w.u8(2).u8(len(data)).raw(data)

    def read(self, r: Reader) -> Identifier:
        pos = r.pos
        kind = r.u8()
        n = r.u8()
        if kind == 1:
            if n != 4:
                raise r.error(f"numeric identifier of length {n}", pos)
            return Identifier(r.u32le())
        if kind == 2:
            if n == 0:
                raise r.error("empty string identifier", pos)
            start = r.pos
            r.skip(n)
            return Identifier(r.decode_utf8(start, n, "identifier"))
        raise r.error(f"identifier kind {kind}", pos)


IDENT: Final[Codec[Identifier]] = _IdentCodec()


class ConsumerKind(IntEnum):
    SINGLE = 1
    GROUP = 2


@dataclass(frozen=True, slots=True)
class Consumer:
    """Who polls or stores offsets (§4.3): a single consumer or a consumer group."""

    kind: ConsumerKind
    id: Identifier

    @classmethod
    def single(cls, id: IdentifierLike) -> Consumer:
        return cls(ConsumerKind.SINGLE, Identifier.of(id))

    @classmethod
    def group(cls, id: IdentifierLike) -> Consumer:
        return cls(ConsumerKind.GROUP, Identifier.of(id))


class _ConsumerCodec(Codec[Consumer]):
    __slots__ = ()

    def write(self, w: Writer, value: Consumer) -> None:
        w.u8(value.kind)
        IDENT.write(w, value.id)

    def read(self, r: Reader) -> Consumer:
        pos = r.pos
        kind = r.u8()
        if kind not in (1, 2):
            raise r.error(f"consumer kind {kind}", pos)
        return Consumer(ConsumerKind(kind), IDENT.read(r))


CONSUMER: Final[Codec[Consumer]] = _ConsumerCodec()


class _OptPartitionCodec(Codec[int | None]):
    """§4.4: ``[flag u8][partition_id u32]``, 5 bytes whether present or not."""

    __slots__ = ()

    def write(self, w: Writer, value: int | None) -> None:
        if value is None:
            w.u8(0).u32le(0)
        else:
            w.u8(1).u32le(value)

    def read(self, r: Reader) -> int | None:
        pos = r.pos
        flag = r.u8()
        value = r.u32le()
        if flag == 0:
            return None
        if flag != 1:
            raise r.error(f"partition flag {flag}", pos)
        return value


OPT_PARTITION: Final[Codec[int | None]] = _OptPartitionCodec()


class PartitioningKind(IntEnum):
    BALANCED = 1
    PARTITION_ID = 2
    MESSAGES_KEY = 3


@dataclass(frozen=True, slots=True)
class Partitioning:
    """Where SendMessages goes (§4.5). The client normally resolves to ``partition_id``."""

    kind: PartitioningKind
    value: bytes = b""

    def __post_init__(self) -> None:
        n = len(self.value)
        if self.kind is PartitioningKind.BALANCED and n:
            raise ConfigurationError("balanced partitioning carries no value")
        if self.kind is PartitioningKind.PARTITION_ID and n != 4:
            raise ConfigurationError("a partition id is 4 bytes")
        if self.kind is PartitioningKind.MESSAGES_KEY and not 1 <= n <= 255:
            raise ConfigurationError(f"a messages key must be 1..255 bytes, not {n}")

    @classmethod
    def balanced(cls) -> Partitioning:
        return cls(PartitioningKind.BALANCED)

    @classmethod
    def partition_id(cls, partition: int) -> Partitioning:
        if not 0 <= partition <= U32_MAX:
            raise ConfigurationError(f"partition {partition} does not fit in uint32")
        return cls(PartitioningKind.PARTITION_ID, partition.to_bytes(4, "little"))

    @classmethod
    def messages_key(cls, key: bytes | str) -> Partitioning:
        return cls(PartitioningKind.MESSAGES_KEY, key.encode() if isinstance(key, str) else key)

    @property
    def partition(self) -> int | None:
        """The partition id for ``PARTITION_ID``, else ``None``."""
        if self.kind is PartitioningKind.PARTITION_ID:
            return int.from_bytes(self.value, "little")
        return None


class _PartitioningCodec(Codec[Partitioning]):
    __slots__ = ()

    def write(self, w: Writer, value: Partitioning) -> None:
        w.u8(value.kind).u8(len(value.value)).raw(value.value)

    def read(self, r: Reader) -> Partitioning:
        pos = r.pos
        kind = r.u8()
        n = r.u8()
        if kind not in (1, 2, 3):
            raise r.error(f"partitioning kind {kind}", pos)
        value = r.bytes(n)
        try:
            return Partitioning(PartitioningKind(kind), value)
        except ConfigurationError as exc:
            raise r.error(str(exc), pos) from None


PARTITIONING: Final[Codec[Partitioning]] = _PartitioningCodec()


class PollingKind(IntEnum):
    OFFSET = 1
    TIMESTAMP = 2
    FIRST = 3
    LAST = 4
    NEXT = 5


@dataclass(frozen=True, slots=True)
class PollingStrategy:
    """Where a poll starts (§4.6): ``[kind u8][value u64]``, 9 bytes."""

    kind: PollingKind
    value: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.value <= U64_MAX:
            raise ConfigurationError(f"polling value {self.value} does not fit in uint64")

    @classmethod
    def offset(cls, offset: int) -> PollingStrategy:
        return cls(PollingKind.OFFSET, offset)

    @classmethod
    def timestamp(cls, micros: int) -> PollingStrategy:
        """Messages stored at or after ``micros`` (µs since the epoch)."""
        return cls(PollingKind.TIMESTAMP, micros)

    @classmethod
    def first(cls) -> PollingStrategy:
        return cls(PollingKind.FIRST)

    @classmethod
    def last(cls) -> PollingStrategy:
        return cls(PollingKind.LAST)

    @classmethod
    def next(cls) -> PollingStrategy:
        return cls(PollingKind.NEXT)


class _StrategyCodec(Codec[PollingStrategy]):
    __slots__ = ()

    def write(self, w: Writer, value: PollingStrategy) -> None:
        w.u8(value.kind).u64le(value.value)

    def read(self, r: Reader) -> PollingStrategy:
        pos = r.pos
        kind = r.u8()
        value = r.u64le()
        if not 1 <= kind <= 5:
            raise r.error(f"polling strategy kind {kind}", pos)
        return PollingStrategy(PollingKind(kind), value)


STRATEGY: Final[Codec[PollingStrategy]] = _StrategyCodec()
