"""The native writer of Publish entries (``rmq_publish_entries`` in ``native/src/publish.rs``)
against the pure-Python one (:meth:`PublishBuilder.add_range_py`): on random runs of bodies,
skip masks, frame limits, entry caps and builders already holding entries, ``add_range``
through the native core and ``add_range_py`` leave builders that build the same frame, with
the same size, count and payload bytes, return the same index, or raise the same exception;
well-typed, in-range input is written natively, not handed back.

Like ``test_native_core.py`` these load the extension directly, so they run under
``STREAMWIRE_PURE=1`` too, and skip only when it is not built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwire import _native
from streamwire.codec.amqp import encode_data_body
from streamwire.rabbitmq.protocol import publishing
from streamwire.rabbitmq.protocol.publishing import PublishBuilder
from tests.property.test_native_core import outcome

CORE, WHY = _native.built()
# both_cores: every test here runs the extension and the pure-Python code itself
pytestmark = [
    pytest.mark.skipif(CORE is None, reason=f"{WHY} (build it: make native)"),
    pytest.mark.both_cores,
]

BODY = st.one_of(st.binary(max_size=300), st.integers(0, 300).map(bytes))
ODD_BODY = st.one_of(BODY, BODY.map(bytearray), BODY.map(lambda b: memoryview(b)), st.just("text"))
U64 = 1 << 64


def core() -> _native.NativeCore:
    assert CORE is not None
    return CORE


def builder_with(preset: list[bytes]) -> PublishBuilder:
    """A builder already holding ``preset`` (ids 1, 2, ...), as a frame in the making is."""
    builder = PublishBuilder(7)
    for i, body in enumerate(preset, 1):
        builder.add(i, body)
    return builder


def state(builder: PublishBuilder, call: Callable[[], Any]) -> tuple[tuple[str, Any], ...]:
    """What a call on ``builder`` gives, and the frame and counters it leaves."""
    got = outcome(call)
    return got, outcome(
        lambda: (builder.build(), builder.size, builder.count, builder.payload_bytes)
    )


def both(
    preset: list[bytes],
    first: Any,
    bodies: Any,
    skip: Any,
    start: int,
    limit: int,
    max_count: int,
    wrap: bool,
) -> tuple[Any, Any]:
    """``add_range`` with the native core, and ``add_range_py``, on equal builders."""
    native = builder_with(preset)
    pure = builder_with(preset)
    args = (first, bodies, skip, start, limit, max_count)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(publishing, "_native", core())
        by_native = state(native, lambda: native.add_range(*args, wrap=wrap))
    return by_native, state(pure, lambda: pure.add_range_py(*args, wrap=wrap))


@settings(max_examples=400, deadline=None)
@given(
    preset=st.lists(BODY, max_size=3),
    bodies=st.lists(BODY, min_size=0, max_size=40),
    data=st.data(),
    limit=st.integers(0, 5000),
    max_count=st.integers(-2, 50),
    first=st.one_of(st.integers(0, 1 << 40), st.integers(U64 - 50, U64 - 1)),
    wrap=st.booleans(),
    as_tuple=st.booleans(),
)
def test_runs_are_written_alike(
    preset: list[bytes],
    bodies: list[bytes],
    data: st.DataObject,
    limit: int,
    max_count: int,
    first: int,
    wrap: bool,
    as_tuple: bool,
) -> None:
    n = len(bodies)
    skip = data.draw(st.one_of(st.just(bytes(n)), st.binary(min_size=n, max_size=n)))
    start = data.draw(st.integers(0, n + 2))
    mask = data.draw(st.sampled_from([bytes, bytearray]))(skip)
    given_ = tuple(bodies) if as_tuple else bodies
    native, pure = both(preset, first, given_, mask, start, limit, max_count, wrap)
    assert native == pure


@given(
    bodies=st.lists(BODY, min_size=1, max_size=20),
    limit=st.integers(0, 3000),
    max_count=st.integers(0, 30),
    wrap=st.booleans(),
)
def test_in_range_runs_are_written_natively(
    bodies: list[bytes], limit: int, max_count: int, wrap: bool
) -> None:
    skip = bytearray(len(bodies))
    done = core().rmq_publish_entries(1, bodies, skip, 0, limit, max_count, wrap)
    assert done is not None
    entries, end, count, size, payload = done
    assert len(entries) == size
    assert count <= max_count
    assert end == count
    assert payload == sum(map(len, bodies[:end]))


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(ODD_BODY, min_size=1, max_size=8),
    first=st.one_of(st.integers(-3, 5), st.integers(U64 - 3, U64 + 3)),
    start=st.integers(-2, 9),
    skip_len=st.integers(0, 9),
    wrap=st.booleans(),
)
def test_unusual_input_is_left_to_python(
    bodies: list[Any],
    first: int,
    start: int,
    skip_len: int,
    wrap: bool,
) -> None:
    """Bodies that are not ``bytes``, ids outside u64, negative starts, short masks: the
    native core hands back ``None`` or writes what Python writes; either way ``add_range``
    gives what ``add_range_py`` gives."""
    native, pure = both([], first, bodies, bytearray(skip_len), start, 1 << 20, 100, wrap)
    assert native == pure


def test_other_sequences_and_masks_are_left_to_python() -> None:
    write: Any = core().rmq_publish_entries  # fed what its signature does not take
    bodies = [b"a", b"b"]
    assert write(1, iter(bodies), bytearray(2), 0, 100, 10, False) is None
    assert write(1, bodies, memoryview(bytes(2)), 0, 100, 10, False) is None
    assert write(1, bodies, [0, 0], 0, 100, 10, False) is None
    assert write(1, bodies, bytearray(2), 0, 100, 10, False) is not None


class _Bytes(bytes):
    """A ``bytes`` subclass: not exactly ``bytes``, so not a plain body."""


@given(
    values=st.lists(st.one_of(BODY, BODY.map(_Bytes), ODD_BODY), max_size=12),
    as_tuple=st.booleans(),
)
def test_bytes_total_native_equals_pure(values: list[Any], as_tuple: bool) -> None:
    """``rmq_bytes_total`` gives what ``bytes_total_py`` gives: the total size of a
    non-empty list or tuple of exact ``bytes``, else ``None``."""
    given_ = tuple(values) if as_tuple else values
    pure = publishing.bytes_total_py(given_)
    assert core().rmq_bytes_total(given_) == pure
    plain = bool(values) and all(type(v) is bytes for v in values)
    assert pure == (sum(map(len, values)) if plain else None)


def test_bytes_total_takes_only_lists_and_tuples() -> None:
    others: list[object] = [iter([b"a"]), {b"a"}, b"ab", bytearray(b"ab"), None, [], ()]
    for values in others:
        assert core().rmq_bytes_total(values) is None
        assert publishing.bytes_total_py(values) is None
    assert core().rmq_bytes_total([b"ab", b"", b"c"]) == 3


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(BODY, min_size=1, max_size=20),
    more=st.lists(BODY, max_size=4),
    second_run=st.lists(BODY, max_size=6),
    publisher_id=st.sampled_from([0, 7, 255, 256, -1]),
    wrap=st.booleans(),
)
def test_a_native_first_run_and_what_follows_build_alike(
    bodies: list[bytes],
    more: list[bytes],
    second_run: list[bytes],
    publisher_id: int,
    wrap: bool,
) -> None:
    """The native core writes a frame's first run with the frame header in front of it;
    entries added after it (one by one, another run) make ``build`` rewrite that header:
    the frame is the one the pure-Python builder makes either way, or the same error."""

    def fill(builder: PublishBuilder) -> None:
        builder.add_range(1, bodies, bytes(len(bodies)), 0, 1 << 20, 1000, wrap=wrap)
        for i, body in enumerate(more, 1000):
            builder.add(i, body)
        builder.add_range(2000, second_run, bytes(len(second_run)), 0, 1 << 20, 1000, wrap=wrap)

    native, pure = PublishBuilder(publisher_id), PublishBuilder(publisher_id)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(publishing, "_native", core())
        by_native = state(native, lambda: fill(native))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(publishing, "_native", None)
        by_pure = state(pure, lambda: fill(pure))
    assert by_native == by_pure


def test_the_native_frame_header_holds_its_entries() -> None:
    done = core().rmq_publish_entries(5, [b"ab", b"c"], bytes(2), 0, 1000, 10, False, 9)
    assert done is not None
    frame, end, count, size, _ = done
    assert (end, count, len(frame)) == (2, 2, 13 + size)
    assert frame[:13] == (size + 9).to_bytes(4, "big") + bytes.fromhex("0002 0001 09 00000002")
    builder = PublishBuilder(9)
    builder.add(5, b"ab")
    builder.add(6, b"c")
    assert frame == builder.build()
    for head in (-2, 256, 1 << 40):
        assert core().rmq_publish_entries(5, [b"ab"], bytes(1), 0, 1000, 10, False, head) is None


RUN_START = st.one_of(st.integers(0, 1 << 40), st.integers(U64 - 6, U64 - 1))


@st.composite
def id_tuples(draw: st.DrawFn) -> tuple[Any, ...]:
    """Runs of ids (what the broker confirms), runs with one id changed, and odd tuples."""
    first = draw(RUN_START)
    ids: list[Any] = list(range(first, first + draw(st.integers(0, 12))))
    change: bool = draw(st.booleans())
    if ids and change:
        i = draw(st.integers(0, len(ids) - 1))
        ids[i] = draw(st.one_of(st.integers(-3, 1 << 70), st.just(ids[i] + 1), st.just("x")))
    return tuple(ids)


@given(ids=id_tuples())
def test_id_run_native_equals_pure(ids: tuple[Any, ...]) -> None:
    """``rmq_id_run`` gives what ``is_id_run_py`` gives, or ``None`` (leaving it to Python)
    only for items that are not ints in u64."""
    got = core().rmq_id_run(ids)
    in_u64 = all(type(i) is int and 0 <= i < U64 for i in ids)
    if in_u64:
        assert got == publishing.is_id_run_py(ids)
    else:
        assert got is None
    if all(type(i) is int for i in ids):
        assert publishing.is_id_run(ids) == publishing.is_id_run_py(ids)


def test_id_run_edges() -> None:
    assert core().rmq_id_run((U64 - 2, U64 - 1)) is True
    assert core().rmq_id_run((U64 - 1, 0)) is False
    assert core().rmq_id_run((5, 6, 8)) is False
    assert core().rmq_id_run(()) is True
    assert publishing.is_id_run_py(()) is True
    assert core().rmq_id_run([1, 2]) is None
    assert core().rmq_id_run((True, 2)) is None  # not an exact int


@given(
    st.lists(st.one_of(BODY, st.integers(250, 70_000).map(bytes)), min_size=1, max_size=20),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["none", "gzip"]),
)
def test_sub_batch_entries_of_bodies_are_written_alike(
    bodies: list[bytes], wrap: bool, as_tuple: bool, compression: str
) -> None:
    """``encode_sub_batch_bodies`` (the native records, for a producer's ``sub_batch_size``)
    writes the entry ``encode_sub_batch`` writes of the bodies' messages, byte for byte."""
    messages = [encode_data_body(b) if wrap else b for b in bodies]
    expected = publishing.encode_sub_batch(messages, compression)
    seq = tuple(bodies) if as_tuple else bodies
    records = core().rmq_sub_batch_records(seq, wrap)
    assert records is not None  # well-typed bodies are written natively
    assert publishing.encode_sub_batch_bodies(seq, compression, wrap) == expected
    if compression == "none":
        assert expected.endswith(records)


@given(st.lists(ODD_BODY, min_size=1, max_size=6), st.booleans())
def test_sub_batch_records_of_anything_but_bytes_are_left_to_python(
    bodies: list[Any], wrap: bool
) -> None:
    if all(type(b) is bytes for b in bodies):
        return
    assert core().rmq_sub_batch_records(bodies, wrap) is None
    assert core().rmq_sub_batch_records(iter(bodies), wrap) is None
