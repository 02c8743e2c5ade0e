"""What every broker's producer shares, whatever its wire: :class:`ProducerCore`.

A producer accepts messages into a bounded buffer (or, for Liftbridge, a bounded number of
messages awaiting their ack), sends them, and settles each one's confirmation once the broker
answers. Around that wire-specific middle the three producers do the same things, and do them
here:

* **room**: :meth:`ProducerCore._wait_for_room` waits, cancellation-safely, until the
  subclass's :meth:`~ProducerCore._has_room` says a message fits, raising
  :class:`~streamwire.errors.ProducerBufferFull` after ``max_block`` (or the call's
  ``timeout``); ``_room`` is the event the subclass sets when room may have appeared;
* **in-flight accounting**: ``_idle`` is set while nothing is pending (the subclass clears
  it as it accepts and sets it as the last pending message settles), ``pending`` is the
  subclass's count;
* **failures**: :meth:`~ProducerCore._note_failure` remembers the first failure since the
  previous flush, :meth:`~ProducerCore._fail_all` fans a fatal one out to everything pending
  (the subclass's :meth:`~ProducerCore._fail_pending`) and keeps it as the producer's
  ``_error``, which every later call raises;
* **flush**, **send_and_wait** (:func:`and_wait`: a producer's ``send``, then the wait
  for its confirmation), and a **close** that flushes, lets the subclass close
  its wire (:meth:`~ProducerCore._close_wire`) and always ends in the subclass's synchronous
  ``abort()``, so a cancelled close leaves nothing behind.

The per-message confirmations are :mod:`streamwire.transport.pending`'s ledgers; the pieces
used here are :mod:`streamwire.transport.resources`'.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from streamwire.errors import ClosedError, ProducerBufferFull, StreamwireError
from streamwire.transport.resources import (
    AsyncStartable,
    wait_confirmed,
    wait_flushed,
    wait_for_bytes,
    wait_for_room,
)

__all__ = ("CoreOptions", "ProducerCore", "and_wait")

_T = TypeVar("_T")
_P = ParamSpec("_P")
_Core = TypeVar("_Core", bound="ProducerCore")


class CoreOptions(Protocol):
    """The options every producer has (its broker's ``ProducerOptions``)."""

    @property
    def max_block(self) -> float | None:
        """How long ``send`` waits for room by default."""

    @property
    def confirm_timeout(self) -> float | None:
        """How long ``send_and_wait`` and ``flush`` wait by default."""


class ProducerCore(AsyncStartable):
    """Room, flush, failures and close of a producer; the subclass brings its wire.

    The subclass provides ``pending``, ``_is_started``, ``_has_room``, ``abort`` and,
    where it has something to do there, ``_close_wire``, ``_fail_pending`` and
    ``_flush_wire``. ``what`` names the producer's destination in errors; ``max_bytes``
    bounds its buffer in bytes (``None``: room is counted in messages only).
    """

    options: CoreOptions

    def __init__(self, what: str, max_bytes: int | None) -> None:
        self._what = what
        self._max_bytes = max_bytes
        self._room = asyncio.Event()
        """Set when room may have appeared (or the producer failed or closed)."""
        self._idle = asyncio.Event()
        """Set while nothing is pending."""
        self._idle.set()
        self._first_failure: BaseException | None = None
        """The first failure since the previous flush."""
        self._error: StreamwireError | None = None
        """The failure that ended the producer (every later call raises it)."""
        self._closed = False

    # --- what the subclass provides ------------------------------------------------------

    @property
    @abstractmethod
    def pending(self) -> int:
        """Messages accepted but not yet confirmed or failed."""

    @abstractmethod
    def _has_room(self, size: int) -> bool:
        """Whether a message of ``size`` bytes may be accepted now."""

    @abstractmethod
    def abort(self) -> None:
        """Stop at once, dropping what a clean close did not finish (synchronous,
        idempotent)."""

    async def _close_wire(self) -> None:
        """The clean part of closing after the flush (the producer is already marked
        closed); whatever it leaves, ``abort`` drops."""

    async def _flush_wire(self) -> None:
        """What a flush does before waiting for the confirmations (within its time)."""

    def _fail_pending(self, exc: StreamwireError) -> None:
        """Fail every message still pending with ``exc``."""

    # --- checks and defaults -------------------------------------------------------------

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ClosedError(f"producer for {self._what!r} is closed")
        if not self._is_started():
            raise ClosedError("producer not started: use 'async with' or 'await'")

    def _block_for(self, timeout: float | None) -> float | None:
        """A call's wait for room: its own ``timeout``, else ``max_block``."""
        return self.options.max_block if timeout is None else timeout

    async def _close_on_exit(self, clean: bool) -> None:
        await self.close(flush=clean)

    # --- room ----------------------------------------------------------------------------

    async def _wait_for_room(self, size: int, timeout: float | None) -> None:
        """Wait until a message of ``size`` bytes fits (:meth:`_has_room`), up to
        ``timeout`` (default ``max_block``): :class:`~streamwire.errors.ProducerBufferFull`
        then, :class:`~streamwire.errors.ConfigurationError` at once if it can never fit;
        the producer's own failure or closing propagates as :meth:`_check` raises it.

        Cancellation: only the wait stops; nothing was accepted.
        """
        if self._max_bytes is not None:
            await wait_for_bytes(
                size,
                self._block_for(timeout),
                has_room=self._has_room,
                wake=self._room,
                max_bytes=self._max_bytes,
                check=self._check,
                what=self._what,
            )
            return
        await wait_for_room(
            lambda: self._has_room(size),
            self._room,
            self._block_for(timeout),
            check=self._check,
            full=lambda t: ProducerBufferFull(
                f"{self.pending} messages to {self._what!r} stayed unacknowledged for {t} s"
            ),
        )

    # --- confirmations and failures ------------------------------------------------------

    async def _wait_confirmed(self, future: asyncio.Future[_T], timeout: float | None) -> _T:
        """``send_and_wait``'s wait for ``future``, up to ``timeout`` (default
        ``confirm_timeout``): :class:`~streamwire.errors.FlushTimeout` then; the message's own
        failure (a per-message timeout included) is raised as it is.

        Cancellation: only the wait stops; the message may still be stored.
        """
        wait = self.options.confirm_timeout if timeout is None else timeout
        return await wait_confirmed(future, wait, "no confirmation")

    def _note_failure(self, exc: BaseException) -> None:
        """A message failed with ``exc``: the next flush raises the first such failure."""
        if self._first_failure is None:
            self._first_failure = exc

    def _take_failure(self) -> BaseException | None:
        """The producer's fatal error, else the first failure since the previous flush
        (forgotten once taken)."""
        if self._error is not None:
            return self._error
        failure, self._first_failure = self._first_failure, None
        return failure

    def _fail_all(self, exc: StreamwireError) -> None:
        """A failure that ends the producer: ``exc`` fails everything pending and every
        later call; whoever waits for room or a flush wakes up."""
        self._error = exc
        self._fail_pending(exc)
        self._room.set()
        self._idle.set()

    # --- flush and close -----------------------------------------------------------------

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every accepted message is confirmed or failed; raises the first failure
        since the previous flush, or :class:`~streamwire.errors.FlushTimeout` after
        ``timeout`` (default ``confirm_timeout``).

        Cancellation: only the wait stops.
        """
        if self._error is not None:
            raise self._error
        await wait_flushed(
            self._idle,
            self.options.confirm_timeout if timeout is None else timeout,
            pending=lambda: self.pending,
            take_failure=self._take_failure,
            first=self._flush_wire,
        )

    async def close(self, *, flush: bool = True, timeout: float | None = None) -> None:
        """Flush (unless ``flush=False``; a failed or timed-out flush does not stop the
        close), close the wire and stop. Idempotent.

        Cancellation: the producer is aborted (``abort()``) before ``CancelledError``
        propagates.
        """
        if self._closed:
            return
        try:
            if flush and self._error is None and self._is_started():
                with contextlib.suppress(StreamwireError):
                    await self.flush(timeout)
            self._closed = True
            await self._close_wire()
        finally:
            self.abort()


def and_wait(
    send: Callable[Concatenate[_Core, _P], Awaitable[asyncio.Future[_T]]],
) -> Callable[Concatenate[_Core, _P], Coroutine[Any, Any, _T]]:
    """A producer's ``send_and_wait``, made of its ``send``: the same parameters, but
    ``timeout`` bounds the wait for the confirmation (default ``confirm_timeout``) instead of
    the wait for room. Used in the class body: ``send_and_wait = and_wait(send)``."""

    async def send_and_wait(self: _Core, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        timeout = cast("float | None", kwargs.pop("timeout", None))
        future = await send(self, *args, **kwargs)
        return await self._wait_confirmed(future, timeout)

    send_and_wait.__doc__ = """Send one message (:meth:`send`'s parameters) and wait for its
        confirmation: ``timeout`` bounds this wait (default ``confirm_timeout``; then
        :class:`~streamwire.errors.FlushTimeout`); the message's own failure (a per-message
        timeout included) is raised as it is.

        Cancellation: the message may still be stored; only the wait stops.
        """
    signature = inspect.signature(send)
    send_and_wait.__signature__ = signature.replace(  # type: ignore[attr-defined]
        return_annotation="Confirmation"
    )
    return send_and_wait
