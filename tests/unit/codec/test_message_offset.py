"""The Message model and the Offset model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from streamwire import HeaderValue, Message, Offset, OffsetKind
from streamwire.codec.message import (
    Confirmation,
    confirmation,
    datetime_to_us,
    outgoing,
    received_message,
    us_to_datetime,
)
from streamwire.errors import ConfigurationError


def test_message_defaults_and_headers_are_typed() -> None:
    m = Message(b"v", key=b"k", headers={"n": 1, "s": "x"})
    assert m.value == b"v"
    assert m.key == b"k"
    assert m.headers == {"n": HeaderValue.int64(1), "s": HeaderValue.string("x")}
    assert m.offset is None
    assert m.timestamp is None
    assert m.stream is None
    assert m.partition is None


def test_message_copies_mutable_buffers() -> None:
    buf = bytearray(b"abc")
    m = Message(buf, key=memoryview(b"k"))
    buf[0] = 0
    assert m.value == b"abc"
    assert m.key == b"k"


def test_message_validation() -> None:
    with pytest.raises(ConfigurationError):
        Message("text")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        Message(b"", key="k")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        Message(b"", id=-1)
    with pytest.raises(ConfigurationError):
        Message(b"", id=1 << 128)


def test_message_timestamp_round_trip_microseconds() -> None:
    when = datetime(2026, 11, 22, 3, 4, 5, 123456, tzinfo=UTC)
    m = Message(b"", timestamp=when)
    assert m.timestamp_us == datetime_to_us(when)
    assert m.timestamp == when
    naive = datetime(2026, 1, 1)
    assert Message(b"", timestamp=naive).timestamp == naive.replace(tzinfo=UTC)
    other_zone = datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    assert Message(b"", timestamp=other_zone).timestamp == datetime(2026, 1, 1, tzinfo=UTC)
    assert us_to_datetime(0) == datetime(1970, 1, 1, tzinfo=UTC)


def test_received_messages_carry_their_origin() -> None:
    m = Message.received(b"v", offset=7, stream="s", partition=2, timestamp_us=1_000_000)
    assert (m.offset, m.stream, m.partition) == (7, "s", 2)
    assert m.timestamp == datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert m.headers == {}
    assert "offset=7" in repr(m)


def test_message_equality_and_unhashable() -> None:
    assert Message(b"a", key=b"k") == Message(b"a", key=b"k")
    assert Message(b"a") != Message(b"b")
    assert Message(b"a") != b"a"
    with pytest.raises(TypeError):
        hash(Message(b"a"))


def test_repr_truncates_long_values() -> None:
    r = repr(Message(b"x" * 100, headers={"h": 1}))
    assert "..." in r
    assert "headers=" in r


@pytest.mark.parametrize("value", [{}, {"a": 1}, 7, None, "text", [b"x"]])
def test_repr_of_a_value_user_code_replaced(value: object) -> None:
    """Whatever user code assigns, ``repr`` shows it instead of raising (a ``dict`` sliced
    with ``[:32]`` raised TypeError before Python 3.12 and KeyError since)."""
    m = Message.received(b"v", offset=1)
    m.value = value  # type: ignore[assignment]
    assert repr(m) == f"Message(value={value!r}, offset=1)"


def test_repr_of_byte_views() -> None:
    m = Message.received(b"v")
    m.value = memoryview(b"y" * 40)  # type: ignore[assignment]
    assert repr(m) == f"Message(value={b'y' * 32!r}...)"


def test_offset_parse() -> None:
    assert Offset.parse("first") == Offset.first()
    assert Offset.parse("LAST") == Offset.last()
    assert Offset.parse("next") == Offset.next()
    assert Offset.parse(5) == Offset(OffsetKind.OFFSET, 5)
    when = datetime(2026, 1, 1, tzinfo=UTC)
    assert Offset.parse(when) == Offset(OffsetKind.TIMESTAMP, datetime_to_us(when))
    same = Offset.at(3)
    assert Offset.parse(same) is same


@pytest.mark.parametrize("bad", ["offset", "timestamp", "start", -1, True, 1.5, None])
def test_offset_parse_refuses(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        Offset.parse(bad)  # type: ignore[arg-type]


def test_outgoing_bytes_become_a_message() -> None:
    m = outgoing(b"v", b"k", {"n": 1})
    assert (m.value, m.key, m.headers) == (b"v", b"k", {"n": HeaderValue.int64(1)})
    assert outgoing(b"v").key is None


def test_outgoing_message_explicit_key_replaces_and_headers_merge_over() -> None:
    original = Message(b"v", key=b"old", headers={"a": 1, "b": "x"}, id=9)
    m = outgoing(original, b"new", {"b": "y", "c": True})
    assert m.key == b"new"
    assert m.headers == {
        "a": HeaderValue.int64(1),
        "b": HeaderValue.string("y"),
        "c": HeaderValue.boolean(True),
    }
    assert (m.value, m.id) == (b"v", 9)
    assert original.key == b"old"  # the message passed in is not changed
    assert original.headers["b"] == HeaderValue.string("x")
    assert outgoing(original, None, {"z": 0}).key == b"old"  # no key given: the message's
    assert outgoing(original) is original
    with pytest.raises(ConfigurationError):
        outgoing(original, "text-key", None)  # type: ignore[arg-type]


def test_the_fast_constructors_build_what_the_slow_ones_do() -> None:
    headers = {"h": HeaderValue.string("x")}
    fast = received_message(b"v", b"k", headers, 1_700_000_000_000_000, 7, "s", 2, 99)
    slow = Message.received(
        b"v",
        key=b"k",
        headers=headers,
        timestamp_us=1_700_000_000_000_000,
        offset=7,
        stream="s",
        partition=2,
        id=99,
    )
    assert fast == slow
    assert fast.headers is headers  # kept as given, not copied
    assert Message.received(b"v").headers == {}
    made = confirmation(5, 10, "s", 1)
    assert type(made) is Confirmation
    assert made == Confirmation(publishing_id=5, offset=10, stream="s", partition=1)
    assert (made.publishing_id, made.offset, made.stream, made.partition) == (5, 10, "s", 1)
