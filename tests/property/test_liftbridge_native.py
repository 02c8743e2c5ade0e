"""The native decoder of subscribed Liftbridge messages (``lb_decode_message`` in
``native/src/liftbridge.rs``) against the pure-Python one (protobuf, then ``to_message``): on
random messages, well formed or not, :func:`decode_message_native` and
:func:`decode_message_pure` give the same message (every slot, types included) or raise the
same exception; and the common shape is built natively, not handed back.

Like ``test_native_core.py`` these load the extension directly, so they run under
``STREAMWIRE_PURE=1`` too, and skip only when it is not built.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamwire import _native
from streamwire.codec.message import Message
from streamwire.errors import DecodeError
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.messages import (
    KINDS_HEADER,
    decode_message,
    decode_message_native,
    decode_message_pure,
)
from tests.property.test_native_core import outcome

CORE, WHY = _native.built()
# both_cores: every test here runs the extension and the pure-Python code itself
pytestmark = [
    pytest.mark.skipif(CORE is None, reason=f"{WHY} (build it: make native)"),
    pytest.mark.both_cores,
]

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
TEXT = st.text(max_size=12)
SERVER_HEADERS = st.fixed_dictionaries(
    {}, optional={"subject": st.binary(max_size=8), "reply": st.binary(max_size=8)}
)
OTHER_HEADERS = st.dictionaries(
    st.sampled_from(["a", "subject", "reply", KINDS_HEADER, "é", ""]),
    st.binary(max_size=8),
    max_size=3,
)


def core() -> _native.NativeCore:
    assert CORE is not None
    return CORE


def slots(result: tuple[str, Any]) -> tuple[str, Any]:
    """A decode outcome with a message spelled out slot by slot, types included."""
    kind, value = result
    if kind == "ok":
        assert type(value) is Message
        return kind, tuple((type(getattr(value, n)), getattr(value, n)) for n in Message.__slots__)
    return kind, value


def same(raw: bytes, server_headers: bool = False) -> tuple[str, Any]:
    native = outcome(lambda: decode_message_native(core(), raw, server_headers=server_headers))
    pure = outcome(lambda: decode_message_pure(raw, server_headers=server_headers))
    assert slots(native) == slots(pure)
    return pure


@st.composite
def messages(draw: st.DrawFn, headers: st.SearchStrategy[dict[str, bytes]]) -> bytes:
    msg = pb.Message(
        offset=draw(INT64),
        key=draw(st.binary(max_size=8)),
        value=draw(st.binary(max_size=300)),
        timestamp=draw(INT64),
        stream=draw(TEXT),
        partition=draw(INT32),
        subject=draw(TEXT),
        replySubject=draw(TEXT),
        headers=draw(headers),
        ackInbox=draw(TEXT),
        correlationId=draw(TEXT),
        ackPolicy=draw(st.sampled_from([pb.AckPolicy.LEADER, pb.AckPolicy.ALL, pb.AckPolicy.NONE])),
    )
    return msg.SerializeToString()


@given(messages(SERVER_HEADERS), st.booleans())
def test_the_common_shape_is_built_natively_and_alike(raw: bytes, server_headers: bool) -> None:
    assert same(raw, server_headers)[0] == "ok"
    assert core().lb_decode_message(raw) is not None


@given(messages(OTHER_HEADERS), st.booleans())
def test_other_headers_decode_alike(raw: bytes, server_headers: bool) -> None:
    assert same(raw, server_headers)[0] == "ok"


@given(messages(OTHER_HEADERS), st.data())
def test_damaged_messages_decode_or_fail_alike(raw: bytes, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(raw)))
    junk = data.draw(st.binary(max_size=12))
    damaged = bytearray(raw[:cut] + junk + raw[cut:])
    if damaged:
        at = data.draw(st.integers(0, len(damaged) - 1))
        damaged[at] = data.draw(st.integers(0, 255))
    same(bytes(damaged))
    same(raw[:cut])


@given(st.binary(max_size=64))
def test_random_bytes_decode_or_fail_alike(raw: bytes) -> None:
    same(raw)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, wire: int, body: bytes) -> bytes:
    return _varint(number << 3 | wire) + body


def _len(number: int, body: bytes) -> bytes:
    return _field(number, 2, _varint(len(body)) + body)


@pytest.mark.parametrize(
    ("raw", "native"),
    [
        (b"", True),  # the handshake: every field at its default
        (_field(6, 0, _varint(-5)), True),  # a negative int32: ten bytes
        (_field(4, 0, _varint(-1)), True),  # a negative timestamp: floor division
        (_field(6, 0, _varint(1 << 40 | 7)), True),  # int32 keeps the low 32 bits
        (_len(3, b"a") + _len(3, b"b"), True),  # the last value wins
        (_len(9, _len(1, b"subject")), True),  # a server header without its value
        (_len(9, _len(2, b"v")), False),  # an entry without a key: header ""
        (_len(9, _len(1, b"x") + _len(2, b"v")), False),  # another header
        (_field(13, 0, b"\x01"), False),  # an unknown field
        (_field(3, 0, b"\x01"), False),  # a known field with another wire type
        (_len(5, b"\xff"), False),  # a stream name that is not UTF-8
        (_field(1, 0, b"\xff" * 10 + b"\x01"), False),  # an overlong varint
        (_field(1, 0, b"\xff" * 9 + b"\x02"), False),  # a varint beyond 64 bits
        (_len(3, b"abc")[:-1], False),  # truncated
    ],
)
def test_edge_cases(raw: bytes, native: bool) -> None:
    same(raw)
    assert (core().lb_decode_message(raw) is not None) is native


def test_decode_message_raises_decode_error_on_garbage() -> None:
    with pytest.raises(DecodeError):
        decode_message(_len(3, b"abc")[:-1])
    with pytest.raises(DecodeError):
        decode_message_pure(_len(5, b"\xff"))


def test_decode_message_uses_the_loaded_core() -> None:
    raw = pb.Message(offset=7, value=b"v", stream="s", headers={"subject": b"s"})
    got = decode_message(raw.SerializeToString())
    assert (got.value, got.key, got.offset, got.stream, got.headers) == (b"v", None, 7, "s", {})
