"""Per-message confirmation futures that become asyncio futures only when they are used.

``send_batch`` hands out one future per message. Real asyncio futures cost more than the
rest of the publish path together: making and resolving one is ~0.3 µs, and because they
live until their message is confirmed (up to a buffer of 10 000) they survive into the garbage
collector's older generations and make it walk the heap (another ~0.3–0.5 µs per message,
measured in docs/benchmarks/notes/2026-11.md). Most of them are never awaited one by one: a
caller keeps the last one, gathers a few, or flushes.

Here the outcome of a block of messages accepted together lives in one :class:`Ledger` (a
``bytearray`` of states, an ``array`` of offsets where the broker reports them, and a
dictionary of the rare failures), and each message's future is a :class:`LazyFuture`: an
``asyncio.Future`` subclass holding only the ledger and its index, whose asyncio state is not
initialised. Confirming a run of messages is a slice assignment; nothing per message runs in
Python. A ``LazyFuture`` answers ``done``, ``result``, ``exception``, ``cancelled`` and
``get_loop`` from the ledger; the first time something waits on it or changes it (``await``,
``add_done_callback`` — through which ``asyncio.gather``, ``wait``, ``shield``, ``wait_for``
and ``as_completed`` go —, ``cancel``, ``set_result``, ``set_exception``) it *becomes* a
real asyncio future: ``asyncio.Future.__init__`` runs on the object itself and its class
turns into :class:`MadeFuture` (the same layout, nothing overridden), settled at once if its
message already is, else resolved by the ledger when its message is. The caller's object is
the future throughout: callbacks get it, ``asyncio.wait`` returns it, and from then on every
call is asyncio's own. So every message's outcome is delivered exactly once, and a
cancelled future stays cancelled (cancelling never stops the message).

The native core makes the ``LazyFuture`` objects without a Python call each and leaves them
untracked by the garbage collector until they become futures (``native/src/futures.rs``
says why that is safe); the pure-Python code makes the same objects, tracked.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from array import array
from collections import deque
from collections.abc import Callable, Generator, Iterable
from itertools import repeat
from typing import Any, Final

from streamwire._native import core
from streamwire.codec.message import Confirmation, confirmation
from streamwire.transport._internals import StandInLoop

__all__ = ("LAZY", "LazyFuture", "Ledger", "MadeFuture", "lazy_future_problems")

_PENDING: Final = 0
_OK: Final = 1
_FAILED: Final = 2
_OK_RUN: Final = bytes((_OK,))
_NO_OFFSET: Final = array("q", (-1,))
_set_result: Any = asyncio.Future.set_result
_done: Any = asyncio.Future.done
_new_tuple: Any = tuple.__new__
_init_future: Any = asyncio.Future.__init__


class Ledger:
    """The outcomes of ``count`` messages accepted together: message ``i`` has publishing id
    ``first_id + i`` (when the broker numbers them) and, once confirmed, the offset given to
    :meth:`confirm` (when it reports offsets: ``offsets=True``)."""

    __slots__ = (
        "errors",
        "first_id",
        "loop",
        "offsets",
        "partition",
        "states",
        "stream",
        "waiters",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        count: int,
        stream: str,
        *,
        first_id: int | None = None,
        offsets: bool = False,
    ) -> None:
        self.loop = loop
        self.states = bytearray(count)
        self.stream = stream
        self.first_id = first_id
        self.partition: int | None = None
        self.offsets = _NO_OFFSET * count if offsets else None
        self.errors: dict[int, BaseException] = {}
        self.waiters: dict[int, asyncio.Future[Confirmation]] = {}
        """The futures that became real, by index."""

    def __len__(self) -> int:
        return len(self.states)

    def futures(self) -> list[asyncio.Future[Confirmation]]:
        """A :class:`LazyFuture` per message, in order (with the native core: made without
        a Python call each, and untracked by the garbage collector until used); plain
        asyncio futures, resolved by the ledger, where this Python's ``asyncio.Future``
        failed the import-time check (:data:`LAZY`)."""
        n = len(self.states)
        if not LAZY:
            return [self.real(i) for i in range(n)]
        if core is not None:
            return core.lazy_futures(LazyFuture, self, n)
        return list(map(LazyFuture, repeat(self, n), range(n)))

    def real(self, i: int) -> asyncio.Future[Confirmation]:
        """A plain asyncio future for message ``i`` (``send``'s), resolved with it."""
        future = self.waiters.get(i)
        if future is None:
            future = self.loop.create_future()
            self._wait(i, future)
        return future

    def _wait(self, i: int, future: asyncio.Future[Confirmation]) -> None:
        """``future`` now stands for message ``i``: settled at once if the message is."""
        self.waiters[i] = future
        self._settle(i, future)

    def confirmation(self, i: int) -> Confirmation:
        first, offsets = self.first_id, self.offsets
        offset = None
        if offsets is not None and offsets[i] >= 0:
            offset = offsets[i]
        return confirmation(
            None if first is None else first + i, offset, self.stream, self.partition
        )

    def confirm(
        self, start: int, count: int, first_offset: int | None = None, partition: int | None = None
    ) -> None:
        """Messages ``start .. start + count - 1`` are stored (at ``first_offset`` and on,
        when known); those already resolved stay as they are."""
        stop = start + count
        states = self.states
        if partition is not None:
            self.partition = partition
        if states.count(_PENDING, start, stop) != count:  # rare: some were resolved already
            for i in range(start, stop):
                if states[i] == _PENDING:
                    self.confirm(i, 1, None if first_offset is None else first_offset + i - start)
            return
        states[start:stop] = _OK_RUN * count
        if first_offset is not None and self.offsets is not None:
            self.offsets[start:stop] = array("q", range(first_offset, first_offset + count))
        if self.waiters:
            self._wake(start, stop)

    def confirm_one(self, i: int, offset: int | None = None) -> None:
        """Message ``i`` alone is stored (at ``offset``), unless it was resolved already:
        :meth:`confirm` for brokers that acknowledge message by message."""
        states = self.states
        if states[i] != _PENDING:
            return
        states[i] = _OK
        if offset is not None and self.offsets is not None:
            self.offsets[i] = offset
        if self.waiters:
            self._wake(i, i + 1)

    def fail(self, start: int, count: int, exc: BaseException) -> int:
        """Messages ``start .. start + count - 1`` failed with ``exc``, those still pending;
        returns how many were."""
        states, errors = self.states, self.errors
        failed = 0
        for i in range(start, start + count):
            if states[i] == _PENDING:
                states[i] = _FAILED
                errors[i] = exc
                failed += 1
        if failed and self.waiters:
            self._wake(start, start + count)
        return failed

    def _wake(self, start: int, stop: int) -> None:
        waiters = self.waiters
        if len(waiters) <= stop - start:
            found = sorted(i for i in waiters if start <= i < stop)
        else:
            found = [i for i in range(start, stop) if i in waiters]
        if not found:
            return
        futures = list(map(waiters.__getitem__, found))
        states = self.states
        if states.count(_OK, start, stop) != stop - start or any(map(_done, futures)):
            for i, future in zip(found, futures, strict=True):
                self._settle(i, future)
            return
        # Every waiting future gets its confirmation: built and set by ``map`` (a caller
        # that gathers every future of a call waits on thousands at once).
        first, offsets, n = self.first_id, self.offsets, len(found)
        ids = repeat(None, n) if first is None else map(first.__add__, found)
        at: Iterable[int | None] = repeat(None, n)
        if offsets is not None and offsets[found[0]] >= 0:  # a run has offsets or has none
            at = map(offsets.__getitem__, found)
        fields = zip(ids, at, repeat(self.stream), repeat(self.partition))
        deque(map(_set_result, futures, map(_new_tuple, repeat(Confirmation), fields)), maxlen=0)

    def _settle(self, i: int, future: asyncio.Future[Confirmation]) -> None:
        state = self.states[i]
        if state == _PENDING or future.done():
            return
        if state == _OK:
            future.set_result(self.confirmation(i))
        else:
            future.set_exception(self.errors[i])
            # flush() and the producer's own error report failures too: callers who ignore
            # per-message futures must not get "exception was never retrieved" noise.
            future.exception()


class LazyFuture(asyncio.Future[Confirmation]):
    """The confirmation future of message ``index`` of ``ledger`` (see the module
    docstring): an ``asyncio.Future`` that becomes a real one when first used."""

    __slots__ = ("_index", "_ledger")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # the native core frees fresh instances of exactly this class its own way
        raise TypeError("LazyFuture cannot be subclassed")

    def __init__(self, ledger: Ledger, index: int) -> None:  # no super().__init__: lazy
        self._ledger = ledger
        self._index = index

    def _realize(self) -> None:
        """Become a real asyncio future (a :class:`MadeFuture`) standing for the message."""
        if core is not None:  # it may now be in a cycle (a callback, a waiting task)
            core.gc_track(self)
        ledger, i = self._ledger, self._index
        _init_future(self, loop=ledger.loop)
        self.__class__ = MadeFuture  # type: ignore[assignment]  # the same layout
        ledger.waiters[i] = self
        if ledger.states[i] != _PENDING:
            ledger._settle(i, self)

    # --- reading: from the ledger --------------------------------------------------------

    def done(self) -> bool:
        return self._ledger.states[self._index] != _PENDING

    def cancelled(self) -> bool:
        return False  # cancelling makes it real

    def result(self) -> Confirmation:
        ledger, i = self._ledger, self._index
        state = ledger.states[i]
        if state == _OK:
            return ledger.confirmation(i)
        if state == _FAILED:
            raise ledger.errors[i]
        raise asyncio.InvalidStateError("Result is not set.")

    def exception(self) -> BaseException | None:
        ledger, i = self._ledger, self._index
        state = ledger.states[i]
        if state == _OK:
            return None
        if state == _FAILED:
            return ledger.errors[i]
        raise asyncio.InvalidStateError("Exception is not set.")

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._ledger.loop

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        return 0  # nothing was added: adding makes it real

    # --- waiting and changing: as a real future ------------------------------------------

    def __await__(self) -> Generator[Any, None, Confirmation]:
        self._realize()
        return self.__await__()

    __iter__ = __await__

    def add_done_callback(
        self, fn: Callable[[Any], object], *, context: contextvars.Context | None = None
    ) -> None:
        self._realize()
        self.add_done_callback(fn, context=context)

    def cancel(self, msg: Any | None = None) -> bool:
        self._realize()
        return self.cancel(msg)

    def set_result(self, result: Confirmation) -> None:
        self._realize()
        self.set_result(result)

    def set_exception(self, exception: type | BaseException) -> None:
        self._realize()
        self.set_exception(exception)

    def __repr__(self) -> str:
        state = ("pending", "finished", "failed")[self._ledger.states[self._index]]
        return f"<LazyFuture {state} #{self._index} of {self._ledger.stream!r}>"


class MadeFuture(asyncio.Future[Confirmation]):
    """What a :class:`LazyFuture` becomes when used: an asyncio future, nothing overridden
    (the same slots, so that the object can change its class)."""

    __slots__ = ("_index", "_ledger")


def _realizing(name: str) -> property:
    def get(self: LazyFuture) -> Any:
        self._realize()
        return getattr(self, name)

    def put(self: LazyFuture, value: Any) -> None:
        self._realize()
        setattr(self, name, value)

    return property(get, put, doc=f"Makes the future real, then its ``{name}``.")


# The private attributes some of asyncio's helpers read or set: on a LazyFuture the base
# class's would raise "Future object is not initialized".
for _name in (
    "_callbacks",
    "_cancel_message",
    "_exception",
    "_log_traceback",
    "_loop",
    "_make_cancelled_error",
    "_result",
    "_source_traceback",
    "_state",
):
    setattr(LazyFuture, _name, _realizing(_name))


def lazy_future_problems(init: Any = None) -> tuple[str, ...]:
    """What goes wrong, on this Python's ``asyncio.Future``, when a :class:`LazyFuture` is
    read from its ledger, made real by a callback (``asyncio.Future.__init__`` run late on
    the object, its class changed to :class:`MadeFuture`) and then settled by the ledger
    (empty: nothing). ``init`` stands in for ``asyncio.Future.__init__`` in tests."""
    global _init_future
    saved = _init_future
    if init is not None:
        _init_future = init
    check_loop = StandInLoop()
    loop: Any = check_loop  # only what a Future asks of a loop
    ledger = Ledger(loop, 2, "check")
    expected = Confirmation(None, None, "check", None)
    try:
        read: Any = LazyFuture(ledger, 0)
        made: Any = LazyFuture(ledger, 1)
        if read.done() or read.get_loop() is not loop:
            return ("a pending LazyFuture reads as done, or another loop",)
        ledger.confirm(0, 1)
        if not read.done() or read.result() != expected or type(read) is not LazyFuture:
            return ("a confirmed LazyFuture does not read its confirmation",)
        seen: list[object] = []
        made.add_done_callback(seen.append)
        if type(made) is not MadeFuture or made.done() or made.get_loop() is not loop:
            return ("Future.__init__ run late and the class changed to MadeFuture",)
        ledger.confirm(1, 1)
        if made.result() != expected or [cb for cb, _ in check_loop.scheduled] != [seen.append]:
            return ("a MadeFuture settled by its ledger with its callback scheduled",)
    except Exception as exc:
        return (f"LazyFuture on this asyncio.Future: {exc!r}",)
    finally:
        _init_future = saved
    return ()


_PROBLEMS = lazy_future_problems()
LAZY: Final = not _PROBLEMS
"""Whether ``Ledger.futures()`` hands out :class:`LazyFuture` objects: this Python's
``asyncio.Future`` let one be read, made real and settled in the import-time check. If not,
each message gets a plain asyncio future, resolved by the ledger the same way (logged at
INFO): the same outcomes, at asyncio's cost per message."""
if _PROBLEMS:
    logging.getLogger(__name__).info(
        "send_batch's lazy futures are off (%s): plain asyncio futures instead",
        ", ".join(_PROBLEMS),
    )
