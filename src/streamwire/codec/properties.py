"""Message properties: the AMQP 1.0 properties section and message annotations as typed headers
under reserved names, so one message model carries them on every broker.

RabbitMQ keeps them in the AMQP message itself (its ``properties`` section and its message
annotations, what the Java, .NET, Go and rstream clients set); Liftbridge and Iggy have only
headers, so there they travel as typed headers under the names below
(docs/api.md, "Properties and annotations"):

==========================  ===========================  ===================================
:class:`MessageProperties`  header                       kind
==========================  ===========================  ===================================
``message_id``              ``amqp.message-id``          Uint64 (int), Uint128 (UUID), Raw
                                                         (bytes) or String (str)
``user_id``                 ``amqp.user-id``             Raw
``to``                      ``amqp.to``                  String
``subject``                 ``amqp.subject``             String
``reply_to``                ``amqp.reply-to``            String
``correlation_id``          ``amqp.correlation-id``      as ``message_id``
``content_type``            ``amqp.content-type``        String
``content_encoding``        ``amqp.content-encoding``    String
``absolute_expiry_time``    ``amqp.absolute-expiry-time``  Int64, ms since the epoch
``creation_time``           ``amqp.creation-time``       Int64, ms since the epoch
``group_id``                ``amqp.group-id``            String
``group_sequence``          ``amqp.group-sequence``      Uint32
``reply_to_group_id``       ``amqp.reply-to-group-id``   String
==========================  ===========================  ===================================

A message annotation ``name`` is the header ``amqp.annotation.<name>``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Final, TypeAlias

from streamwire.codec.headers import HeaderInput, HeaderKind, HeaderValue
from streamwire.errors import ConfigurationError, HeaderKindError

__all__ = (
    "ANNOTATION_PREFIX",
    "PROPERTY_HEADERS",
    "MessageId",
    "MessageProperties",
    "annotation_headers",
    "annotations_of",
    "id_header",
    "id_value",
)

MessageId: TypeAlias = int | uuid.UUID | bytes | str
"""What AMQP allows as a message or correlation id: ulong, uuid, binary or string."""

ANNOTATION_PREFIX: Final = "amqp.annotation."
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_U64: Final = (1 << 64) - 1
_U32: Final = (1 << 32) - 1
_STRINGS: Final = frozenset(
    (
        "to",
        "subject",
        "reply_to",
        "content_type",
        "content_encoding",
        "group_id",
        "reply_to_group_id",
    )
)
_SYMBOLS: Final = ("content_type", "content_encoding")
_TIMES: Final = frozenset(("absolute_expiry_time", "creation_time"))
_IDS: Final = frozenset(("message_id", "correlation_id"))


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageProperties:
    """The 13 fields of an AMQP 1.0 message's properties section, in Python types; ``None``:
    not set. Times are aware UTC datetimes with millisecond precision (AMQP timestamps are
    ms since the epoch; a naive datetime is taken as UTC, anything finer is cut)."""

    message_id: MessageId | None = None
    user_id: bytes | None = None
    to: str | None = None
    subject: str | None = None
    reply_to: str | None = None
    correlation_id: MessageId | None = None
    content_type: str | None = None
    content_encoding: str | None = None
    absolute_expiry_time: datetime | None = None
    creation_time: datetime | None = None
    group_id: str | None = None
    group_sequence: int | None = None
    reply_to_group_id: str | None = None

    def __post_init__(self) -> None:
        for name in _IDS:
            value = getattr(self, name)
            if value is not None:
                id_header(value, name)  # checks it
                if isinstance(value, bytearray | memoryview):
                    object.__setattr__(self, name, bytes(value))
        for name in _STRINGS:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigurationError(f"{name} must be a str, got {type(value).__name__}")
        for name in _SYMBOLS:
            value = getattr(self, name)
            if value is not None and not value.isascii():
                raise ConfigurationError(f"{name} must be ASCII (an AMQP symbol), got {value!r}")
        for name in _TIMES:
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, ms_to_datetime(datetime_to_ms(value, name)))
        if self.user_id is not None:
            if not isinstance(self.user_id, bytes | bytearray | memoryview):
                raise ConfigurationError(
                    f"user_id must be bytes, got {type(self.user_id).__name__}"
                )
            object.__setattr__(self, "user_id", bytes(self.user_id))
        seq = self.group_sequence
        if seq is not None and (
            not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq <= _U32
        ):
            raise ConfigurationError(f"group_sequence must be an int in [0, 2**32), got {seq!r}")

    def to_headers(self) -> dict[str, HeaderValue]:
        """The typed headers that carry these properties (set fields only)."""
        out: dict[str, HeaderValue] = {}
        for name, header in PROPERTY_HEADERS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if name in _IDS:
                out[header] = id_header(value, name)
            elif name in _TIMES:
                out[header] = HeaderValue.int64(datetime_to_ms(value, name))
            elif name == "group_sequence":
                out[header] = HeaderValue.uint32(value)
            elif name == "user_id":
                out[header] = HeaderValue.raw(value)
            else:
                out[header] = HeaderValue.string(value)
        return out

    @classmethod
    def from_headers(cls, headers: Mapping[str, HeaderValue]) -> MessageProperties | None:
        """The properties carried by ``headers`` (``None`` when none is). Tolerant of what
        other writers put there: any integer kind for times and the group sequence, a String
        user id as its UTF-8, and a Raw header (one whose kind got lost on the way, as in
        Spark's ``headers`` column or from a client that writes bytes) read as its field's
        canonical bytes (a Raw id is a bytes id); a header that cannot be its field (another
        kind, a sequence outside u32) raises :class:`~streamwire.errors.HeaderKindError`
        naming it."""
        try:
            return cls._from_headers(headers)
        except (ConfigurationError, OverflowError) as exc:
            raise HeaderKindError(str(exc)) from None

    @classmethod
    def _from_headers(cls, headers: Mapping[str, HeaderValue]) -> MessageProperties | None:
        found: dict[str, object] = {}
        for name, header in PROPERTY_HEADERS.items():
            hv = headers.get(header)
            if hv is None:
                continue
            if not isinstance(hv, HeaderValue):
                raise ConfigurationError(f"{header} is not a HeaderValue")
            try:
                found[name] = _field(name, hv)
            except (HeaderKindError, OverflowError) as exc:
                raise HeaderKindError(f"{header}: {exc}") from None
        if not found:
            return None
        return cls(**found)  # type: ignore[arg-type]


def _field(name: str, hv: HeaderValue) -> object:
    raw = hv.kind is HeaderKind.RAW  # a header whose kind got lost: its canonical bytes
    if name in _IDS:
        return id_value(hv)
    if name in _TIMES:
        return ms_to_datetime(_raw_int(hv, 8, signed=True) if raw else hv.as_int())
    if name == "group_sequence":
        return _raw_int(hv, 4, signed=False) if raw else hv.as_int()
    if name == "user_id":
        return hv.as_bytes()
    if raw:
        try:
            return hv.as_bytes().decode()
        except UnicodeDecodeError:
            raise HeaderKindError("header is Raw and not UTF-8 text") from None
    return hv.as_str()


def _raw_int(hv: HeaderValue, width: int, *, signed: bool) -> int:
    data = hv.as_bytes()
    if len(data) != width:
        raise HeaderKindError(f"header is Raw of {len(data)} bytes, not an integer's {width}")
    return int.from_bytes(data, "little", signed=signed)


PROPERTY_HEADERS: Final[dict[str, str]] = {
    f.name: "amqp." + f.name.replace("_", "-") for f in fields(MessageProperties)
}
"""Field name → reserved header name, in the properties section's order."""


def id_header(value: MessageId, name: str = "message_id") -> HeaderValue:
    """The header for a message or correlation id: int → Uint64, UUID → Uint128,
    bytes → Raw, str → String."""
    if isinstance(value, bool):
        raise ConfigurationError(f"{name} must be an int, UUID, bytes or str, not bool")
    if isinstance(value, int):
        if not 0 <= value <= _U64:
            raise ConfigurationError(f"an int {name} is an AMQP ulong: [0, 2**64), got {value}")
        return HeaderValue.uint64(value)
    if isinstance(value, uuid.UUID):
        return HeaderValue.uint128(value.int)
    if isinstance(value, bytes | bytearray | memoryview):
        return HeaderValue.raw(bytes(value))
    if isinstance(value, str):
        return HeaderValue.string(value)
    raise ConfigurationError(
        f"{name} must be an int, UUID, bytes or str, got {type(value).__name__}"
    )


def id_value(header: HeaderValue) -> MessageId:
    """The id a header carries (the inverse of :func:`id_header`; other integer kinds are
    taken as ints)."""
    kind = header.kind
    if kind is HeaderKind.UINT128:
        return uuid.UUID(int=header.as_int())
    if kind is HeaderKind.RAW:
        return header.as_bytes()
    if kind is HeaderKind.STRING:
        return header.as_str()
    return header.as_int()


def datetime_to_ms(value: datetime, name: str = "time") -> int:
    """Milliseconds since the epoch (naive datetimes are UTC; finer parts are cut)."""
    if not isinstance(value, datetime):
        raise ConfigurationError(f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def ms_to_datetime(ms: int) -> datetime:
    """The aware UTC datetime ``ms`` after the epoch; one beyond what a datetime holds (years
    1 to 9999: Java's ``Long.MAX_VALUE`` as "never expires") is ``datetime.max`` or
    ``datetime.min`` in UTC."""
    try:
        return _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return (datetime.max if ms > 0 else datetime.min).replace(tzinfo=UTC)


def annotation_headers(annotations: Mapping[str, HeaderInput]) -> dict[str, HeaderValue]:
    """Message annotations as the headers that carry them."""
    out: dict[str, HeaderValue] = {}
    for name, value in annotations.items():
        if not isinstance(name, str) or not name or not name.isascii():
            raise ConfigurationError(
                f"an annotation name must be a non-empty ASCII str (an AMQP symbol), got {name!r}"
            )
        out[ANNOTATION_PREFIX + name] = HeaderValue.of(value)
    return out


def annotations_of(headers: Mapping[str, HeaderValue]) -> dict[str, HeaderValue]:
    """The message annotations among ``headers``, by annotation name."""
    cut = len(ANNOTATION_PREFIX)
    return {k[cut:]: v for k, v in headers.items() if k.startswith(ANNOTATION_PREFIX)}
