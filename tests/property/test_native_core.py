"""The native core (``streamwire._native._core``) against the pure-Python code it replaces:
on random input, well-formed or not, both give the same bytes, the same messages, or the
same exception (class and text).

These tests load the extension directly (:func:`streamwire._native.built`), so they run
under ``STREAMWIRE_PURE=1`` too; they skip, saying why, only when it is not built.
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import struct
import subprocess
import sys
import weakref
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from streamwire import _native
from streamwire.codec.amqp import encode_data_body
from streamwire.codec.headers import HeaderValue
from streamwire.codec.message import Confirmation, Message
from streamwire.iggy.protocol.batch import (
    FRAME_HEADER_SIZE,
    OutgoingMessage,
    bytes_view,
    encode_batch_py,
    encode_record,
    encode_runs_py,
    locate_frames,
    locate_frames_py,
    message_ids,
    stored_messages,
)
from streamwire.iggy.protocol.mapping import (
    KEY_HEADER,
    _headers_and_key,
    received_messages,
    received_messages_py,
    to_outgoing,
)
from streamwire.iggy.protocol.messaging import PolledMessages
from streamwire.rabbitmq._amqp_map import (
    decode_entries_native,
    decode_entries_py,
    encode_message,
)
from streamwire.rabbitmq.protocol.chunk import CHUNK_HEADER_SIZE, parse_chunk_header
from streamwire.transport.pending import LazyFuture, Ledger
from tests.property.test_rabbitmq_decode_chunk import simple, sub_batch
from tests.unit.iggy.strategies import HEADERS

CORE, WHY = _native.built()
# both_cores: every test here runs the extension and the pure-Python code itself
pytestmark = [
    pytest.mark.skipif(CORE is None, reason=f"{WHY} (build it: make native)"),
    pytest.mark.both_cores,
]
ROOT = Path(__file__).resolve().parents[2]


def core() -> _native.NativeCore:
    assert CORE is not None
    return CORE


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """What a call gives: its result, or its exception's class and text."""
    try:
        return "ok", call()
    except Exception as exc:
        return "raised", (type(exc), str(exc))


def messages_key(msgs: list[Message]) -> list[tuple[object, ...]]:
    """Every slot of every message, types included (``Message.__eq__`` compares values); a
    NaN header value (damaged bytes may make one) compares equal to a NaN of its kind."""
    return [
        tuple((type(getattr(m, n)), _comparable(getattr(m, n))) for n in Message.__slots__)
        for m in msgs
    ]


def _comparable(value: object) -> object:
    if not isinstance(value, dict):
        return value
    out: dict[object, object] = {}
    for name, header in value.items():
        raw = getattr(header, "value", None)
        nan = isinstance(raw, float) and math.isnan(raw)
        out[name] = (getattr(header, "kind", None), "nan") if nan else header
    return out


def same(native: tuple[str, Any], pure: tuple[str, Any]) -> None:
    """The same outcome; messages equal slot by slot. The Iggy poll's native messages are
    ``ReceivedMessage`` (lazy attributes, see ``native/src/received.rs``), every other native
    decoder's a plain ``Message``; the pure-Python decoders' always plain."""
    if native[0] == pure[0] == "ok" and isinstance(pure[1], list):
        made = (Message, core().ReceivedMessage)
        assert all(type(m) in made for m in native[1] + pure[1])
        assert messages_key(native[1]) == messages_key(pure[1])
    else:
        assert native == pure


# --- selection -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "pure"),
    [
        ({}, False),
        ({"STREAMWIRE_PURE": ""}, False),
        ({"STREAMWIRE_PURE": "0"}, False),
        ({"STREAMWIRE_PURE": "1"}, True),
        ({"STREAMWIRE_PURE_PYTHON": "1"}, True),
        ({"STREAMWIRE_PURE": "0", "STREAMWIRE_PURE_PYTHON": "yes"}, True),
    ],
)
def test_the_environment_forces_pure_python(environ: dict[str, str], pure: bool) -> None:
    assert _native.forced_pure(environ) is pure


@pytest.mark.parametrize("pure", [False, True])
def test_the_choice_made_at_import(pure: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k not in _native.PURE_ENV}
    if pure:
        env["STREAMWIRE_PURE"] = "1"
    # the streamwire this test imports (the checkout's src/, or an installed wheel's)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(_native.__file__).parents[2]), str(ROOT)])
    code = (
        "from streamwire import _native\n"
        "from streamwire.iggy.protocol import batch\n"
        "from streamwire.rabbitmq import _amqp_map\n"
        "print(_native.core is None, batch._native is _native.core,"
        " _amqp_map._native is _native.core, _native.reason)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    is_none, batch_same, amqp_same, reason = done.stdout.strip().split(" ", 3)
    assert is_none == str(pure)
    assert batch_same == amqp_same == "True"
    assert reason.startswith("pure Python" if pure else "native core")


def test_the_extension_declares_the_abi_this_package_expects() -> None:
    assert core().ABI == _native.ABI


# --- RabbitMQ: chunk entries → messages ---------------------------------------------------

RECORDS = st.one_of(
    st.binary(max_size=300).map(encode_data_body),  # plain data sections (built natively)
    st.binary(max_size=40),  # not AMQP at all
    st.builds(  # AMQP with annotations/properties (decoded in Python, called back)
        lambda v, k: encode_message(Message(v, key=k, headers={"h": 1})),
        st.binary(max_size=20),
        st.binary(min_size=1, max_size=5),
    ),
    # near-misses of the fast path: wrong length byte, wrong descriptor
    st.binary(min_size=1, max_size=20).map(lambda b: b"\x00\x53\x75\xa0" + bytes([len(b)]) + b),
    st.binary(max_size=20).map(lambda b: b"\x00\x53\x76\xa0" + bytes([len(b)]) + b),
    # vbin32 data sections (bodies above 255 bytes, built natively too), any length field:
    # right, one off either way, or huge; and entries too short to hold the length
    st.tuples(st.binary(max_size=300), st.sampled_from((0, 1, -1, 1 << 31))).map(
        lambda bd: b"\x00\x53\x75\xb0" + struct.pack(">I", (len(bd[0]) + bd[1]) % (1 << 32)) + bd[0]
    ),
    st.binary(max_size=3).map(lambda b: b"\x00\x53\x75\xb0" + b),
)
ENTRIES = st.lists(
    st.one_of(
        RECORDS.map(lambda r: (1, simple(r))),
        st.tuples(st.lists(RECORDS, min_size=1, max_size=4), st.booleans()).map(
            lambda rc: (len(rc[0]), sub_batch(rc[0], rc[1]))
        ),
        # malformed entries: garbage, a size running past the end, a bad sub-batch header
        st.binary(min_size=1, max_size=12).map(lambda b: (1, b)),
        st.integers(1, 1 << 20).map(lambda n: (1, struct.pack(">I", n))),
        st.binary(max_size=16).map(lambda b: (1, b"\x80" + b)),
    ),
    max_size=12,
)


def chunk_bytes(entries: bytes, records: int, chunk_id: int, crc: int, ts: int) -> bytes:
    header = struct.pack(
        ">BBHIqQQIIIB3x",
        0x50, 0, 1, records, ts, 1, chunk_id, crc, len(entries), 0, 0,
    )  # fmt: skip
    return header + entries


@settings(max_examples=400)
@given(
    ENTRIES,
    st.one_of(st.integers(0, 2000), st.just(2**64 - 3)),
    st.integers(-2, 2),
    st.one_of(st.integers(-5, 30), st.integers(2**64 - 8, 2**64 + 8)),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.binary(max_size=9),
    st.integers(-(2**63), 2**63 - 1),
)
def test_chunk_entries_decode_alike(
    parts: list[tuple[int, bytes]],
    chunk_id: int,
    miscount: int,
    skip: int,
    amqp: bool,
    verify: bool,
    good_crc: bool,
    prefix: bytes,
    ts: int,
) -> None:
    data = b"".join(e for _, e in parts)
    records = max(0, min(2**32 - 1, sum(n for n, _ in parts) + miscount))
    crc = zlib.crc32(data) if good_crc else zlib.crc32(data) ^ 1
    buf = prefix + chunk_bytes(data, records, chunk_id, crc, ts)  # a tail, as Deliver hands it
    header = parse_chunk_header(memoryview(buf)[len(prefix) :])
    start = len(prefix) + CHUNK_HEADER_SIZE
    same(
        outcome(lambda: decode_entries_native(core(), buf, start, header, "s", skip, verify, amqp)),
        outcome(lambda: decode_entries_py(buf, start, header, "s", skip, verify, amqp)),
    )


@given(
    st.lists(
        st.one_of(st.binary(max_size=200), st.binary(min_size=250, max_size=1100)),
        min_size=1,
        max_size=50,
    ),
    st.integers(0, 2**40),
)
def test_plain_chunks_are_built_natively(bodies: list[bytes], chunk_id: int) -> None:
    """The common case takes no Python callback (the callbacks would fail here), with a
    one-byte (`vbin8`) or four-byte (`vbin32`) data-section length; the messages are
    untracked by the garbage collector (rabbitmq.rs)."""
    data = b"".join(simple(encode_data_body(b)) for b in bodies)
    buf = chunk_bytes(data, len(bodies), chunk_id, zlib.crc32(data), 1_700_000_000_000)

    def refuse(*args: object) -> Any:
        raise AssertionError(f"called back for {args}")

    got = core().rmq_decode_records(
        buf, 48, len(buf), chunk_id, len(bodies), 1_700_000_000_000_000, "s", 0, True,
        zlib.crc32(data), refuse, refuse,
    )  # fmt: skip
    header = parse_chunk_header(buf)
    assert messages_key(got) == messages_key(decode_entries_py(buf, 48, header, "s", 0, True, True))
    assert [m.value for m in got] == bodies
    assert not any(gc.is_tracked(m) for m in got)
    assert all(type(m.value) is bytes and m.headers == {} for m in got)


# --- Iggy: batch encode ------------------------------------------------------------------

IDS = st.one_of(
    st.integers(1, 2**128 - 1),
    st.sampled_from([0, 1, 2**64 - 1, 2**64, 2**128 - 1, 2**128, -1]),
)
TIMES = st.one_of(
    st.integers(0, 2**34),
    st.sampled_from([0, 2**32 - 1, 2**32, 2**64 - 1, 2**64, -1]),
)
OUTGOING = st.builds(
    OutgoingMessage,
    IDS,
    st.one_of(st.binary(min_size=1, max_size=300), st.just(b"")),
    TIMES,
    st.binary(max_size=40),
)
ODD_OUTGOING = st.one_of(  # what the native encoder leaves to Python: same result
    st.builds(OutgoingMessage, IDS, st.binary(max_size=9).map(bytearray), TIMES),
    st.builds(OutgoingMessage, st.just(True), st.binary(min_size=1, max_size=9), TIMES),
    st.tuples(IDS, st.binary(min_size=1, max_size=9)),
)


@settings(max_examples=400)
@given(st.lists(OUTGOING, max_size=12), st.booleans())
def test_batches_encode_alike(messages: list[OutgoingMessage], as_tuple: bool) -> None:
    given_ = tuple(messages) if as_tuple else messages
    native = outcome(lambda: core().iggy_encode_batch(given_))
    in_range = all(0 <= m.id < 2**128 and 0 <= m.origin_timestamp < 2**64 for m in messages)
    if native == ("ok", None):  # left to Python (the wrapper then runs encode_batch_py)
        assert not in_range, "well-typed, in-range input must be encoded natively"
        return
    same(native, outcome(lambda: encode_batch_py(given_)))


@given(st.lists(st.one_of(OUTGOING, ODD_OUTGOING), min_size=1, max_size=6))
def test_unusual_input_is_left_to_python(messages: list[Any]) -> None:
    native = outcome(lambda: core().iggy_encode_batch(messages))
    pure = outcome(lambda: encode_batch_py(messages))
    if native == ("ok", None):
        return  # the wrapper then runs encode_batch_py: the same by construction
    same(native, pure)


@given(st.lists(st.binary(min_size=1, max_size=100), min_size=1, max_size=20), HEADERS)
def test_batches_of_real_messages_encode_alike(
    bodies: list[bytes], headers: dict[str, HeaderValue]
) -> None:
    msgs = [
        to_outgoing(Message(b, key=b[:3], headers=headers), now_us=1_700_000_000_000_000)
        for b in bodies
    ]
    assert core().iggy_encode_batch(msgs) == encode_batch_py(msgs)


RUN_IDS = st.binary(min_size=16, max_size=16).filter(any)  # id 0 is refused


@st.composite
def body_runs(draw: st.DrawFn) -> list[tuple[list[bytes], bytes, int]]:
    """Runs of plain bodies as the producer keeps them: bodies, 16 id bytes each, origin."""
    base = draw(st.integers(0, 2**63))
    runs = []
    for _ in range(draw(st.integers(1, 4))):
        bodies = draw(st.lists(st.binary(min_size=1, max_size=60), min_size=1, max_size=8))
        ids = b"".join(draw(st.lists(RUN_IDS, min_size=len(bodies), max_size=len(bodies))))
        runs.append((bodies, ids, base + draw(st.integers(0, 2**32 - 1))))
    return runs


@given(body_runs(), st.sampled_from([0, 1, 300]))
def test_runs_of_bodies_encode_as_their_frames_do(
    runs: list[tuple[list[bytes], bytes, int]], room: int
) -> None:
    frames = [
        OutgoingMessage(i, body, origin, b"")
        for bodies, ids, origin in runs
        for i, body in zip(message_ids(ids), bodies, strict=True)
    ]
    expected = bytes(room) + encode_batch_py(frames)  # the room first, zeroed
    assert encode_runs_py(runs, room) == expected
    assert core().iggy_encode_runs(runs, room) == bytearray(expected)


@given(
    body_runs(),
    st.sampled_from(["short ids", "long ids", "zero id", "empty body", "wide span", "empty"]),
)
def test_runs_the_native_encoder_refuses_fail_alike(
    runs: list[tuple[list[bytes], bytes, int]], damage: str
) -> None:
    bodies, ids, origin = runs[0]
    if damage == "short ids":
        runs[0] = (bodies, ids[:-1], origin)
    elif damage == "long ids":
        runs[0] = (bodies, ids + b"\x01" * 16, origin)
    elif damage == "zero id":
        runs[0] = (bodies, bytes(16) + ids[16:], origin)
    elif damage == "empty body":
        runs[0] = ([b"", *bodies[1:]], ids, origin)
    elif damage == "wide span":
        runs.append(([b"x"], b"\x01" * 16, origin + 2**32 + 1))
    else:
        runs = []
    native = outcome(lambda: core().iggy_encode_runs(runs))
    pure = outcome(lambda: encode_runs_py(runs))
    if native == ("ok", None):
        return  # the wrapper then runs encode_runs_py: the same by construction
    same(native, pure)


# --- Iggy: poll replies --------------------------------------------------------------------


@st.composite
def poll_records(draw: st.DrawFn) -> bytes:
    """Batch records as a server serves them, then perhaps damaged."""
    out = b""
    for _ in range(draw(st.integers(0, 3))):
        bodies = draw(st.lists(st.binary(min_size=1, max_size=80), min_size=1, max_size=6))
        headers = draw(st.one_of(st.just({}), HEADERS))
        key = draw(st.one_of(st.none(), st.binary(min_size=1, max_size=8)))
        now = draw(st.integers(0, 2**40))
        msgs = [
            to_outgoing(
                Message(b, key=key, headers=headers), now_us=now + draw(st.integers(0, 2**32 - 1))
            )
            for b in bodies
        ]
        batch = encode_batch_py(msgs)
        frames = stored_messages(batch, locate_frames_py(batch))
        out += encode_record(
            frames,
            partition_id=draw(st.integers(0, 2**32 - 1)),
            base_offset=draw(st.one_of(st.integers(0, 2**40), st.just(2**64 - 2))),
            base_timestamp=draw(st.integers(0, 2**64 - 1)),
            origin_timestamp=draw(st.integers(0, 2**64 - 1)),
        )
    damage = draw(st.sampled_from(["none", "flip", "field", "truncate", "append", "garbage"]))
    if damage == "field" and len(out) >= 304:
        # a header field of the first batch or its first frame: length, count, reserved,
        # user headers length, payload length, frame reserved
        at, fmt = draw(
            st.sampled_from(
                [(32, "<Q"), (48, "<I"), (60, "<I"), (288, "<I"), (292, "<I"), (296, "<Q")]
            )
        )
        size = struct.calcsize(fmt)
        value = draw(
            st.one_of(st.integers(0, 8), st.integers(0, 600), st.integers(0, 2 ** (8 * size) - 1))
        )
        out = out[:at] + struct.pack(fmt, value) + out[at + size :]
    elif damage == "flip" and out:
        at = draw(st.integers(0, len(out) - 1))
        out = out[:at] + bytes([out[at] ^ draw(st.integers(1, 255))]) + out[at + 1 :]
    elif damage == "truncate" and out:
        out = out[: draw(st.integers(0, len(out) - 1))]
    elif damage == "append":
        out += draw(st.binary(min_size=1, max_size=300))
    elif damage == "garbage":
        out = draw(st.binary(max_size=600))
    return out


@settings(max_examples=400)
@given(poll_records(), st.integers(0, 40), st.one_of(st.none(), st.integers(-10, 5000)))
def test_frames_are_located_alike(buf: bytes, start: int, end: int | None) -> None:
    native = outcome(lambda: core().iggy_locate_frames(buf, start, end, "poll reply"))
    pure = outcome(lambda: locate_frames_py(buf, start, end, frame="poll reply"))
    if native[0] == "ok":
        index = native[1]
        assert pure[0] == "ok"
        assert list(index) == pure[1]
        assert len(index) == len(pure[1])
        assert index[::-1] == pure[1][::-1]
        assert index[1:3] == pure[1][1:3]
        if pure[1]:
            assert index[-1] == pure[1][-1]
            assert index[0] == pure[1][0]
        with pytest.raises(IndexError):
            index[len(pure[1])]
    else:
        assert native == pure


@settings(max_examples=400)
@given(
    poll_records(),
    st.booleans(),
    st.sampled_from([KEY_HEADER, None, "other"]),
)
def test_poll_replies_give_the_same_messages(buf: bytes, verify: bool, key: str | None) -> None:
    try:
        listed = locate_frames_py(buf, frame="poll reply")
    except Exception:
        assume(False)
        raise
    index = core().iggy_locate_frames(buf, 0, None, "poll reply")
    reply = PolledMessages(
        partition_id=1, current_offset=0, messages_count=len(listed), records=buf, frames=listed
    )
    same(
        outcome(lambda: core().iggy_received_messages(index, "s", key, verify, _headers_and_key)),
        outcome(lambda: received_messages_py(reply, stream="s", key_header=key, verify=verify)),
    )


def _sliced(buf: bytes, before: int, after: int) -> memoryview:
    """``buf`` as a view into a larger ``bytes`` (as a poll reply's records are a view of
    the received frame)."""
    whole = b"\xaa" * before + buf + b"\x55" * after
    return memoryview(whole)[before : before + len(buf)]


@settings(max_examples=300)
@given(
    poll_records(),
    st.integers(0, 40),
    st.one_of(st.none(), st.integers(-10, 5000)),
    st.integers(0, 300),
    st.integers(0, 50),
)
def test_frames_are_located_alike_in_a_view(
    buf: bytes, start: int, end: int | None, before: int, after: int
) -> None:
    view = _sliced(buf, before, after)
    assert bytes_view(view)
    native = outcome(lambda: core().iggy_locate_frames(view, start, end, "poll reply"))
    pure = outcome(lambda: locate_frames_py(view, start, end, frame="poll reply"))
    over_bytes = outcome(lambda: locate_frames_py(buf, start, end, frame="poll reply"))
    assert (pure[0], pure[1] if pure[0] == "raised" else None) == (
        over_bytes[0],
        over_bytes[1] if over_bytes[0] == "raised" else None,
    )
    if native[0] == "ok":
        assert pure[0] == "ok"
        assert list(native[1]) == pure[1] == over_bytes[1]
        assert native[1].buf is view
    else:
        assert native == pure


@settings(max_examples=300)
@given(
    poll_records(),
    st.booleans(),
    st.sampled_from([KEY_HEADER, None, "other"]),
    st.integers(0, 300),
    st.integers(0, 50),
)
def test_poll_replies_in_a_view_give_the_same_messages(
    buf: bytes, verify: bool, key: str | None, before: int, after: int
) -> None:
    try:
        listed = locate_frames_py(buf, frame="poll reply")
    except Exception:
        assume(False)
        raise
    view = _sliced(buf, before, after)
    index = core().iggy_locate_frames(view, 0, None, "poll reply")
    in_view = PolledMessages(
        partition_id=1, current_offset=0, messages_count=len(listed), records=view, frames=index
    )
    in_bytes = PolledMessages(
        partition_id=1, current_offset=0, messages_count=len(listed), records=buf, frames=listed
    )
    native = outcome(
        lambda: core().iggy_received_messages(index, "s", key, verify, _headers_and_key)
    )
    wrapped = outcome(lambda: received_messages(in_view, stream="s", key_header=key, verify=verify))
    same(wrapped, native)  # native or pure, whichever the wrapper takes
    same(
        native,
        outcome(lambda: received_messages_py(in_view, stream="s", key_header=key, verify=verify)),
    )
    same(
        native,
        outcome(lambda: received_messages_py(in_bytes, stream="s", key_header=key, verify=verify)),
    )
    if native[0] == "ok":
        # made by the native core, so untracked by the garbage collector (see iggy.rs)
        assert not any(gc.is_tracked(m) for m in native[1])
        assert all(type(m.value) is bytes for m in native[1])


def test_only_immutable_contiguous_buffers_are_taken_natively() -> None:
    batch = encode_batch_py([OutgoingMessage(7, b"x" * 10, 5)])
    assert not bytes_view(bytearray(batch))
    assert not bytes_view(memoryview(bytearray(batch)))
    assert not bytes_view(memoryview(batch)[::2])
    assert not bytes_view(memoryview(batch[:16]).cast("I"))
    with pytest.raises(TypeError):
        core().iggy_locate_frames(bytearray(batch), 0, None, "b")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        core().iggy_locate_frames(memoryview(bytearray(batch)), 0, None, "b")
    # the wrapper leaves what the native core refuses to the pure-Python walk
    assert list(locate_frames(bytearray(batch))) == locate_frames_py(batch)  # type: ignore[arg-type]


def test_the_index_keeps_its_buffer() -> None:
    msgs = [OutgoingMessage(7, b"x" * 10, 5)]
    batch = encode_batch_py(msgs)
    index = core().iggy_locate_frames(batch, 0, None, "b")
    assert index.buf is batch
    assert len(index) == 1
    assert index[0][5] == 256
    assert index[0][6] == 256 + FRAME_HEADER_SIZE + 10
    assert repr(index) == "<FrameIndex of 1 frames>"


# --- every error of the two decoders, deliberately -----------------------------------------


def _put(buf: bytes, at: int, fmt: str, value: int) -> bytes:
    size = struct.calcsize(fmt)
    return buf[:at] + struct.pack(fmt, value) + buf[at + size :]


_TWO = encode_batch_py([OutgoingMessage(1, b"a" * 30, 0), OutgoingMessage(2, b"b" * 30, 0)])
FRAME_DAMAGE = {
    "batch header: need 256 bytes, 100 left": b"\0" * 100,
    "non-zero reserved bytes in a batch header": _put(_TWO, 60, "<B", 1),
    "batch length 10": _put(_TWO, 32, "<Q", 10),
    f"batch length {len(_TWO) + 1}": _put(_TWO, 32, "<Q", len(_TWO) + 1),
    "batch of 9 messages": _put(_TWO, 48, "<I", 9),
    "message frame: need 48 bytes, 0 left": _put(_TWO, 48, "<I", 3),
    "non-zero reserved bytes in a message frame": _put(_TWO, 296, "<B", 1),
    "message frame of 1048 bytes, 156 left": _put(_TWO, 256 + 36, "<I", 1000),
    "78 trailing bytes": _put(_TWO, 48, "<I", 1),
}


@pytest.mark.parametrize("what", sorted(FRAME_DAMAGE))
def test_each_frame_error_is_the_same(what: str) -> None:
    buf = FRAME_DAMAGE[what]
    pure = outcome(lambda: locate_frames_py(buf, frame="poll reply"))
    assert pure[0] == "raised"
    assert what in pure[1][1]
    assert outcome(lambda: core().iggy_locate_frames(buf, 0, None, "poll reply")) == pure


_BODY = simple(encode_data_body(b"x" * 10))
CHUNK_DAMAGE = {  # entries, announced records
    "entry size": (_BODY + b"\0\0", 2),
    "entry of 300 bytes": (_BODY + struct.pack(">I", 300) + b"y", 2),
    "chunk announces 3 records, holds 1": (_BODY, 3),
    "sub-batch header": (_BODY + b"\x80" + b"\0" * 6, 2),
}


@pytest.mark.parametrize("what", sorted(CHUNK_DAMAGE))
@pytest.mark.parametrize("good_crc", [True, False])
def test_each_chunk_error_is_the_same(what: str, good_crc: bool) -> None:
    entries, records = CHUNK_DAMAGE[what]
    crc = zlib.crc32(entries) ^ (0 if good_crc else 1)
    buf = chunk_bytes(entries, records, 7, crc, 1_700_000_000_000)
    header = parse_chunk_header(buf)
    pure = outcome(lambda: decode_entries_py(buf, 48, header, "s", 0, True, True))
    assert pure[0] == "raised"
    assert (what if good_crc else "chunk CRC-32 checksum mismatch") in pure[1][1]
    assert outcome(lambda: decode_entries_native(core(), buf, 48, header, "s", 0, True, True)) == (
        pure
    )


@settings(max_examples=30, deadline=None)
@given(count=st.integers(0, 600))
def test_confirmation_futures_are_made_alike(count: int) -> None:
    """``send_batch``'s futures: the native core makes the objects the class makes (same
    ledger, same indices, behaving alike), only untracked by the garbage collector."""

    async def check() -> None:
        book = Ledger(asyncio.get_running_loop(), count, "s", first_id=5)
        native = core().lazy_futures(LazyFuture, book, count)
        pure = [LazyFuture(book, i) for i in range(count)]
        assert [type(f) for f in native] == [LazyFuture] * count
        assert [f._index for f in native] == [f._index for f in pure] == list(range(count))
        assert all(f._ledger is book for f in native)
        assert not any(gc.is_tracked(f) for f in native)
        book.confirm(0, count)
        assert [f.result() for f in native] == [f.result() for f in pure]
        assert [f.result() for f in native] == [
            Confirmation(5 + i, None, "s", None) for i in range(count)
        ]

    asyncio.run(check())


def test_confirmation_futures_are_bound_to_one_class_and_tracked_again_on_use() -> None:
    class Other:
        __slots__ = ("_index", "_ledger")

    book = object()
    (made,) = core().lazy_futures(LazyFuture, book, 1)  # the class the package registers
    with pytest.raises(TypeError, match="another class"):
        core().lazy_futures(Other, book, 1)
    assert not gc.is_tracked(made)
    core().gc_track(made)
    core().gc_track(made)  # already tracked: nothing to do
    core().gc_track(3)  # not a GC type: nothing to do
    assert gc.is_tracked(made)


def test_lazy_future_cannot_be_subclassed() -> None:
    with pytest.raises(TypeError, match="cannot be subclassed"):
        type("Sub", (LazyFuture,), {"__slots__": ()})


async def _awaited(future: LazyFuture) -> Confirmation:
    return await future


_FREE_OPS = st.lists(
    st.tuples(
        st.sampled_from(["make", "drop", "weakref", "attr", "await", "callback", "confirm"]),
        st.integers(0, 40),
        st.integers(0, 40),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(ops=_FREE_OPS)
def test_freed_futures_are_reused_alike(ops: list[tuple[str, int, int]]) -> None:
    """Fresh native futures freed unused are kept and handed out again by the next call:
    in any order of making, dropping, weak references, attributes, awaiting, callbacks and
    confirmations, every live native future says what its pure twin (its index in a twin
    ledger given the same confirmations) says, and weak references to freed ones are
    called back."""

    async def check() -> None:
        loop = asyncio.get_running_loop()
        live: list[tuple[LazyFuture, LazyFuture]] = []  # (native, pure twin)
        books: list[tuple[Ledger, Ledger]] = []
        dead: list[int] = []
        refs: list[weakref.ref[LazyFuture]] = []
        waiting: list[asyncio.Task[Confirmation]] = []
        for op, a, b in ops:
            if op == "make":
                pair = tuple(Ledger(loop, a, "s", first_id=len(books) * 100) for _ in "np")
                books.append((pair[0], pair[1]))
                made: list[LazyFuture] = core().lazy_futures(LazyFuture, pair[0], a)
                twins = (LazyFuture(pair[1], i) for i in range(a))
                live.extend(zip(made, twins, strict=True))
            elif not live:
                continue
            elif op == "drop":
                del live[a % len(live) : a % len(live) + b]
            elif op == "weakref":
                refs.append(weakref.ref(live[a % len(live)][0], lambda _r: dead.append(1)))
            elif op == "attr":
                live[a % len(live)][0].extra = b  # type: ignore[attr-defined]
            elif op in ("await", "callback"):
                for f in live[a % len(live)]:
                    if op == "callback":
                        f.add_done_callback(lambda _f: None)
                    else:
                        waiting.append(asyncio.create_task(_awaited(f)))
            elif op == "confirm":
                native_book, pure_book = books[a % len(books)]
                if len(native_book):
                    start = b % len(native_book)
                    run = 0
                    while start + run < len(native_book) and not native_book.states[start + run]:
                        run += 1
                    if run:
                        native_book.confirm(start, run)
                        pure_book.confirm(start, run)
        await asyncio.sleep(0)
        for native, pure in live:
            assert native._index == pure._index
            assert any(native._ledger is n and pure._ledger is p for n, p in books)
            assert type(native) is type(pure)
            assert native.done() == pure.done()
            if pure.done():
                assert native.result() == pure.result()
        alive = sum(r() is not None for r in refs)
        assert alive + len(dead) == len(refs)

    asyncio.run(check())
