"""The Iggy poll's native messages (``ReceivedMessage``, ``native/src/received.rs``: offset,
id and empty headers made on first access) behave as the pure-Python decoder's plain
``Message``: the same values and types whatever order attributes are read, assigned or
deleted in, equal, the same repr, and pickled or copied into a plain ``Message``.

Loads the extension directly, so it runs under ``STREAMWIRE_PURE=1`` too; skips, saying
why, only when it is not built.
"""

from __future__ import annotations

import copy
import gc
import pickle
import sys
import weakref
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from streamwire import _native
from streamwire.codec.headers import HeaderValue
from streamwire.codec.message import Message
from streamwire.errors import DecodeError
from streamwire.iggy.protocol.batch import (
    OutgoingMessage,
    encode_batch_py,
    encode_record,
    locate_frames_py,
    stored_messages,
)
from streamwire.iggy.protocol.mapping import KEY_HEADER, _headers_and_key, received_messages_py
from streamwire.iggy.protocol.messaging import PolledMessages
from tests.property.test_native_core import messages_key, poll_records

CORE, WHY = _native.built()
# both_cores: every test here runs the extension and the pure-Python code itself
pytestmark = [
    pytest.mark.skipif(CORE is None, reason=f"{WHY} (build it: make native)"),
    pytest.mark.both_cores,
]

NAMES = Message.__slots__
VALUES: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.integers(-(2**130), 2**130),
    st.binary(max_size=4),
    st.builds(dict),
    st.just({"h": HeaderValue.string("v")}),
)
OPS = st.lists(
    st.tuples(st.sampled_from(["get", "set", "del"]), st.sampled_from(NAMES), VALUES),
    max_size=12,
)


def core() -> _native.NativeCore:
    assert CORE is not None
    return CORE


def both(buf: bytes, key: str | None) -> tuple[list[Message], list[Message]]:
    """The messages of ``buf`` (a valid poll reply's records, checksums not verified: random
    damage may leave the structure valid) from the native core and from the pure-Python
    decoder."""
    frames = locate_frames_py(buf, frame="poll reply")
    index = core().iggy_locate_frames(buf, 0, None, "poll reply")
    native = core().iggy_received_messages(index, "s", key, False, _headers_and_key)
    reply = PolledMessages(
        partition_id=0, current_offset=0, messages_count=len(frames), records=buf, frames=frames
    )
    return native, received_messages_py(reply, stream="s", key_header=key, verify=False)


def apply(msg: Message, op: str, name: str, value: Any) -> tuple[str, Any]:
    """One attribute operation's outcome (an exception by class: its text names the type)."""
    try:
        if op == "get":
            got = getattr(msg, name)
            return "ok", (type(got), got)
        if op == "set":
            setattr(msg, name, value)
        else:
            delattr(msg, name)
        return "ok", None
    except AttributeError as exc:
        return "raised", type(exc)


def shown(msg: Message) -> str:
    """``repr(msg)``, or the class of what it raised (``repr`` shows any assigned value, but
    an assigned object's own ``repr`` may still raise)."""
    try:
        return repr(msg)
    except Exception as exc:
        return type(exc).__name__


def valid(buf: bytes) -> bool:
    try:
        locate_frames_py(buf, frame="poll reply")
    except Exception:
        return False
    return True


@settings(max_examples=200)
@given(poll_records(), st.sampled_from([KEY_HEADER, None]), OPS, st.data())
def test_attributes_read_assigned_and_deleted_alike(
    buf: bytes, key: str | None, ops: list[tuple[str, str, Any]], data: st.DataObject
) -> None:
    assume(valid(buf))
    try:
        native, pure = both(buf, key)
    except DecodeError:  # damaged user headers: test_native_core compares those errors
        assume(False)
        raise
    assume(native)
    assert all(type(m) is core().ReceivedMessage for m in native)
    for op, name, value in ops:
        at = data.draw(st.integers(0, len(native) - 1))
        assert apply(native[at], op, name, value) == apply(pure[at], op, name, value)
    for n, p in zip(native, pure, strict=True):
        whole = all(apply(p, "get", name, None)[0] == "ok" for name in NAMES)
        if whole:  # every slot still set: compare, print and copy
            assert n == p
            assert shown(n) == shown(p)
            assert messages_key([n]) == messages_key([p])
            pickled = pickle.loads(pickle.dumps(n))  # noqa: S301 - its own message
            for twin in (pickled, copy.copy(n), copy.deepcopy(n)):
                assert type(twin) is Message
                assert messages_key([twin]) == messages_key([p])
        else:
            assert [apply(n, "get", name, None) for name in NAMES] == [
                apply(p, "get", name, None) for name in NAMES
            ]


def _record(*messages: OutgoingMessage, base_offset: int = 40) -> bytes:
    batch = encode_batch_py(list(messages))
    return encode_record(
        stored_messages(batch, locate_frames_py(batch)),
        partition_id=3,
        base_offset=base_offset,
        base_timestamp=1000,
        origin_timestamp=900,
    )


def test_a_made_attribute_is_kept_and_each_message_has_its_own_headers() -> None:
    native, pure = both(
        _record(OutgoingMessage(2**127 + 1, b"a", 5), OutgoingMessage(7, b"b", 6)), KEY_HEADER
    )
    first, second = native
    assert first.offset is first.offset
    assert first.id is first.id
    assert first.headers is first.headers
    assert (first.offset, first.id, second.offset, second.id) == (40, 2**127 + 1, 41, 7)
    first.headers["x"] = HeaderValue.string("y")
    assert second.headers == {}
    assert first.headers is not second.headers
    assert [m.headers for m in pure] == [{}, {}]


def test_offsets_and_ids_past_64_bits() -> None:
    native, pure = both(
        _record(
            OutgoingMessage(2**128 - 1, b"a", 5), OutgoingMessage(1, b"b", 5), base_offset=2**64 - 1
        ),
        None,
    )
    assert [(m.offset, m.id) for m in native] == [(2**64 - 1, 2**128 - 1), (2**64, 1)]
    assert messages_key(native) == messages_key(pure)


def test_the_type_is_a_message_made_only_by_the_decoder() -> None:
    received = core().ReceivedMessage
    assert issubclass(received, Message)
    with pytest.raises(TypeError):
        received(b"x")
    (msg,) = both(_record(OutgoingMessage(9, b"z", 1)), None)[0]
    assert isinstance(msg, Message)
    assert not gc.is_tracked(msg)
    with pytest.raises(TypeError):
        hash(msg)
    with pytest.raises(AttributeError):
        msg.other = 1  # type: ignore[attr-defined]


class _Held:
    """An object a weak reference can watch (what a message's slot holds)."""


def immortal(obj: object) -> bool:
    """Whether ``obj`` is immortal (Python 3.12+, PEP 683): its reference count is pinned at a
    huge value that references no longer change."""
    is_immortal = getattr(sys, "_is_immortal", None)  # 3.14+
    if is_immortal is not None:
        return bool(is_immortal(obj))
    return sys.version_info >= (3, 12) and sys.getrefcount(obj) >= 1 << 30


def test_freeing_a_message_releases_every_slot() -> None:
    """The type's own dealloc (installed when Message is a plain slotted class) drops the
    references of all eight slots, made, assigned or never made, and the type's own."""
    received = core().ReceivedMessage
    before = sys.getrefcount(received)
    # bodies of two bytes or more: a one-byte (or empty) bytes is a shared singleton, immortal
    # since Python 3.12, whose reference count neither moves nor means anything
    messages = both(_record(OutgoingMessage(9, b"zz", 1), OutgoingMessage(8, b"yy", 2)), None)[0]
    assert sys.getrefcount(received) == before + 2
    held = [_Held() for _ in NAMES]
    watch = [weakref.ref(h) for h in held]
    first, second = messages
    for name, value in zip(NAMES, held, strict=True):
        setattr(first, name, value)
    _ = second.offset, second.id  # made, left in their slots
    body = second.value
    assert not immortal(body), "the body must be a fresh object for its count to mean anything"
    refs = sys.getrefcount(body)
    del held, value, messages, first
    assert [w() for w in watch] == [None] * len(NAMES)
    del second
    assert sys.getrefcount(body) == refs - 1
    assert sys.getrefcount(received) == before
    with pytest.raises(TypeError):  # nothing can subclass it (the dealloc's premise)

        class Sub(received):  # type: ignore[valid-type, misc]
            pass
