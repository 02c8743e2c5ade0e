"""Received messages as column buffers, for readers that work in bulk.

A :class:`Columns` holds what a run of plain messages of one partition carries — bodies and
offsets — in Arrow's memory layout (native byte order), so a columnar reader (the Spark
source, ``streamwire.spark._arrow``) wraps the buffers as arrays without a Python object
per message. Everything else a :class:`~streamwire.codec.message.Message` would say is the
same for the whole run: no key, no headers, one timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ("Columns",)


@dataclass(frozen=True, slots=True)
class Columns:
    """``count`` messages: message ``i`` has body ``values[ends[i]:ends[i + 1]]`` (``ends``
    being ``value_ends`` read as int32) and offset ``offsets`` read as int64 at ``i``;
    offsets ascend. No key, no headers; ``timestamp_us`` is every message's."""

    count: int
    value_ends: bytes
    """int32 × (count + 1), starting at 0: Arrow's binary offsets."""
    values: bytes
    """The bodies end to end."""
    offsets: bytes
    """int64 × count."""
    timestamp_us: int | None
