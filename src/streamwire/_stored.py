"""Checks shared by every client's ``committed_offset`` and ``store_offset``: the offsets a
consumer name has stored, read and written without a consumer (docs/api.md, "Stored offsets")."""

from __future__ import annotations

from streamwire.errors import ConfigurationError

__all__ = ("consumer_name", "offset_to_store")

_U64: int = (1 << 64) - 1


def consumer_name(name: object) -> str:
    """``name`` if it can name a consumer on every broker: a non-empty str."""
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"a consumer name is a non-empty str, got {name!r}")
    return name


def offset_to_store(offset: object) -> int:
    """``offset`` if it is one every broker can store: an int in [0, 2**64)."""
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= _U64:
        raise ConfigurationError(f"an offset to store is an int in [0, 2**64), got {offset!r}")
    return offset
