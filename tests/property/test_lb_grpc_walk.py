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
from tests.property.test_liftbridge_native import OTHER_HEADERS, SERVER_HEADERS, messages, slots
from tests.property.test_native_core import outcome

CORE, WHY = _native.built()
pytestmark = pytest.mark.skipif(CORE is None, reason=f"{WHY} (build it: python native/build.py)")

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


def same(wire: bytes) -> tuple[str, Any]:
    native = outcome(lambda: NATIVE(bytearray(wire)))
    pure = outcome(lambda: PURE(bytearray(wire)))
    assert spelled(native) == spelled(pure)
    return pure


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
    kind, value = same(wire[:cut])
    assert kind == "ok"
    kind, value = same(wire)
    assert kind == "ok"
    assert len(value[0]) == len(bodies)
    assert value[1] == len(wire)


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
