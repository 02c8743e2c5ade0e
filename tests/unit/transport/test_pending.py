"""Per-message confirmation futures made on use (``streamwire.transport.pending``): a
``LazyFuture`` behaves as the asyncio future it stands for, whenever it is used, and each
message's outcome reaches it exactly once."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from collections.abc import AsyncIterator, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwire._native import core
from streamwire.codec.message import Confirmation
from streamwire.transport.pending import LazyFuture, Ledger, MadeFuture


def ledger(count: int, *, first_id: int | None = 10, offsets: bool = False) -> Ledger:
    return Ledger(asyncio.get_running_loop(), count, "s", first_id=first_id, offsets=offsets)


async def test_they_are_pending_asyncio_futures_of_the_running_loop() -> None:
    futures = ledger(3).futures()
    assert len({id(f) for f in futures}) == 3
    for f in futures:
        assert isinstance(f, asyncio.Future)
        assert isinstance(f, LazyFuture)
        assert asyncio.isfuture(f)
        assert f.get_loop() is asyncio.get_running_loop()
        assert not f.done()
        assert not f.cancelled()
        with pytest.raises(asyncio.InvalidStateError):
            f.result()
        with pytest.raises(asyncio.InvalidStateError):
            f.exception()
    assert "pending" in repr(futures[0])


async def test_a_confirmed_range_resolves_without_making_real_futures() -> None:
    book = ledger(5)
    futures = book.futures()
    book.confirm(1, 3)
    assert [f.done() for f in futures] == [False, True, True, True, False]
    assert futures[2].result() == Confirmation(12, None, "s", None)
    assert futures[2].exception() is None
    assert book.waiters == {}  # nothing waited: no asyncio future was made
    assert await futures[1] == Confirmation(11, None, "s", None)  # awaited after the fact


async def test_offsets_and_partition_come_from_each_confirmation() -> None:
    book = ledger(5, first_id=None, offsets=True)
    futures = book.futures()
    book.confirm(0, 2, 100, 3)
    book.confirm(2, 3, None, 3)  # the reply did not say where they went
    assert [f.result() for f in futures] == [
        Confirmation(None, 100, "s", 3),
        Confirmation(None, 101, "s", 3),
        Confirmation(None, None, "s", 3),
        Confirmation(None, None, "s", 3),
        Confirmation(None, None, "s", 3),
    ]


async def test_awaiting_before_the_confirmation_waits_for_it() -> None:
    book = ledger(3)
    futures = book.futures()
    waiting = asyncio.ensure_future(asyncio.gather(*futures))
    first = asyncio.create_task(_await(futures[0]))
    await asyncio.sleep(0)
    assert not waiting.done()
    book.confirm(0, 3)
    assert await waiting == [Confirmation(10 + i, None, "s", None) for i in range(3)]
    assert await first == Confirmation(10, None, "s", None)


async def _await(future: asyncio.Future[Confirmation]) -> Confirmation:
    return await future


async def test_a_failure_reaches_awaiters_gather_and_readers() -> None:
    book = ledger(3)
    futures = book.futures()
    boom = RuntimeError("refused")
    awaited = asyncio.create_task(_await(futures[1]))
    await asyncio.sleep(0)
    assert book.fail(1, 2, boom) == 2
    book.confirm(0, 1)
    with pytest.raises(RuntimeError, match="refused"):
        await awaited
    assert futures[2].exception() is boom
    with pytest.raises(RuntimeError, match="refused"):
        futures[2].result()
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert results == [Confirmation(10, None, "s", None), boom, boom]
    with pytest.raises(RuntimeError, match="refused"):
        await asyncio.gather(*futures)


async def test_each_message_is_resolved_once_the_first_outcome_stays() -> None:
    book = ledger(4, first_id=None, offsets=True)
    futures = book.futures()
    boom = RuntimeError("x")
    book.confirm(1, 1, 7)
    assert book.fail(0, 3, boom) == 2  # 1 was confirmed already
    book.confirm(0, 4, 20)  # only 3 was still pending
    assert futures[0].exception() is boom
    assert futures[1].result().offset == 7
    assert futures[2].exception() is boom
    assert futures[3].result().offset == 23
    assert book.fail(0, 4, RuntimeError("late")) == 0


async def test_callbacks_get_the_future_itself_once_and_can_be_removed() -> None:
    book = ledger(2)
    futures = book.futures()
    seen: list[asyncio.Future[Confirmation]] = []
    futures[0].add_done_callback(seen.append)
    futures[1].add_done_callback(seen.append)
    assert futures[1].remove_done_callback(seen.append) == 1
    book.confirm(0, 2)
    await asyncio.sleep(0)
    assert seen == [futures[0]]
    futures[0].add_done_callback(seen.append)  # on a done future: called soon, once
    await asyncio.sleep(0)
    assert seen == [futures[0], futures[0]]
    assert futures[0].remove_done_callback(seen.append) == 0


async def test_wait_returns_the_futures_it_was_given() -> None:
    book = ledger(3)
    futures = book.futures()
    book.confirm(1, 1)
    done, pending = await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    assert done == {futures[1]}
    assert pending == {futures[0], futures[2]}
    book.confirm(0, 3)
    done, pending = await asyncio.wait(futures, timeout=5)
    assert done == set(futures)
    assert not pending
    completed = [c async for c in _completed(futures)]  # in no particular order
    assert sorted(completed) == [Confirmation(10 + i, None, "s", None) for i in range(3)]


async def _completed(futures: list[asyncio.Future[Confirmation]]) -> AsyncIterator[Confirmation]:
    for next_done in asyncio.as_completed(futures):
        yield await next_done


async def test_shield_and_wait_for() -> None:
    book = ledger(2)
    futures = book.futures()
    shielded = asyncio.ensure_future(asyncio.shield(futures[0]))
    waited = asyncio.ensure_future(asyncio.wait_for(futures[1], 5))
    await asyncio.sleep(0)
    shielded.cancel()  # the shield's outer future only
    book.confirm(0, 2)
    assert await waited == Confirmation(11, None, "s", None)
    with pytest.raises(asyncio.CancelledError):
        await shielded
    assert futures[0].result() == Confirmation(10, None, "s", None)


async def test_a_wait_for_timeout_cancels_the_future_not_the_message() -> None:
    book = ledger(2)
    futures = book.futures()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(futures[0], 0)
    assert futures[0].cancelled()
    book.confirm(0, 2)
    assert futures[0].cancelled()  # stays cancelled; its neighbour resolves
    assert book.states[0] == 1  # the message itself is confirmed
    assert futures[1].result() == Confirmation(11, None, "s", None)


async def test_cancelled_by_the_user_before_or_after_awaiting() -> None:
    book = ledger(3)
    futures = book.futures()
    assert futures[0].cancel("not interested")
    assert futures[0].cancelled()
    assert futures[0].done()
    awaiting = asyncio.create_task(_await(futures[1]))
    await asyncio.sleep(0)
    awaiting.cancel()  # cancels the awaiting task and with it the future (as asyncio does)
    with pytest.raises(asyncio.CancelledError):
        await awaiting
    assert futures[1].cancelled()
    book.confirm(0, 3)
    with pytest.raises(asyncio.CancelledError, match="not interested"):
        await futures[0]
    with pytest.raises(asyncio.CancelledError):
        futures[1].result()
    assert futures[2].result() == Confirmation(12, None, "s", None)
    assert not futures[2].cancel()  # done: nothing to cancel
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert isinstance(results[1], asyncio.CancelledError)
    assert results[2] == Confirmation(12, None, "s", None)


async def test_setting_it_by_hand_wins_as_on_a_future() -> None:
    book = ledger(1)
    (future,) = book.futures()
    future.set_result(Confirmation(1, 2, "mine", 3))
    book.confirm(0, 1)
    assert future.result() == Confirmation(1, 2, "mine", 3)


async def test_failures_nobody_read_are_not_logged_as_never_retrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    book = ledger(2)
    futures = book.futures()
    futures[0].add_done_callback(lambda _: None)  # a real future exists for this one
    book.fail(0, 2, RuntimeError("lost"))
    await asyncio.sleep(0)
    del futures, book
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        gc.collect()
    assert "never retrieved" not in caplog.text


async def test_the_private_attributes_asyncio_reads_are_the_real_future_s() -> None:
    book = ledger(1)
    (future,) = book.futures()
    assert future._loop is asyncio.get_running_loop()
    assert future._state == "PENDING"
    book.confirm(0, 1)
    assert future._state == "FINISHED"
    assert future._result == Confirmation(10, None, "s", None)  # type: ignore[attr-defined]
    future2 = ledger(1).futures()[0]
    future2.cancel("why")
    assert future2._cancel_message == "why"  # type: ignore[attr-defined]
    assert str(future2._make_cancelled_error()) == "why"  # type: ignore[attr-defined]


async def test_untracked_until_used_with_the_native_core() -> None:
    futures = ledger(3).futures()
    if core is None:  # the pure-Python code makes them as any object is made: tracked
        assert all(gc.is_tracked(f) for f in futures)
        return
    assert not any(gc.is_tracked(f) for f in futures)
    futures[1].add_done_callback(lambda _: None)  # now in a possible cycle: tracked
    assert [gc.is_tracked(f) for f in futures] == [False, True, False]


async def test_a_cycle_through_a_used_future_is_collected() -> None:
    book = ledger(1)
    (future,) = book.futures()
    future.add_done_callback(lambda _: None)
    # future -> ledger -> real future -> callback -> future: only the collector frees it
    probe = book.waiters[0]
    gone = weakref.ref(probe)
    del book, future, probe
    gc.collect()
    assert gone() is None


# --- a model: whatever the order of outcomes, waits, cancels and reads -------------------

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("confirm"), st.integers(0, 7), st.integers(1, 8)),
        st.tuples(st.just("fail"), st.integers(0, 7), st.integers(1, 8)),
        st.tuples(st.just("await"), st.integers(0, 7), st.just(0)),
        st.tuples(st.just("callback"), st.integers(0, 7), st.just(0)),
        st.tuples(st.just("cancel"), st.integers(0, 7), st.just(0)),
    ),
    max_size=25,
)


def _counting(calls: dict[int, int], at: int) -> Callable[[object], None]:
    def count(_: object) -> None:
        calls[at] += 1

    return count


@settings(max_examples=150, deadline=None)
@given(ops=_OPS)
def test_every_future_ends_as_the_model_says(ops: list[tuple[str, int, int]]) -> None:
    async def check() -> None:
        book = ledger(8, first_id=None, offsets=True)
        futures = book.futures()
        model: dict[int, int | str | BaseException] = {}  # offset, "cancelled" or the error
        boom = RuntimeError("failed")
        calls: dict[int, int] = {}
        tasks: dict[int, asyncio.Task[Confirmation]] = {}
        for op, at, count in ops:
            if op == "confirm":
                stop = min(8, at + count)
                book.confirm(at, stop - at, 1000 + at, 0)
                for i in range(at, stop):
                    model.setdefault(i, 1000 + i)
            elif op == "fail":
                stop = min(8, at + count)
                book.fail(at, stop - at, boom)
                for i in range(at, stop):
                    model.setdefault(i, boom)
            elif op == "await" and at not in tasks:
                tasks[at] = asyncio.create_task(_await(futures[at]))
            elif op == "callback":
                futures[at].add_done_callback(_counting(calls, at))
                calls.setdefault(at, 0)
            elif op == "cancel" and futures[at].cancel():
                model.setdefault(at, "cancelled")
            await asyncio.sleep(0)
        book.confirm(0, 8, 1000, 0)  # whatever is left ends confirmed
        for i in range(8):
            model.setdefault(i, 1000 + i)
        await asyncio.sleep(0)
        for i, future in enumerate(futures):
            expected = model[i]
            assert future.done()
            if expected == "cancelled":
                assert future.cancelled()
            elif isinstance(expected, BaseException):
                assert future.exception() is expected
            else:
                assert isinstance(expected, int)
                assert future.result() == Confirmation(None, expected, "s", 0)
        for i, task in tasks.items():
            outcome = await asyncio.gather(task, return_exceptions=True)
            expected = model[i]
            if expected == "cancelled":
                assert isinstance(outcome[0], asyncio.CancelledError)
            elif isinstance(expected, BaseException):
                assert outcome[0] is expected
            else:
                assert isinstance(expected, int)
                assert outcome[0] == Confirmation(None, expected, "s", 0)
        for i in calls:
            callbacks = sum(1 for op, at, _ in ops if op == "callback" and at == i)
            assert calls[i] == callbacks  # each registered callback ran exactly once

    asyncio.run(check())


async def test_used_it_becomes_a_plain_asyncio_future_the_same_object() -> None:
    book = ledger(3)
    futures = book.futures()
    kept = list(futures)
    book.confirm(0, 1)
    futures[0].add_done_callback(lambda _: None)
    task = asyncio.ensure_future(_await(futures[1]))
    await asyncio.sleep(0)
    assert [type(f) for f in futures] == [MadeFuture, MadeFuture, LazyFuture]
    assert futures == kept  # the caller's objects, changed in place
    assert book.waiters == {0: futures[0], 1: futures[1]}
    assert futures[0].result() == Confirmation(10, None, "s", None)  # settled when made
    assert not futures[1].done()
    book.confirm(1, 2)
    assert await task == Confirmation(11, None, "s", None)
    assert "finished" in repr(futures[2])
