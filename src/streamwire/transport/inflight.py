"""Requests awaiting a response: correlation id -> future, and the id allocator.

The driver registers a future before sending, the reader task resolves it when the
response arrives, and closing fails every waiter::

    cid = ids.next()
    future = table.register(cid)
    await stream.send(encode(request, cid))
    response = await table.wait(cid, future, timeout=5.0)
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, Protocol, TypeVar

from streamwire.errors import (
    BusyError,
    ClosedError,
    ConfigurationError,
    LocalProtocolError,
    RequestTimeout,
)

__all__ = ("CorrelationIds", "IdsInUse", "InflightTable", "fresh_exception")

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def fresh_exception(
    template: BaseException | Callable[[], BaseException], cause: BaseException | None
) -> BaseException:
    """A new exception per waiter, so that tracebacks of different waiters never mix."""
    if isinstance(template, BaseException):
        cls = type(template)
        try:
            exc = cls.__new__(cls, *template.args)
            exc.__dict__.update(template.__dict__)
            exc.args = template.args
        except Exception:  # an exotic __new__: share the instance rather than fail closing
            exc = template
        if cause is None:
            cause = template.__cause__
    else:
        exc = template()
    if cause is not None and cause is not exc:
        exc.__cause__ = cause
    return exc


class InflightTable(Generic[K, V]):
    """Futures of requests in flight, by key (usually the correlation id).

    ``max_inflight`` bounds the table (:class:`~streamwire.errors.BusyError` beyond it).
    A future cancelled by its waiter removes its entry. After :meth:`close`, registering
    raises :class:`~streamwire.errors.ClosedError`.
    """

    __slots__ = ("_closed", "_futures", "max_inflight", "name")

    def __init__(self, *, max_inflight: int | None = None, name: str = "request") -> None:
        if max_inflight is not None and max_inflight <= 0:
            raise ConfigurationError(f"max_inflight must be None or > 0, not {max_inflight}")
        self.max_inflight = max_inflight
        self.name = name
        self._futures: dict[K, asyncio.Future[V]] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"<InflightTable {self.name} inflight={len(self._futures)}>"

    def __len__(self) -> int:
        return len(self._futures)

    def __contains__(self, key: object) -> bool:
        return key in self._futures

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._futures))

    @property
    def has_room(self) -> bool:
        """True if :meth:`register` would not raise ``BusyError``."""
        return self.max_inflight is None or len(self._futures) < self.max_inflight

    def register(
        self, key: K, on_done: Callable[[asyncio.Future[V]], object] | None = None
    ) -> asyncio.Future[V]:
        """A new future for ``key``; must be called from the event loop. ``on_done`` is
        called with the future once it is done (one callback with the table's own
        bookkeeping: cheaper than a second ``add_done_callback``).

        Raises :class:`~streamwire.errors.LocalProtocolError` if ``key`` is already in
        flight, :class:`~streamwire.errors.BusyError` if the table is full and
        :class:`~streamwire.errors.ClosedError` after :meth:`close`.
        """
        if self._closed:
            raise ClosedError(f"cannot register {self.name} {key!r}: the connection is closed")
        if key in self._futures:
            raise LocalProtocolError(f"{self.name} {key!r} is already in flight")
        if not self.has_room:
            raise BusyError(f"{self.max_inflight} {self.name}s already in flight")
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._futures[key] = future
        if on_done is None:
            future.add_done_callback(lambda f: self._forget(key, f))
        else:

            def done(f: asyncio.Future[V]) -> None:
                self._forget(key, f)
                on_done(f)

            future.add_done_callback(done)
        return future

    def _forget(self, key: K, future: asyncio.Future[V]) -> None:
        if self._futures.get(key) is future:
            del self._futures[key]

    def _pop_pending(self, key: K, what: str) -> asyncio.Future[V] | None:
        future = self._futures.pop(key, None)
        if future is None or future.done():
            logger.debug("dropping %s for %s %r: nobody is waiting", what, self.name, key)
            return None
        return future

    def resolve(self, key: K, value: V) -> bool:
        """Deliver ``value`` to the waiter of ``key``; ``False`` if late or unknown."""
        future = self._pop_pending(key, "response")
        if future is None:
            return False
        future.set_result(value)
        return True

    def fail(self, key: K, exc: BaseException, *, cause: BaseException | None = None) -> bool:
        """Raise ``exc`` in the waiter of ``key``; ``False`` if late or unknown."""
        future = self._pop_pending(key, "error")
        if future is None:
            return False
        if cause is not None:
            exc.__cause__ = cause
        future.set_exception(exc)
        return True

    def fail_all(
        self,
        exc: BaseException | Callable[[], BaseException],
        *,
        cause: BaseException | None = None,
    ) -> int:
        """Fail every waiter; each gets its own copy of ``exc`` chained to ``cause``.

        ``exc`` is an exception to copy or a factory (an exception class or a ``lambda``).
        ``cause`` defaults to ``exc.__cause__``. Returns how many waiters were failed::

            table.fail_all(ConnectionClosed("connection lost"), cause=read_error)
        """
        pending, self._futures = self._futures, {}
        failed = 0
        for future in pending.values():
            if not future.done():
                future.set_exception(fresh_exception(exc, cause))
                failed += 1
        return failed

    def discard(self, key: K) -> bool:
        """Forget ``key``, cancelling its future if still pending; ``False`` if unknown.

        For a request abandoned by its own sender (say the send failed); anyone awaiting
        the future sees ``CancelledError``.
        """
        future = self._futures.pop(key, None)
        if future is None:
            return False
        future.cancel()
        return True

    def close(
        self,
        exc: BaseException | Callable[[], BaseException],
        *,
        cause: BaseException | None = None,
    ) -> int:
        """:meth:`fail_all`, then refuse new registrations. Idempotent."""
        self._closed = True
        return self.fail_all(exc, cause=cause)

    async def wait(self, key: K, future: asyncio.Future[V], timeout: float | None) -> V:
        """Await ``future`` (from ``register(key)``) for at most ``timeout`` seconds.

        Raises :class:`~streamwire.errors.RequestTimeout` and removes the entry when the time
        is up; a late response is then dropped.

        Cancellation: the entry is removed and ``CancelledError`` propagates; a response
        arriving later is dropped.
        """
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                return await future
        except builtins.TimeoutError as exc:
            if not scope.expired():
                raise  # the response itself was a timeout error: deliver it unchanged
            if future.done() and not future.cancelled():
                return future.result()  # answered just as the time ran out
            self._forget(key, future)
            raise RequestTimeout(f"no response to {self.name} {key!r} within {timeout} s") from exc
        except asyncio.CancelledError:
            self._forget(key, future)
            future.cancel()
            raise


class IdsInUse(Protocol):
    """Ids the allocator must skip: an :class:`InflightTable` or any sized container."""

    def __contains__(self, key: object, /) -> bool: ...
    def __len__(self) -> int: ...


class CorrelationIds:
    """Wrapping counter of unsigned ``bits``-wide ids, skipping ids still in flight.

    Ids run from ``first`` to ``2**bits - 1`` and wrap back to ``first``. ``in_use`` (for
    example the :class:`InflightTable`) is consulted so that a wrapped id never collides
    with a request still waiting; when every id is taken, :meth:`next` raises
    :class:`~streamwire.errors.BusyError`.
    """

    __slots__ = ("_next", "bits", "first", "in_use", "last")

    def __init__(
        self, *, bits: int = 32, first: int = 1, start: int | None = None, in_use: IdsInUse = ()
    ) -> None:
        if not 1 <= bits <= 64:
            raise ConfigurationError(f"bits must be between 1 and 64, not {bits}")
        self.bits = bits
        self.last = (1 << bits) - 1
        if not 0 <= first <= self.last:
            raise ConfigurationError(f"first must be between 0 and {self.last}, not {first}")
        start = first if start is None else start
        if not first <= start <= self.last:
            raise ConfigurationError(f"start must be between {first} and {self.last}")
        self.first = first
        self.in_use = in_use
        self._next = start

    def __repr__(self) -> str:
        return f"CorrelationIds(bits={self.bits}, next={self._next})"

    def __iter__(self) -> CorrelationIds:
        return self

    def __next__(self) -> int:
        return self.next()

    def next(self) -> int:
        """The next free id."""
        span = self.last - self.first + 1
        # At most len(in_use) ids are taken, so one of the next len(in_use) + 1 is free.
        for _ in range(min(span, len(self.in_use) + 1)):
            candidate = self._next
            self._next = candidate + 1 if candidate < self.last else self.first
            if candidate not in self.in_use:
                return candidate
        raise BusyError(f"all {span} correlation ids are in flight")
