"""The native walk of a Subscribe stream's DATA bytes (``lb_decode_grpc`` in
``native/src/liftbridge.rs``, driven by ``split_subscribed``) against the pure one
(``h2grpc.split_messages``, then protobuf and ``to_message``): on random runs of gRPC
messages, well formed or not (messages the native decoder hands back, undecodable ones,
compressed or oversized ones, a run cut anywhere), both give the same messages (every slot,
types included) and consume the same bytes, or raise the same exception.

They load the extension directly, so they run under ``STREAMWIRE_PURE=1`` too, and skip only
when it is not built.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamwire import _native
from streamwire.liftbridge import _h2_subscription
from streamwire.liftbridge._h2_subscription import split_subscribed
from streamwire.transport import h2grpc
from tests.property.test_liftbridge_native import OTHER_HEADERS, SERVER_HEADERS, messages, slots
from tests.property.test_native_core import outcome

CORE, WHY = _native.built()
# both_cores: every test here runs the extension and the pure-Python code itself
pytestmark = [
    pytest.mark.skipif(CORE is None, reason=f"{WHY} (build it: make native)"),
    pytest.mark.both_cores,
]

NATIVE = split_subscribed(False, CORE)
PURE = split_subscribed(False, None)


def framed(body: bytes, flag: int = 0) -> bytes:
    return bytes((flag,)) + struct.pack(">I", len(body)) + body


def spelled(result: tuple[str, Any]) -> tuple[str, Any]:
    kind, value = result
    if kind != "ok":
        return kind, value
    msgs, consumed, nbytes = value
    return kind, ([slots(("ok", m)) for m in msgs], consumed, nbytes)


def runs(walk: Any, wire: bytes) -> list[tuple[str, Any]]:
    """Each call's outcome until the walk hands out nothing more or raises."""
    buf = bytearray(wire)
    out: list[tuple[str, Any]] = []
    while len(buf) >= 5:
        result = outcome(lambda: walk(buf))
        out.append(spelled(result))
        if result[0] != "ok" or not result[1][0]:
            break
        del buf[: result[1][1]]
    return out


def same(wire: bytes) -> tuple[str, Any]:
    """Both walks, called as the protocol calls them (again after each run they hand
    out), give the same runs and end alike; the last outcome."""
    native, pure = runs(NATIVE, wire), runs(PURE, wire)
    assert native == pure
    return pure[-1] if pure else ("ok", ([], 0, 0))


BODIES = st.one_of(
    messages(SERVER_HEADERS),  # taken natively
    messages(OTHER_HEADERS),  # often handed back to Python
    st.binary(max_size=20),  # mostly undecodable
)


@given(st.lists(messages(SERVER_HEADERS), max_size=12), st.data())
def test_well_formed_runs_walk_alike_wherever_they_are_cut(
    bodies: list[bytes], data: st.DataObject
) -> None:
    wire = b"".join(framed(b) for b in bodies)
    cut = data.draw(st.integers(0, len(wire)))
    assert same(wire[:cut])[0] == "ok"
    native = NATIVE(bytearray(wire))
    assert (len(native[0]), native[1]) == (len(bodies), len(wire))
    assert spelled(("ok", native)) == spelled(("ok", PURE(bytearray(wire))))


@given(
    st.lists(st.tuples(BODIES, st.sampled_from([0, 0, 0, 0, 1, 255])), max_size=10),
    st.data(),
)
def test_mixed_runs_walk_or_fail_alike(items: list[tuple[bytes, int]], data: st.DataObject) -> None:
    wire = b"".join(framed(body, flag) for body, flag in items)
    cut = data.draw(st.integers(0, len(wire)))
    same(wire)
    same(wire[:cut])


@given(st.lists(messages(SERVER_HEADERS), min_size=1, max_size=4))
def test_oversized_messages_fail_alike(bodies: list[bytes]) -> None:
    limit = _h2_subscription.MAX_MESSAGE
    wire = b"".join(framed(b) for b in bodies) + b"\0" + struct.pack(">I", limit + 1)
    assert same(wire)[0] != "ok"


def test_a_run_is_walked_natively_in_one_call() -> None:
    assert CORE is not None
    wire = bytearray(b"".join(framed(b"") for _ in range(5)) + b"\0\0")
    msgs, pos = CORE.lb_decode_grpc(wire, 0, 100)
    assert (len(msgs), pos) == (5, 25)
    assert CORE.lb_decode_grpc(wire, 25, 100) == ([], 25)


# --- the DATA frames gathered (``h2_gather_data`` against ``gather_data_pure``) ----------------


def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return h2grpc.encode_frame(kind, flags, stream, payload)


FRAMES = st.one_of(
    st.builds(lambda p: frame(0, 0, 1, p), st.binary(max_size=40)),  # the common case
    st.builds(
        lambda pad, p, declared: frame(0, 8, 1, bytes((declared,)) + p + b"\0" * pad),
        st.integers(0, 5),
        st.binary(max_size=20),
        st.integers(0, 40),  # padding lengths, valid or not
    ),
    st.builds(
        frame,
        st.sampled_from([0, 1, 3, 6, 8]),
        st.integers(0, 255),
        st.sampled_from([0, 1, 3]),
        st.binary(max_size=12),
    ),
)


@given(st.lists(FRAMES, max_size=10), st.integers(0, 400), st.integers(0, 64), st.data())
def test_gathering_data_frames_is_alike(
    frames: list[bytes], budget: int, max_frame: int, data: st.DataObject
) -> None:
    assert CORE is not None
    wire = b"".join(frames)
    wire = wire[: data.draw(st.integers(0, len(wire)))]
    start = data.draw(st.integers(0, min(len(wire), 9)))
    prefix = data.draw(st.binary(max_size=4))
    native_out, pure_out = bytearray(prefix), bytearray(prefix)
    native = CORE.h2_gather_data(bytearray(wire), start, 1, native_out, budget, max_frame)
    pure = h2grpc.gather_data_pure(bytearray(wire), start, 1, pure_out, budget, max_frame)
    assert (native, native_out) == (pure, pure_out)
