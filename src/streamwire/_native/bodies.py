"""Plain message bodies in bulk: what a producer's fast path for ``bytes`` needs to know of a
list of them at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from streamwire._native import core as _native

__all__ = ("bytes_total", "bytes_total_py")


def bytes_total(values: object) -> int | None:
    """The total length of ``values`` when it is a non-empty list or tuple of exact ``bytes``
    objects (what a producer's fast path for plain bodies takes), else ``None``; in one
    native call when the core is loaded (:func:`bytes_total_py` is the pure twin)."""
    if _native is not None:
        return _native.rmq_bytes_total(values)
    return bytes_total_py(values)


def bytes_total_py(values: object) -> int | None:
    """:func:`bytes_total` in pure Python."""
    if type(values) not in (list, tuple):
        return None
    items = cast("Sequence[object]", values)
    if set(map(type, items)) != {bytes}:
        return None
    return sum(map(len, cast("Sequence[bytes]", items)))
