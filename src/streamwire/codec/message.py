"""The message model shared by every protocol.

A :class:`Message` is what users send and what consumers yield: ``value`` bytes, an
optional ``key``, typed ``headers``, and, on received messages, where it came from
(``stream``, ``partition``, ``offset``) and when it was written (``timestamp``).

Timestamps are kept as integer microseconds since the Unix epoch (``timestamp_us``), the
finest unit the protocols share losslessly (RabbitMQ: ms, Iggy: µs); ``timestamp`` turns it
into an aware UTC ``datetime`` on demand, so the consume path builds no datetimes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Final, NamedTuple

from streamwire.codec._structs import BytesLike
from streamwire.codec.headers import HeaderInput, HeaderValue, normalize_headers
from streamwire.codec.properties import MessageProperties, annotation_headers, annotations_of
from streamwire.errors import ConfigurationError

__all__ = (
    "Confirmation",
    "Message",
    "confirmation",
    "datetime_to_us",
    "outgoing",
    "received_message",
    "us_to_datetime",
)

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def datetime_to_us(value: datetime) -> int:
    """Microseconds since the epoch; naive datetimes are taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def us_to_datetime(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


class Message:
    """One message. ``Message(value, key=None, headers=None, timestamp=None, id=None,
    properties=None, annotations=None)``.

    ``id`` is a broker message id where one exists (Iggy's u128); ``offset``, ``stream``
    and ``partition`` are filled in on received messages. ``properties`` (a
    :class:`~streamwire.codec.properties.MessageProperties`) and ``annotations`` (AMQP message
    annotations) are kept among the headers under reserved names
    (:mod:`streamwire.codec.properties`): RabbitMQ writes them into the AMQP message's
    properties section and annotations, the other brokers carry them as those headers.
    """

    __slots__ = ("headers", "id", "key", "offset", "partition", "stream", "timestamp_us", "value")

    value: bytes
    key: bytes | None
    headers: dict[str, HeaderValue]
    timestamp_us: int | None
    offset: int | None
    stream: str | None
    partition: int | None
    id: int | None

    def __init__(
        self,
        value: BytesLike,
        *,
        key: BytesLike | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
        timestamp: datetime | None = None,
        id: int | None = None,
        properties: MessageProperties | None = None,
        annotations: Mapping[str, HeaderInput] | None = None,
    ) -> None:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise ConfigurationError(f"message value must be bytes, got {type(value).__name__}")
        if key is not None and not isinstance(key, bytes | bytearray | memoryview):
            raise ConfigurationError(f"message key must be bytes, got {type(key).__name__}")
        if id is not None and not (isinstance(id, int) and 0 <= id < 1 << 128):
            raise ConfigurationError("message id must be an int in [0, 2**128)")
        self.value = bytes(value)
        self.key = None if key is None else bytes(key)
        self.headers = normalize_headers(headers)
        if properties is not None:
            if not isinstance(properties, MessageProperties):
                raise ConfigurationError(
                    f"properties must be MessageProperties, got {type(properties).__name__}"
                )
            self.headers.update(properties.to_headers())
        if annotations:
            self.headers.update(annotation_headers(annotations))
        self.timestamp_us = None if timestamp is None else datetime_to_us(timestamp)
        self.id = id
        self.offset = None
        self.stream = None
        self.partition = None

    @classmethod
    def received(
        cls,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: dict[str, HeaderValue] | None = None,
        timestamp_us: int | None = None,
        offset: int | None = None,
        stream: str | None = None,
        partition: int | None = None,
        id: int | None = None,
    ) -> Message:
        """Build a message from decoded wire data without re-validating it (decoders only;
        hot loops call :func:`received_message`, positional)."""
        headers = headers if headers is not None else {}
        return received_message(value, key, headers, timestamp_us, offset, stream, partition, id)

    @property
    def properties(self) -> MessageProperties | None:
        """The AMQP properties this message carries (``None``: none), read from its reserved
        headers; raises :class:`~streamwire.errors.HeaderKindError` for one of the wrong
        kind."""
        return MessageProperties.from_headers(self.headers)

    @property
    def annotations(self) -> dict[str, HeaderValue]:
        """The AMQP message annotations this message carries, by name (a new dict)."""
        return annotations_of(self.headers)

    @property
    def timestamp(self) -> datetime | None:
        """When the broker wrote the message (aware UTC), if known."""
        return None if self.timestamp_us is None else us_to_datetime(self.timestamp_us)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        value: object = self.value  # user code may have assigned anything
        if isinstance(value, bytes | bytearray | memoryview):
            shown = f"{bytes(value[:32])!r}{'...' if len(value) > 32 else ''}"
        else:  # user code assigned something else: show it, never fail inside repr
            shown = repr(value)
        parts = [f"value={shown}"]
        for name in ("key", "stream", "partition", "offset", "timestamp_us", "id"):
            val = getattr(self, name)
            if val is not None:
                parts.append(f"{name}={val!r}")
        if self.headers:
            parts.append(f"headers={self.headers!r}")
        return f"Message({', '.join(parts)})"


def outgoing(
    value: BytesLike | Message,
    key: BytesLike | None = None,
    headers: Mapping[str, HeaderInput] | None = None,
) -> Message:
    """The message a producer's ``send(value, key=..., headers=...)`` sends, the same on every
    broker: ``value`` bytes become ``Message(value, key=key, headers=headers)``; for a
    ``Message``, an explicit ``key`` replaces its key and ``headers`` are merged over its
    headers (the explicit ones win). The given ``Message`` is not modified."""
    if not isinstance(value, Message):
        return Message(value, key=key, headers=headers)
    if key is None and not headers:
        return value
    if key is not None and not isinstance(key, bytes | bytearray | memoryview):
        raise ConfigurationError(f"message key must be bytes, got {type(key).__name__}")
    msg = Message.received(
        value.value,
        key=value.key if key is None else bytes(key),
        headers={**value.headers, **normalize_headers(headers)},
        timestamp_us=value.timestamp_us,
        id=value.id,
    )
    return msg


class Confirmation(NamedTuple):
    """The broker stored a message. Fields a broker does not report are ``None``.

    A named tuple: cheap to create on the publish hot path, immutable, comparable.
    """

    publishing_id: int | None = None
    """RabbitMQ Streams publishing id."""
    offset: int | None = None
    stream: str | None = None
    partition: int | None = None


_new_object: Final = object.__new__
_new_tuple: Final = tuple.__new__


def received_message(
    value: bytes,
    key: bytes | None,
    headers: dict[str, HeaderValue],
    timestamp_us: int | None,
    offset: int | None,
    stream: str | None,
    partition: int | None,
    id: int | None,
) -> Message:
    """The one fast constructor of received messages, for the decoders' hot loops:
    positional, and nothing is validated or copied (``headers`` is kept as given)."""
    msg = _new_object(Message)
    msg.value = value
    msg.key = key
    msg.headers = headers
    msg.timestamp_us = timestamp_us
    msg.offset = offset
    msg.stream = stream
    msg.partition = partition
    msg.id = id
    return msg


def confirmation(
    publishing_id: int | None, offset: int | None, stream: str | None, partition: int | None
) -> Confirmation:
    """The one fast constructor of confirmations, for the producers' hot loops: positional,
    without the named tuple's own ``__new__`` (keywords and defaults, in Python)."""
    return _new_tuple(Confirmation, (publishing_id, offset, stream, partition))
