"""Where a consumer starts: the shared ``Offset`` model.

``offset=`` accepts ``"first" | "last" | "next" | int | datetime`` or an :class:`Offset`;
:func:`Offset.parse` turns any of those into an :class:`Offset` that each protocol maps onto
its own start positions (RabbitMQ offset specs, Liftbridge start positions, Iggy polling
strategies).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from streamwire.codec.message import datetime_to_us
from streamwire.errors import ConfigurationError

__all__ = ("Offset", "OffsetKind", "OffsetLike")


class OffsetKind(Enum):
    FIRST = "first"
    LAST = "last"
    NEXT = "next"
    OFFSET = "offset"
    TIMESTAMP = "timestamp"


@dataclass(frozen=True, slots=True)
class Offset:
    """A start position. Use the class constructors: ``Offset.first()``, ``Offset.at(42)``."""

    kind: OffsetKind
    value: int | None = None
    """The offset for ``OFFSET``; microseconds since the epoch for ``TIMESTAMP``."""

    @classmethod
    def first(cls) -> Offset:
        """The oldest message still retained."""
        return cls(OffsetKind.FIRST)

    @classmethod
    def last(cls) -> Offset:
        """The last chunk/message written (protocol-dependent granularity)."""
        return cls(OffsetKind.LAST)

    @classmethod
    def next(cls) -> Offset:
        """Only messages written from now on, or, with a consumer name, after the committed
        offset."""
        return cls(OffsetKind.NEXT)

    @classmethod
    def at(cls, offset: int) -> Offset:
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ConfigurationError(f"an offset must be an int >= 0, got {offset!r}")
        return cls(OffsetKind.OFFSET, offset)

    @classmethod
    def timestamp(cls, when: datetime) -> Offset:
        return cls(OffsetKind.TIMESTAMP, datetime_to_us(when))

    @classmethod
    def parse(cls, value: OffsetLike) -> Offset:
        if isinstance(value, Offset):
            return value
        if isinstance(value, datetime):
            return cls.timestamp(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return cls.at(value)
        if isinstance(value, str):
            try:
                kind = OffsetKind(value.lower())
            except ValueError:
                kind = None
            if kind in (OffsetKind.FIRST, OffsetKind.LAST, OffsetKind.NEXT):
                return cls(kind)
        raise ConfigurationError(
            f"offset must be 'first', 'last', 'next', an int or a datetime, got {value!r}"
        )


OffsetLike = Offset | str | int | datetime
