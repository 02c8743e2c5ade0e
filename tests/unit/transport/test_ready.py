"""``async for`` over ready messages (``streamwire.transport.ready``): the native iterator
and its pure-Python twin give the same messages, the same bookkeeping and the same errors
in every order of taking, draining, refilling, dropping and cancelling."""

from __future__ import annotations

import asyncio
import gc
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterator
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwire._native import core
from streamwire.codec.message import Message
from streamwire.transport.ready import ReadyIterator, ready_iterator

needs_core = pytest.mark.skipif(core is None, reason="native core not built or forced off")
MODES = [False, pytest.param(True, marks=needs_core)]


def message(offset: int) -> Message:
    msg = Message(b"m%d" % offset)
    msg.offset = offset
    return msg


class Owner:
    """A consumer's part: the ready deque, the last offset, and the slow path (waits for
    a refill, ends when closed)."""

    def __init__(self) -> None:
        self.ready: deque[Message] = deque()
        self.last: int | None = None
        self.arrived = asyncio.Event()
        self.closed = False
        self.slow_calls = 0

    async def slow(self) -> Message:
        self.slow_calls += 1
        while not self.ready:
            if self.closed:
                raise StopAsyncIteration
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 5)
        msg = self.ready.popleft()
        self.last = msg.offset
        return msg

    def put(self, *offsets: int) -> None:
        self.ready.extend(map(message, offsets))
        self.arrived.set()

    def iterator(self, native: bool) -> AsyncIterator[Message]:
        return ready_iterator(self.ready, self, "last", "offset", self.slow, native=native)


class SlottedOwner(Owner):
    """``last`` a slot (as a consumer's last offset is): the native iterator stores into it
    directly while the class stays as it was."""

    __slots__ = ("last",)


OWNERS = [Owner, SlottedOwner]


class Recording(SlottedOwner):
    """The same layout, every attribute set recorded."""

    __slots__ = ()
    sets: list[tuple[str, object]]

    def __setattr__(self, name: str, value: object) -> None:
        type(self).sets.append((name, value))
        super().__setattr__(name, value)


class CountingDeque(deque[Message]):
    """A deque whose ``popleft`` is not the builtin one."""

    taken = 0

    def popleft(self) -> Message:
        type(self).taken += 1
        return super().popleft()


@pytest.mark.parametrize("native", MODES)
async def test_async_for_yields_ready_messages_then_waits_then_ends(native: bool) -> None:
    owner = Owner()
    owner.put(0, 1, 2)
    seen: list[int | None] = []

    async def feed() -> None:
        await asyncio.sleep(0)
        owner.put(3, 4)
        await asyncio.sleep(0)
        owner.closed = True
        owner.arrived.set()

    feeder = asyncio.create_task(feed())
    async for msg in owner.iterator(native):
        seen.append(msg.offset)
        assert owner.last == msg.offset
    await feeder
    assert seen == [0, 1, 2, 3, 4]
    assert owner.slow_calls >= 1


def test_the_native_iterator_is_native_and_the_twin_is_not() -> None:
    owner = Owner()
    assert isinstance(owner.iterator(False), ReadyIterator)
    if core is not None:
        assert not isinstance(owner.iterator(True), ReadyIterator)


@pytest.mark.parametrize("native", MODES)
async def test_nothing_is_taken_until_the_awaitable_runs(native: bool) -> None:
    owner = Owner()
    owner.put(0, 1)
    it = owner.iterator(native)
    pending = cast("Coroutine[Any, Any, Message]", it.__anext__())
    assert len(owner.ready) == 2
    assert owner.last is None
    pending.close()  # closed unawaited: nothing lost
    del pending
    gc.collect()
    assert [m.offset for m in owner.ready] == [0, 1]
    # cancelled before it ran (``wait_for`` with no time left wraps it in a task)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(it.__anext__(), 0)
    assert [m.offset for m in owner.ready] == [0, 1]
    assert (await anext(it)).offset == 0


@pytest.mark.parametrize("native", MODES)
async def test_two_awaitables_taken_before_either_runs_keep_the_order(native: bool) -> None:
    owner = Owner()
    owner.put(0, 1, 2)
    it = owner.iterator(native)
    first, second = it.__anext__(), it.__anext__()
    assert (await second).offset == 0  # what is ready when it runs
    assert (await first).offset == 1
    assert owner.last == 1
    assert [m.offset for m in owner.ready] == [2]


@pytest.mark.parametrize("native", MODES)
async def test_an_awaitable_cannot_run_twice(native: bool) -> None:
    owner = Owner()
    owner.put(0, 1)
    it = owner.iterator(native)
    step = it.__anext__()
    assert (await step).offset == 0
    with pytest.raises(RuntimeError, match="cannot reuse already awaited"):
        await step
    assert [m.offset for m in owner.ready] == [1]


@pytest.mark.parametrize("native", MODES)
async def test_emptied_between_taking_and_awaiting_it_waits_like_the_slow_path(
    native: bool,
) -> None:
    owner = Owner()
    owner.put(0)
    it = owner.iterator(native)
    step = it.__anext__()
    owner.ready.clear()  # e.g. next_batch took everything in between
    task = asyncio.ensure_future(step)
    await asyncio.sleep(0)
    assert not task.done()
    owner.put(7)
    assert (await asyncio.wait_for(task, 5)).offset == 7
    assert owner.last == 7


@pytest.mark.parametrize("native", MODES)
async def test_cancelling_a_waiting_loop_loses_nothing_and_propagates(native: bool) -> None:
    owner = Owner()
    it = owner.iterator(native)

    async def loop() -> list[int | None]:
        return [msg.offset async for msg in it]

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    owner.put(5)
    assert (await anext(it)).offset == 5
    # a timeout around the loop: the same cancellation, turned into TimeoutError
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await anext(it)
    owner.put(6)
    assert (await anext(it)).offset == 6


@pytest.mark.parametrize("native", MODES)
async def test_cancelling_a_delegated_wait_reaches_the_slow_coroutine(native: bool) -> None:
    owner = Owner()
    owner.put(0)
    it = owner.iterator(native)
    step = it.__anext__()
    owner.ready.clear()
    task = asyncio.ensure_future(step)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    owner.put(1)
    assert [m.offset for m in owner.ready] == [1]


@pytest.mark.parametrize("native", MODES)
async def test_a_slotted_owner_whose_class_changes_gets_the_new_setattr(native: bool) -> None:
    class Later(SlottedOwner):
        __slots__ = ()

    owner: SlottedOwner = Later()
    owner.put(0, 1, 2)
    it = owner.iterator(native)
    assert (await anext(it)).offset == 0
    assert owner.last == 0
    sets: list[tuple[str, object]] = []

    def recording(self: Later, name: str, value: object) -> None:
        sets.append((name, value))
        object.__setattr__(self, name, value)

    Later.__setattr__ = recording  # type: ignore[method-assign,assignment]
    assert (await anext(it)).offset == 1
    assert sets == [("last", 1)]
    assert owner.last == 1
    # and a class whose layout is the same but sets attributes its own way
    Recording.sets = []
    owner.__class__ = Recording
    assert (await anext(it)).offset == 2
    assert Recording.sets == [("last", 2)]
    assert owner.last == 2


@pytest.mark.parametrize("native", MODES)
async def test_an_owner_setattr_and_a_deque_popleft_of_their_own_are_called(
    native: bool,
) -> None:
    owner = Recording()
    Recording.sets = []
    owner.ready = CountingDeque()
    CountingDeque.taken = 0
    owner.put(0, 1)
    owner.closed = True  # the loop ends when the queue is empty
    assert [m.offset async for m in owner.iterator(native)] == [0, 1]
    assert CountingDeque.taken == 2
    assert [s for s in Recording.sets if s[0] == "last"] == [("last", 0), ("last", 1)]


@pytest.mark.parametrize("native", MODES)
async def test_errors_of_the_slow_path_and_of_the_messages_propagate(native: bool) -> None:
    owner = Owner()
    it = owner.iterator(native)
    owner.closed = True
    with pytest.raises(StopAsyncIteration):
        await anext(it)
    owner.ready.append(cast("Message", object()))  # no offset: the bookkeeping fails
    with pytest.raises(AttributeError):
        await anext(it)


# --- a model: the native iterator against the twin, every order of operations -------------

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(1, 3)),
        st.tuples(st.just("next"), st.just(0)),
        st.tuples(st.just("take"), st.just(0)),  # __anext__ kept, not awaited yet
        st.tuples(st.just("await"), st.integers(0, 3)),  # one of the kept ones
        st.tuples(st.just("drop"), st.integers(0, 3)),
        st.tuples(st.just("throw"), st.integers(0, 3)),
        st.tuples(st.just("drain"), st.just(0)),
    ),
    max_size=30,
)


async def _run(native: bool, ops: list[tuple[str, int]], cls: type[Owner] = Owner) -> list[Any]:
    owner = cls()
    owner.closed = True  # the slow path ends instead of waiting
    it = owner.iterator(native)
    kept: list[Any] = []
    log: list[Any] = []
    counter = 0

    async def outcome(aw: Awaitable[Message]) -> Any:
        try:
            return ("ok", (await aw).offset)
        except (StopAsyncIteration, RuntimeError, ValueError) as exc:
            return ("error", type(exc).__name__)

    for op, arg in ops:
        if op == "put":
            owner.put(*range(counter, counter + arg))
            counter += arg
        elif op == "next":
            log.append(await outcome(it.__anext__()))
        elif op == "take":
            kept.append(it.__anext__())
        elif op == "await" and kept:
            log.append(await outcome(kept[arg % len(kept)]))
        elif op == "drop" and kept:
            kept.pop(arg % len(kept)).close()
            gc.collect()
        elif op == "throw" and kept:
            aw = kept[arg % len(kept)]
            try:
                aw.throw(ValueError("thrown"))
            except (ValueError, RuntimeError, StopIteration) as exc:
                log.append(("thrown", type(exc).__name__))
        elif op == "drain":
            log.append(("drained", [m.offset for m in owner.ready]))
            owner.ready.clear()
        log.append(("state", owner.last, [m.offset for m in owner.ready]))
    for aw in kept:
        aw.close()
    return log


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    """One event loop for every example (a fresh ``asyncio.run`` per example cost most of
    this test's time: 800 loops made and torn down), and the heap the test found frozen
    (``gc.freeze``): ``_run`` collects after each dropped awaitable, which in a whole-suite
    run walked everything the tests before had left (35 s instead of 3)."""
    gc.collect()
    gc.freeze()
    try:
        with asyncio.Runner() as shared:
            yield shared
    finally:
        gc.unfreeze()


@needs_core
@pytest.mark.parametrize("cls", OWNERS)
@settings(max_examples=200, deadline=None)
@given(ops=_OPS)
def test_native_and_twin_agree_in_every_order(
    runner: asyncio.Runner, cls: type[Owner], ops: list[tuple[str, int]]
) -> None:
    native = runner.run(_run(True, ops, cls))
    assert not asyncio.all_tasks(runner.get_loop())  # nothing of one run is left for the next
    assert native == runner.run(_run(False, ops, cls))
