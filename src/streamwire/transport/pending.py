"""Per-message confirmation futures that become asyncio futures only when they are used.

``send_batch`` hands out one future per message. Real asyncio futures cost more than the
rest of the publish path together: making and resolving one is ~0.3 µs, and because they
live until their message is confirmed (up to a buffer of 10 000) they survive into the garbage
collector's older generations and make it walk the heap (another ~0.3–0.5 µs per message,
measured in docs/benchmarks.md). Most of them are never awaited one by one: a caller keeps
the last one, gathers a few, or flushes.

Here the outcome of a block of messages accepted together lives in one :class:`Ledger` (a
``bytearray`` of states, an ``array`` of offsets where the broker reports them, and a
dictionary of the rare failures), and each message's future is a :class:`LazyFuture`: an
``asyncio.Future`` subclass holding only the ledger and its index. Confirming a run of
messages is a slice assignment; nothing per message runs in Python. A ``LazyFuture`` reads
its state from the ledger (``done``, ``result``, ``exception``, ``cancelled``) and makes the
real asyncio future (:meth:`Ledger.real`) the first time something waits on it or changes it:
``await``, ``add_done_callback`` (``asyncio.gather``, ``wait``, ``shield``, ``wait_for``,
``as_completed`` all go through it), ``cancel``, ``set_result``/``set_exception``. From then
on that future is resolved by the ledger like any other waiter and the ``LazyFuture``
delegates to it, so every message's outcome is delivered exactly once and a cancelled
future stays cancelled (cancelling never stops the message).

A ``LazyFuture`` never runs ``asyncio.Future.__init__`` (that is what it saves): every method
and the private attributes asyncio's own helpers read are overridden, and the callbacks it
registers are called with the ``LazyFuture`` itself, as a future's are. The native core makes
them without a Python call each and leaves them untracked by the garbage collector until
their real future is made (``native/src/futures.rs`` says why that is safe); the pure-Python
code makes the same objects, tracked.
"""

from __future__ import annotations

import asyncio
import contextvars
from array import array
from collections.abc import Callable, Generator
from itertools import repeat
from typing import Any, Final

from streamwire._native import core
from streamwire.codec.message import Confirmation, confirmation

__all__ = ("LazyFuture", "Ledger")

_PENDING: Final = 0
_OK: Final = 1
_FAILED: Final = 2
_OK_RUN: Final = bytes((_OK,))
_NO_OFFSET: Final = array("q", (-1,))


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
        """The real futures made so far, by index (kept once made: a ``LazyFuture``
        delegates to its own for good)."""

    def __len__(self) -> int:
        return len(self.states)

    def futures(self) -> list[asyncio.Future[Confirmation]]:
        """A :class:`LazyFuture` per message, in order (with the native core: made without
        a Python call each, and untracked by the garbage collector until used)."""
        n = len(self.states)
        if core is not None:
            return core.lazy_futures(LazyFuture, self, n)
        return list(map(LazyFuture, repeat(self, n), range(n)))

    def real(self, i: int) -> asyncio.Future[Confirmation]:
        """The asyncio future of message ``i``: made on the first call (already resolved if
        the message is), the same one afterwards."""
        future = self.waiters.get(i)
        if future is None:
            future = self.waiters[i] = self.loop.create_future()
            self._settle(i, future)
        return future

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
            found = [i for i in waiters if start <= i < stop]
        else:
            found = [i for i in range(start, stop) if i in waiters]
        for i in found:
            self._settle(i, waiters[i])

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


class _Relay:
    """A callback registered on the real future that calls the user's with the
    :class:`LazyFuture`; equal to the user's callback, so ``remove_done_callback`` finds it."""

    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[Any], object], future: LazyFuture) -> None:
        self.fn = fn
        self.future = future

    def __call__(self, _real: object) -> None:
        self.fn(self.future)

    def __eq__(self, other: object) -> bool:
        return other is self or other == self.fn

    def __hash__(self) -> int:
        return hash(self.fn)


class LazyFuture(asyncio.Future[Confirmation]):
    """The confirmation future of message ``index`` of ``ledger`` (see the module
    docstring): an ``asyncio.Future`` whose real future is made when first used."""

    __slots__ = ("_index", "_ledger")

    def __init__(self, ledger: Ledger, index: int) -> None:  # no super().__init__: lazy
        self._ledger = ledger
        self._index = index

    def _real(self) -> asyncio.Future[Confirmation]:
        if core is not None:  # it may now be in a cycle (a callback, a waiting task)
            core.gc_track(self)
        return self._ledger.real(self._index)

    def _made(self) -> asyncio.Future[Confirmation] | None:
        return self._ledger.waiters.get(self._index)

    # --- reading: from the ledger until a real future exists -----------------------------

    def done(self) -> bool:
        real = self._made()
        if real is not None:
            return real.done()
        return self._ledger.states[self._index] != _PENDING

    def cancelled(self) -> bool:
        real = self._made()
        return real is not None and real.cancelled()

    def result(self) -> Confirmation:
        real = self._made()
        if real is not None:
            return real.result()
        ledger, i = self._ledger, self._index
        state = ledger.states[i]
        if state == _OK:
            return ledger.confirmation(i)
        if state == _FAILED:
            raise ledger.errors[i]
        raise asyncio.InvalidStateError("Result is not set.")

    def exception(self) -> BaseException | None:
        real = self._made()
        if real is not None:
            return real.exception()
        ledger, i = self._ledger, self._index
        state = ledger.states[i]
        if state == _OK:
            return None
        if state == _FAILED:
            return ledger.errors[i]
        raise asyncio.InvalidStateError("Exception is not set.")

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._ledger.loop

    # --- waiting and changing: through the real future ------------------------------------

    def __await__(self) -> Generator[Any, None, Confirmation]:
        return self._real().__await__()

    __iter__ = __await__

    def add_done_callback(
        self, fn: Callable[[Any], object], *, context: contextvars.Context | None = None
    ) -> None:
        self._real().add_done_callback(_Relay(fn, self), context=context)

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        real = self._made()
        return 0 if real is None else real.remove_done_callback(fn)

    def cancel(self, msg: Any | None = None) -> bool:
        return self._real().cancel(msg)

    def set_result(self, result: Confirmation) -> None:
        self._real().set_result(result)

    def set_exception(self, exception: type | BaseException) -> None:
        self._real().set_exception(exception)

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        return self._real()._make_cancelled_error()  # type: ignore[attr-defined,no-any-return]

    def __repr__(self) -> str:
        real = self._made()
        if real is not None:
            return f"<LazyFuture {real!r}>"
        state = ("pending", "finished", "failed")[self._ledger.states[self._index]]
        return f"<LazyFuture {state} #{self._index} of {self._ledger.stream!r}>"


def _delegated(name: str) -> property:
    def get(self: LazyFuture) -> Any:
        return getattr(self._real(), name)

    def put(self: LazyFuture, value: Any) -> None:
        setattr(self._real(), name, value)

    return property(get, put, doc=f"The real future's ``{name}``.")


# The private attributes asyncio's helpers read (gather reads ``_cancel_message``, some
# read ``_loop``): the base class's would raise "Future object is not initialized".
for _name in (
    "_callbacks",
    "_cancel_message",
    "_exception",
    "_log_traceback",
    "_result",
    "_source_traceback",
    "_state",
):
    setattr(LazyFuture, _name, _delegated(_name))
LazyFuture._loop = property(lambda self: self._ledger.loop)  # type: ignore[assignment,method-assign]
