"""Helpers shared by the AMQP codec tests: a type-strict equality and the feed variants."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

import pytest

from streamwire.codec.amqp import (
    AmqpMessage,
    AmqpSequence,
    AmqpValue,
    Array,
    Data,
    Described,
    Float,
    Header,
    Properties,
)
from streamwire.errors import DecodeError


def same(a: object, b: object) -> bool:
    """Equal *and* of the same types all the way down (``UInt(1)`` is not ``1`` here),
    with NaN equal to NaN and ``-0.0`` distinct from ``0.0``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        assert isinstance(b, float)
        if math.isnan(a) and math.isnan(b):
            return True
        fmt = ">f" if isinstance(a, Float) else ">d"
        return struct.pack(fmt, a) == struct.pack(fmt, b)
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple))
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping):
        assert isinstance(b, Mapping)
        pa, pb = list(a.items()), list(b.items())
        return len(pa) == len(pb) and all(
            same(ka, kb) and same(va, vb) for (ka, va), (kb, vb) in zip(pa, pb, strict=True)
        )
    if isinstance(a, Array):
        assert isinstance(b, Array)
        return (
            a.element is b.element and same(a.descriptor, b.descriptor) and same(a.items, b.items)
        )
    if isinstance(a, Described):
        assert isinstance(b, Described)
        return same(a.descriptor, b.descriptor) and same(a.value, b.value)
    if isinstance(a, (Data, AmqpSequence)):
        assert isinstance(b, (Data, AmqpSequence))
        return same(a.sections, b.sections)
    if isinstance(a, AmqpValue):
        assert isinstance(b, AmqpValue)
        return same(a.value, b.value)
    if isinstance(a, (AmqpMessage, Header, Properties)):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    return a == b


def assert_same(actual: object, expected: object) -> None:
    assert same(actual, expected), f"\n  actual:   {actual!r}\n  expected: {expected!r}"


def assert_prefixes_fail(data: bytes, decode: Callable[[bytes], Any]) -> None:
    """Every strict prefix of ``data`` (fed as if bytes arrived one at a time) must raise
    DecodeError, never raise anything else, and may only decode when it ends on a section
    boundary before the body (a message without a body section has the empty body)."""
    for n in range(len(data)):
        try:
            result = decode(data[:n])
        except DecodeError:
            continue
        assert n > 0, "the empty input decoded"
        assert isinstance(result, AmqpMessage), f"prefix of {n} bytes decoded to {result!r}"
        assert result.body == b"", f"prefix of {n} bytes decoded with a body"


def assert_trailing_fails(data: bytes, decode: Callable[[bytes], Any]) -> None:
    for extra in (b"\x00", b"\x40", b"\xff\xff"):
        with pytest.raises(DecodeError):
            decode(data + extra)
