"""Declarative payload layouts: field codecs and the :class:`Payload` base class.

A payload is a frozen, slotted dataclass whose fields carry their wire codec in the field
metadata (:func:`wire`); the fields are encoded in declaration order, so the class *is* the
layout table, read by both :meth:`Payload.encode` and :meth:`Payload.decode`::

    @dataclass(frozen=True, slots=True, kw_only=True)
    class DeleteTopic(Payload):
        stream: Identifier = field(metadata=wire(IDENT))
        topic: Identifier = field(metadata=wire(IDENT))

Decoding is strict: every byte must be consumed, lengths and counts are checked against the
bytes left, and only :class:`~streamwire.errors.DecodeError` escapes.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, ClassVar, Final, Generic, Self, TypeVar

from streamwire.codec._structs import BytesLike
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.errors import LocalProtocolError
from streamwire.iggy.protocol.constants import Command
from streamwire.iggy.protocol.framing import Framable

__all__ = (
    "BOOL",
    "BYTES32",
    "F32",
    "NAME",
    "REST",
    "STR8",
    "STR32",
    "U8",
    "U16",
    "U32",
    "U64",
    "Codec",
    "Counted",
    "Nested",
    "REQUEST_TYPES",
    "Payload",
    "RequestPayload",
    "ToEnd",
    "wire",
)

T = TypeVar("T")


class Codec(Generic[T]):
    """Reads and writes one field value."""

    __slots__ = ()

    def write(self, w: Writer, value: T) -> None:
        raise NotImplementedError

    def read(self, r: Reader) -> T:
        raise NotImplementedError


class _Struct(Codec[int]):
    __slots__ = ("_st", "_what")

    def __init__(self, fmt: str, what: str) -> None:
        self._st = struct.Struct(fmt)
        self._what = what

    def write(self, w: Writer, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise LocalProtocolError(f"{self._what} must be an int, not {value!r}")
        w.pack(self._st, value)

    def read(self, r: Reader) -> int:
        value: int = self._st.unpack(r.view(self._st.size))[0]
        return value


class _Float(Codec[float]):
    __slots__ = ()

    def write(self, w: Writer, value: float) -> None:
        w.f32le(value)

    def read(self, r: Reader) -> float:
        return r.f32le()


class _Bool(Codec[bool]):
    __slots__ = ()

    def write(self, w: Writer, value: bool) -> None:
        w.u8(1 if value else 0)

    def read(self, r: Reader) -> bool:
        pos = r.pos
        value = r.u8()
        if value > 1:
            raise r.error(f"boolean byte {value}", pos)
        return value == 1


class _Str(Codec[str]):
    """UTF-8 text behind a byte length (u8 or u32); ``minimum`` bytes at least."""

    __slots__ = ("_maximum", "_minimum", "_prefix", "_what")

    def __init__(self, prefix: str, minimum: int, maximum: int, what: str) -> None:
        self._prefix = struct.Struct(prefix)
        self._minimum = minimum
        self._maximum = maximum
        self._what = what

    def write(self, w: Writer, value: str) -> None:
        data = value.encode("utf-8")
        if not self._minimum <= len(data) <= self._maximum:
            raise LocalProtocolError(
                f"{self._what} must be {self._minimum}..{self._maximum} bytes of UTF-8,"
                f" not {len(data)}"
            )
        w.pack(self._prefix, len(data)).raw(data)

    def read(self, r: Reader) -> str:
        pos = r.pos
        n: int = self._prefix.unpack(r.view(self._prefix.size))[0]
        if n < self._minimum:
            raise r.error(f"{self._what} of {n} bytes", pos)
        start = r.pos
        r.skip(n)
        return r.decode_utf8(start, n, self._what)


class _Bytes32(Codec[bytes]):
    __slots__ = ()

    def write(self, w: Writer, value: bytes) -> None:
        w.u32le(len(value)).raw(value)

    def read(self, r: Reader) -> bytes:
        n = r.u32le()
        return r.bytes(n)


class _Rest(Codec[bytes]):
    """Everything up to the end of the body."""

    __slots__ = ()

    def write(self, w: Writer, value: bytes) -> None:
        w.raw(value)

    def read(self, r: Reader) -> bytes:
        return bytes(r.rest())


U8: Final[Codec[int]] = _Struct("<B", "uint8")
U16: Final[Codec[int]] = _Struct("<H", "uint16")
U32: Final[Codec[int]] = _Struct("<I", "uint32")
U64: Final[Codec[int]] = _Struct("<Q", "uint64")
F32: Final[Codec[float]] = _Float()
BOOL: Final[Codec[bool]] = _Bool()
NAME: Final[Codec[str]] = _Str("<B", 1, 255, "name")
"""docs/protocol/iggy.md §4.1: ``[len u8][UTF-8]``, 1..255 bytes."""
STR8: Final[Codec[str]] = _Str("<B", 0, 255, "string")
"""A u8-length string that may be empty (passwords)."""
STR32: Final[Codec[str]] = _Str("<I", 0, 0xFFFFFFFF, "string")
BYTES32: Final[Codec[bytes]] = _Bytes32()
REST: Final[Codec[bytes]] = _Rest()


class Nested(Codec[T]):
    """A payload embedded in another one (a record inside a list or a reply)."""

    __slots__ = ("_cls",)

    def __init__(self, cls: type[Any]) -> None:
        self._cls = cls

    def write(self, w: Writer, value: T) -> None:
        value.write(w)  # type: ignore[attr-defined]

    def read(self, r: Reader) -> T:
        return self._cls.read(r)  # type: ignore[no-any-return]


class ToEnd(Codec[tuple[T, ...]]):
    """Items back to back until the body ends (no count)."""

    __slots__ = ("_item",)

    def __init__(self, item: Codec[T]) -> None:
        self._item = item

    def write(self, w: Writer, value: tuple[T, ...]) -> None:
        for item in value:
            self._item.write(w, item)

    def read(self, r: Reader) -> tuple[T, ...]:
        items: list[T] = []
        while not r.at_end():
            before = r.pos
            items.append(self._item.read(r))
            if r.pos == before:  # pragma: no cover - every item codec consumes bytes
                raise r.error("zero-width list item")
        return tuple(items)


class Counted(Codec[tuple[T, ...]]):
    """A u32 count, then that many items (each at least ``min_size`` bytes)."""

    __slots__ = ("_item", "_min")

    def __init__(self, item: Codec[T], min_size: int = 1) -> None:
        self._item = item
        self._min = min_size

    def write(self, w: Writer, value: tuple[T, ...]) -> None:
        w.u32le(len(value))
        for item in value:
            self._item.write(w, item)

    def read(self, r: Reader) -> tuple[T, ...]:
        n = r.count(struct.Struct("<I"), self._min, "list")
        return tuple(self._item.read(r) for _ in range(n))


def wire(codec: Codec[Any]) -> dict[str, Codec[Any]]:
    """Field metadata naming the field's codec: ``x: int = field(metadata=wire(U32))``."""
    return {"wire": codec}


_LAYOUTS: dict[type[Any], tuple[tuple[str, Codec[Any]], ...]] = {}


def layout(cls: type[Any]) -> tuple[tuple[str, Codec[Any]], ...]:
    """The ``(field name, codec)`` pairs of a payload class, in wire order."""
    found = _LAYOUTS.get(cls)
    if found is None:
        found = tuple(
            (f.name, f.metadata["wire"]) for f in dataclasses.fields(cls) if "wire" in f.metadata
        )
        _LAYOUTS[cls] = found
    return found


class Payload:
    """Base of every request and reply payload. Subclasses are frozen slotted dataclasses
    whose wire fields are declared with :func:`wire`; override :meth:`write`/:meth:`read`
    for layouts that are not a plain sequence."""

    __slots__ = ()

    min_size: ClassVar[int] = 0

    def write(self, w: Writer) -> None:
        for name, codec in layout(type(self)):
            codec.write(w, getattr(self, name))

    @classmethod
    def read(cls, r: Reader) -> Self:
        values = {name: codec.read(r) for name, codec in layout(cls)}
        return cls(**values)

    def encode(self) -> bytes:
        w = Writer()
        self.write(w)
        return w.getvalue()

    def encode_parts(self) -> tuple[BytesLike, ...] | Framable:
        """The body as parts whose concatenation is :meth:`encode`'s bytes: a payload that
        carries a large block as it is (a batch) gives it apart, so that the request frame
        copies it once, or not at all when the block has room for the frame in front of it
        (:class:`~streamwire.iggy.protocol.framing.Framable`)."""
        return (self.encode(),)

    @classmethod
    def decode(cls, data: BytesLike) -> Self:
        """Decode a whole body; trailing bytes are an error."""
        r = Reader(data, frame=cls.__name__)
        try:
            value = cls.read(r)
        except (ValueError, TypeError) as exc:  # a bad enum byte or a rejected value
            raise r.error(f"invalid value ({exc})") from None
        r.expect_end()
        return value


R = TypeVar("R")

REQUEST_TYPES: dict[int, type[RequestPayload[Any]]] = {}
"""Command code → request class; filled as the payload modules are imported."""


class RequestPayload(Payload, Generic[R]):
    """A request body. ``command`` is its code; :meth:`parse_reply` turns the reply payload
    (result section already stripped) into ``R``.

    By default ``reply`` names the reply payload class (``None``: the body is ignored, as the
    SDKs do for commands without a reply payload), and with ``empty_is_none`` an empty body
    means "not found" and gives ``None``.
    """

    __slots__ = ()

    command: ClassVar[Command]
    reply: ClassVar[type[Payload] | None] = None
    empty_is_none: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        command = cls.__dict__.get("command")
        if command is not None:
            # dataclass(slots=True) re-creates the class: the copy replaces the original
            known = REQUEST_TYPES.get(command)
            if known is not None and known.__qualname__ != cls.__qualname__:
                raise TypeError(f"command {command!r} has two request classes")
            REQUEST_TYPES[command] = cls

    def parse_reply(self, body: BytesLike) -> R:
        if self.reply is None:
            return None  # type: ignore[return-value]
        if not body and self.empty_is_none:
            return None  # type: ignore[return-value]
        return self.reply.decode(body)  # type: ignore[return-value]

    @classmethod
    def code(cls) -> Command:
        return cls.command
