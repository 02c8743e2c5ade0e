"""Addresses and topic options of the Iggy client (pure helpers, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from streamwire._options import check_names
from streamwire.codec.headers import HeaderValue
from streamwire.codec.offset import Offset, OffsetKind
from streamwire.errors import ConfigurationError
from streamwire.iggy.protocol.identifiers import Identifier, PollingStrategy

__all__ = (
    "DEFAULT_TOPIC",
    "TOPIC_OPTIONS",
    "parse_address",
    "start_strategy",
    "topic_of",
    "topic_options",
)

DEFAULT_TOPIC: Final = "default"
"""The topic a bare stream name addresses: ``"orders"`` means ``"orders/default"``."""


def parse_address(address: str) -> tuple[Identifier, Identifier | None]:
    """``"stream/topic"`` → identifiers, a bare ``"stream"`` → ``(stream, None)`` (names; a
    stream name cannot contain ``/``)."""
    if not isinstance(address, str) or not address:
        raise ConfigurationError(f"an Iggy address is 'stream' or 'stream/topic', not {address!r}")
    stream, sep, topic = address.partition("/")
    if not stream or (sep and not topic) or "/" in topic:
        raise ConfigurationError(f"an Iggy address is 'stream' or 'stream/topic', not {address!r}")
    return Identifier(stream), Identifier(topic) if topic else None


def topic_of(address: str) -> tuple[Identifier, Identifier]:
    """The topic an address names: ``"stream/topic"``, or for a bare ``"stream"`` its
    :data:`DEFAULT_TOPIC`."""
    stream, topic = parse_address(address)
    return stream, topic if topic is not None else Identifier(DEFAULT_TOPIC)


def _micros(seconds: object) -> HeaderValue:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise ConfigurationError(f"message_expiry must be seconds >= 0, not {seconds!r}")
    return HeaderValue.uint64(round(seconds * 1_000_000))


def _text(*allowed: str) -> object:
    def convert(value: object) -> HeaderValue:
        if value not in allowed:
            raise ConfigurationError(f"expected one of {allowed}, not {value!r}")
        return HeaderValue.string(str(value))

    return convert


def _uint(kind: str) -> object:
    def convert(value: object) -> HeaderValue:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationError(f"expected an int, not {value!r}")
        return HeaderValue.uint32(value) if kind == "u32" else HeaderValue.uint64(value)

    return convert


def _flag(value: object) -> HeaderValue:
    if not isinstance(value, bool):
        raise ConfigurationError(f"expected a bool, not {value!r}")
    return HeaderValue.boolean(value)


TOPIC_OPTIONS: Final[dict[str, object]] = {
    "compression_algorithm": _text("none", "gzip"),
    "message_expiry": _micros,
    "max_topic_size": _uint("u64"),
    "segment_size": _uint("u64"),
    "durability": _text("replicated", "persisted"),
    "consumer_offset_durability": _text("replicated", "persisted"),
    "messages_required_to_save": _uint("u32"),
    "size_of_messages_required_to_save": _uint("u64"),
    "preallocate_segments": _flag,
    "enforce_fsync": _flag,
}
"""Keyword options of ``create_stream``/``create_topic`` (the 0.9.0 topic catalog,
docs/protocol/iggy.md §4.10). Servers differ: 0.9.0-edge.5 takes ``enforce_fsync`` and
refuses ``durability``/``consumer_offset_durability`` (UnsupportedOptionKey); the server
the official 0.9 SDKs are written for takes those two and refuses ``enforce_fsync``. Each is
sent only when given, so the user's choice reaches the server as asked.
``message_expiry`` is in seconds (sent as µs), sizes in bytes."""


def topic_options(
    values: Mapping[str, object], raw: Mapping[str, HeaderValue] | None = None
) -> dict[str, HeaderValue]:
    """Keyword options → an options block; ``raw`` entries are passed through as given."""
    check_names(values, TOPIC_OPTIONS, "Iggy topic")
    out: dict[str, HeaderValue] = dict(raw or {})
    for key, value in values.items():
        convert = TOPIC_OPTIONS[key]
        try:
            out[key] = convert(value)  # type: ignore[operator]
        except ConfigurationError as exc:
            raise ConfigurationError(f"{key}: {exc}") from None
    return out


def start_strategy(
    offset: Offset, position: int | None, batch_size: int
) -> tuple[PollingStrategy, int]:
    """The polling strategy and count of the next poll of a partition: ``Offset(position)``
    once the consumer tracks it, else the strategy for where it was asked to start
    (``last`` polls one message: the last one)."""
    if position is not None:
        return PollingStrategy.offset(position), batch_size
    kind = offset.kind
    if kind is OffsetKind.FIRST:
        return PollingStrategy.first(), batch_size
    if kind is OffsetKind.LAST:
        return PollingStrategy.last(), 1
    if kind is OffsetKind.OFFSET:
        return PollingStrategy.offset(offset.value or 0), batch_size
    if kind is OffsetKind.TIMESTAMP:
        return PollingStrategy.timestamp(offset.value or 0), batch_size
    return PollingStrategy.next(), batch_size
