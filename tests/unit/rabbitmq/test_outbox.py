"""The producer's outbox: frames within limits, confirms by id range, failures, batches,
rewind after a reconnect — and every message resolved exactly once."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwire.codec.amqp import encode_data_body
from streamwire.codec.message import Confirmation
from streamwire.errors import LocalProtocolError
from streamwire.rabbitmq._outbox import Batch, BatchConfirmation, Group, Outbox
from streamwire.rabbitmq.protocol.frames import Publish, decode_frame
from streamwire.transport.pending import Ledger


def group(
    loop: asyncio.AbstractEventLoop, first: int, bodies: list[bytes], *, futures: bool = True
) -> Group:
    ledger = Ledger(loop, len(bodies), "s", first_id=first) if futures else None
    return Group(first, bodies, None, ledger, None)


def futures_of(g: Group) -> list[asyncio.Future[Confirmation]]:
    """The group's confirmation futures (made from its ledger: they read its outcomes)."""
    return [] if g.ledger is None else g.ledger.futures()


def ids_of(frame: bytes) -> list[int]:
    publish = decode_frame(frame[4:])
    assert isinstance(publish, Publish)
    return [e.publishing_id for e in publish.entries]


async def test_frames_respect_frame_max_and_message_count() -> None:
    loop = asyncio.get_running_loop()
    box = Outbox("s")
    bodies = [encode_data_body(bytes(100)) for _ in range(50)]
    box.add(group(loop, 1, bodies))
    assert (box.unwritten, box.pending, box.in_flight) == (50, 50, 0)
    frame = box.next_frame(7, 1000, 100, False)
    assert frame is not None
    assert len(frame) <= 1000
    first = ids_of(frame)
    assert first == list(range(1, len(first) + 1))
    frame2 = box.next_frame(7, 1 << 20, 5, False)
    assert frame2 is not None
    assert ids_of(frame2) == list(range(len(first) + 1, len(first) + 6))
    assert box.in_flight == len(first) + 5
    assert box.unwritten == 50 - len(first) - 5


async def test_confirms_resolve_each_future_once_and_ignore_strangers() -> None:
    loop = asyncio.get_running_loop()
    box = Outbox("s")
    g = group(loop, 10, [b"a", b"b", b"c"])
    box.add(g)
    box.next_frame(0, 0, 100, False)
    assert box.confirm((11, 11, 99, 10)) == 2
    assert g.ledger is not None
    assert futures_of(g)[0].result() == Confirmation(10, None, "s", None)
    assert futures_of(g)[1].result().publishing_id == 11
    assert not futures_of(g)[2].done()
    assert (box.pending, box.in_flight) == (1, 1)
    box.confirm((12,))
    assert box.pending == 0
    assert not box.contains(12)


async def test_publish_errors_and_first_failure() -> None:
    loop = asyncio.get_running_loop()
    box = Outbox("s")
    g = group(loop, 1, [b"a", b"b"])
    box.add(g)
    box.next_frame(0, 0, 100, False)
    boom = LocalProtocolError("nope")
    assert box.fail(2, boom)
    assert not box.fail(2, boom)
    assert g.ledger is not None
    assert futures_of(g)[1].exception() is boom
    assert box.first_failure is boom
    box.confirm((1,))
    assert box.pending == 0


async def test_a_message_larger_than_any_frame_fails_alone() -> None:
    loop = asyncio.get_running_loop()
    box = Outbox("s")
    g = group(loop, 1, [b"small", b"x" * 500, b"tiny"])
    box.add(g)
    frame = box.next_frame(0, 100, 100, False)
    assert frame is not None
    assert ids_of(frame) == [1]
    frame = box.next_frame(0, 100, 100, False)
    assert frame is not None
    assert ids_of(frame) == [3]
    assert g.ledger is not None
    with pytest.raises(LocalProtocolError, match="does not fit"):
        futures_of(g)[1].result()
    assert box.next_frame(0, 100, 100, False) is None
    assert box.pending == 2


async def test_batch_future_spans_groups() -> None:
    loop = asyncio.get_running_loop()
    box = Outbox("s")
    batch = Batch(loop.create_future())
    box.add(Group(1, [b"a", b"b"], None, None, batch))
    box.add(Group(3, [b"c"], None, None, batch))
    box.next_frame(0, 0, 100, False)
    box.confirm((1, 2))
    assert not batch.future.done()
    box.confirm((3,))
    assert batch.future.result() == BatchConfirmation(1, 3, 3, "s")


async def test_batch_future_fails_with_the_first_error() -> None:
    loop = asyncio.get_running_loop()
    box = Outbox("s")
    batch = Batch(loop.create_future())
    box.add(Group(1, [b"a", b"b"], None, None, batch))
    box.next_frame(0, 0, 100, False)
    err = LocalProtocolError("first")
    box.fail(2, err)
    box.confirm((1,))
    assert batch.future.exception() is err


async def test_rewind_rewrites_only_unresolved_messages_in_order() -> None:
    loop = asyncio.get_running_loop()
    box = Outbox("s")
    box.add(group(loop, 1, [b"a", b"b", b"c"]))
    box.add(group(loop, 4, [b"d"]))
    box.next_frame(0, 0, 100, False)
    box.confirm((2,))
    box.rewind()
    assert (box.unwritten, box.in_flight, box.pending) == (3, 0, 3)
    frame = box.next_frame(0, 0, 100, False)
    assert frame is not None
    assert ids_of(frame) == [1, 3, 4]


async def test_duplicate_first_id_is_refused_and_fail_all_resolves_everything() -> None:
    loop = asyncio.get_running_loop()
    box = Outbox("s")
    g = group(loop, 5, [b"a"])
    box.add(g)
    with pytest.raises(LocalProtocolError, match="already pending"):
        box.add(group(loop, 5, [b"b"]))
    late = group(loop, 9, [b"x", b"y"])
    box.add(late)
    assert box.fail_all(LocalProtocolError("gone")) == 3
    assert late.ledger is not None
    assert all(f.done() for f in futures_of(late))
    assert (box.pending, box.unwritten) == (0, 0)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=8),
    script=st.lists(st.tuples(st.sampled_from("wcfrk"), st.integers(0, 60)), max_size=40),
)
def test_every_message_resolves_exactly_once(
    sizes: list[int], script: list[tuple[str, int]]
) -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        box = Outbox("s")
        groups, first = [], 1
        for n in sizes:
            g = group(loop, first, [bytes([i]) * (i + 1) for i in range(n)])
            box.add(g)
            groups.append(g)
            first += n
        total = first - 1
        written: set[int] = set()
        for op, arg in script:
            if op == "w":
                frame = box.next_frame(0, 64 + arg * 4, 1 + arg % 5, False)
                if frame is not None:
                    written.update(ids_of(frame))
            elif op == "c" and written:
                box.confirm(tuple(sorted(written))[: 1 + arg % 4])
            elif op == "k":  # a run of consecutive ids, written or not, known or not
                start = 1 + arg % (total + 2)
                box.confirm(tuple(range(start, start + 2 + arg % 7)))
            elif op == "f":
                box.fail(1 + arg % total, LocalProtocolError("x"))
            elif op == "r":
                box.rewind()
                written.clear()
            futures = [f for g in groups for f in futures_of(g)]
            assert box.pending == sum(not f.done() for f in futures)
            assert 0 <= box.in_flight <= box.pending
            assert 0 <= box.unwritten <= box.pending
            assert box.unwritten_bytes >= 0
            assert box.unwritten or not box.unwritten_bytes
        box.fail_all(LocalProtocolError("end"))
        assert all(f.done() for g in groups for f in futures_of(g))

    asyncio.run(run())


async def test_a_run_of_consecutive_confirms_resolves_every_message_with_its_id() -> None:
    loop = asyncio.get_running_loop()
    box = Outbox("s")
    g = group(loop, 5, [b"m%d" % i for i in range(10)])
    box.add(g)
    assert box.next_frame(0, 0, 100, False) is not None
    assert box.confirm(tuple(range(5, 11))) == 6
    assert g.ledger is not None
    assert [f.result().publishing_id for f in futures_of(g)[:6]] == list(range(5, 11))
    assert not any(f.done() for f in futures_of(g)[6:])
    assert (box.pending, box.in_flight, box.unwritten) == (4, 4, 0)
    assert box.confirm(tuple(range(5, 15))) == 4  # six of them again: only four are new
    assert (box.pending, box.in_flight) == (0, 0)
    assert box.confirm(tuple(range(5, 15))) == 0


async def test_a_run_across_groups_and_before_the_write_is_counted_once() -> None:
    loop = asyncio.get_running_loop()
    box = Outbox("s")
    first, second = group(loop, 1, [b"a", b"bb"]), group(loop, 3, [b"ccc", b"dddd"])
    box.add(first)
    box.add(second)
    assert ids_of(box.next_frame(0, 0, 3, False) or b"") == [1, 2, 3]
    assert (box.unwritten, box.unwritten_bytes) == (1, 4)
    # 1..4 spans both groups, and 4 was never written (a confused broker)
    assert box.confirm((1, 2, 3, 4)) == 4
    assert (box.pending, box.in_flight, box.unwritten, box.unwritten_bytes) == (0, 0, 0, 0)
    assert box.next_frame(0, 0, 3, False) is None
    early = group(loop, 5, [b"e", b"ff", b"ggg"])
    box.add(early)
    assert box.confirm((6, 7)) == 2  # a run inside one group, none of it written yet
    assert (box.pending, box.unwritten, box.unwritten_bytes, box.in_flight) == (1, 1, 1, 0)
    assert ids_of(box.next_frame(0, 0, 3, False) or b"") == [5]
