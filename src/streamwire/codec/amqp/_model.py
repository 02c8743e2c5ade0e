"""The AMQP 1.0 bare/annotated message model: sections as frozen, slotted dataclasses."""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, Final, TypeAlias

from streamwire.codec.amqp._wrappers import (
    Decimal32,
    Decimal64,
    Decimal128,
    Symbol,
    Timestamp,
)
from streamwire.errors import LocalProtocolError

__all__ = (
    "AmqpMessage",
    "AmqpSequence",
    "AmqpValue",
    "Body",
    "Data",
    "Header",
    "MessageId",
    "Properties",
    "SimpleValue",
)

#: Values allowed in application properties (AMQP "simple" types: no list, map, array or
#: described value). ``int`` covers the integer wrappers and Timestamp, ``str`` covers
#: Symbol and Char, ``float`` covers Float.
SimpleValue: TypeAlias = (
    bool | int | float | str | bytes | uuid.UUID | _dt.datetime
    | Decimal32 | Decimal64 | Decimal128 | None
)  # fmt: skip
#: message-id / correlation-id: ulong (an int), uuid, binary or string.
MessageId: TypeAlias = int | uuid.UUID | bytes | str


@dataclass(frozen=True, slots=True)
class Header:
    """The header section (0x70). ``ttl`` is in seconds (milliseconds on the wire); a field
    equal to its default is sent as null (or cut when trailing)."""

    durable: bool = False
    priority: int = 4
    ttl: float | None = None
    first_acquirer: bool = False
    delivery_count: int = 0


def _timestamp(value: object) -> object:
    if isinstance(value, _dt.datetime):
        return Timestamp.from_datetime(value)
    if isinstance(value, int) and not isinstance(value, (bool, Timestamp)):
        return Timestamp(value)
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Properties:
    """The properties section (0x73): the 13 fields of the AMQP ``properties`` list.

    ``content_type``/``content_encoding`` given as ``str`` become :class:`Symbol`;
    ``absolute_expiry_time``/``creation_time`` given as an int (ms) or an aware datetime
    become :class:`Timestamp`. Types are checked when encoding."""

    message_id: MessageId | None = None
    user_id: bytes | None = None
    to: str | None = None
    subject: str | None = None
    reply_to: str | None = None
    correlation_id: MessageId | None = None
    content_type: Symbol | None = None
    content_encoding: Symbol | None = None
    absolute_expiry_time: Timestamp | None = None
    creation_time: Timestamp | None = None
    group_id: str | None = None
    group_sequence: int | None = None
    reply_to_group_id: str | None = None

    def __post_init__(self) -> None:
        # only values of a convenience type are converted; decoded values pass through
        for name in _CONVERTED:
            value: object = getattr(self, name)
            if value is not None and type(value) not in _CANONICAL:
                object.__setattr__(self, name, _convert(name, value))


_CONVERTED: Final = (
    "user_id",
    "content_type",
    "content_encoding",
    "absolute_expiry_time",
    "creation_time",
)
_CANONICAL: Final = frozenset((bytes, Symbol, Timestamp))


def _convert(name: str, value: object) -> object:
    if name == "user_id":
        return bytes(value) if isinstance(value, (bytearray, memoryview)) else value
    if name.startswith("content_"):
        return Symbol(value) if isinstance(value, str) else value
    return _timestamp(value)


@dataclass(frozen=True, slots=True, init=False)
class Data:
    """A body of several data sections (0x75); the application data is their concatenation.
    A single section is represented by plain ``bytes`` in :attr:`AmqpMessage.body`."""

    sections: tuple[bytes, ...]

    def __init__(self, *sections: bytes | bytearray | memoryview) -> None:
        object.__setattr__(self, "sections", tuple(bytes(s) for s in sections))


@dataclass(frozen=True, slots=True, init=False)
class AmqpSequence:
    """A body of one or more amqp-sequence sections (0x76), each a list of values."""

    sections: tuple[list[Any], ...]

    def __init__(self, *sections: Iterable[Any]) -> None:
        object.__setattr__(self, "sections", tuple(list(s) for s in sections))


@dataclass(frozen=True, slots=True)
class AmqpValue:
    """A body of one amqp-value section (0x77): any single AMQP value."""

    value: Any


Body: TypeAlias = bytes | Data | AmqpSequence | AmqpValue


@dataclass(frozen=True, slots=True)
class AmqpMessage:
    """An AMQP 1.0 message as RabbitMQ Streams clients exchange it.

    ``body`` is ``bytes`` for the common single data section, :class:`Data` for several,
    :class:`AmqpSequence` or :class:`AmqpValue` otherwise. Annotation and footer maps have
    symbol (``str`` keys are sent as symbols) or ulong keys; application properties have
    string keys and simple values only. ``None`` means the section is absent.
    """

    body: Body = b""
    _: KW_ONLY
    header: Header | None = None
    delivery_annotations: Mapping[Any, Any] | None = None
    message_annotations: Mapping[Any, Any] | None = None
    properties: Properties | None = None
    application_properties: Mapping[str, SimpleValue] | None = None
    footer: Mapping[Any, Any] | None = None

    def __post_init__(self) -> None:
        if type(self.body) is not bytes:
            object.__setattr__(self, "body", _normalize_body(self.body))

    @property
    def body_bytes(self) -> bytes | None:
        """The application data as bytes (data sections concatenated), or ``None`` when
        the body is an amqp-sequence or amqp-value."""
        body = self.body
        if isinstance(body, bytes):
            return body
        if isinstance(body, Data):
            return b"".join(body.sections)
        return None


def _normalize_body(body: object) -> Body:
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, Data):
        if not body.sections:
            raise LocalProtocolError("a Data body needs at least one section")
        return body.sections[0] if len(body.sections) == 1 else body
    if isinstance(body, AmqpSequence):
        if not body.sections:
            raise LocalProtocolError("an AmqpSequence body needs at least one section")
        return body
    if isinstance(body, AmqpValue):
        return body
    raise LocalProtocolError(
        f"message body must be bytes, Data, AmqpSequence or AmqpValue, not "
        f"{type(body).__name__} (wrap other values in AmqpValue)"
    )
