"""Lifecycle and back-pressure pieces every protocol's clients, producers and consumers share.

* :class:`AsyncClosing`: ``async with obj`` closes it on exit.
* :class:`AsyncStartable`: additionally ``await obj`` (or entering ``async with``) starts it
  once; producers flush on a clean exit.
* :func:`wait_for_room`: wait on an event until a bounded buffer has room, or time out with
  the caller's error; :func:`wait_for_bytes` for a message of a known size.
* :func:`wait_flushed`: a producer's ``flush``.
* :func:`wait_confirmed`: a producer's ``send_and_wait``.
* :class:`AutoCommit`: when a named consumer stores its offset by itself.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Generator
from types import TracebackType
from typing import Any, Self, TypeVar

from streamwire.errors import (
    ConfigurationError,
    FlushTimeout,
    ProducerBufferFull,
    StreamwireError,
)

__all__ = (
    "AsyncClosing",
    "AsyncStartable",
    "AutoCommit",
    "wait_confirmed",
    "wait_flushed",
    "wait_for_bytes",
    "wait_for_room",
)

_T = TypeVar("_T")


class AsyncClosing(ABC):
    """``async with obj: ...`` closes ``obj`` on the way out."""

    @abstractmethod
    async def close(self) -> None:
        """Release everything; idempotent."""

    async def _close_on_exit(self, clean: bool) -> None:
        """How leaving ``async with`` closes (``clean``: no exception). Producers override it
        to flush only on a clean exit."""
        await self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._close_on_exit(exc_type is None)


class AsyncStartable(AsyncClosing):
    """``await obj`` or ``async with obj`` starts it (once) before use."""

    @abstractmethod
    async def start(self) -> Self:
        """Connect/declare/subscribe; returns ``self``."""

    @abstractmethod
    def _is_started(self) -> bool:
        """Whether :meth:`start` already ran."""

    def __await__(self) -> Generator[Any, None, Self]:
        return self.start().__await__()

    async def __aenter__(self) -> Self:
        if not self._is_started():
            await self.start()
        return self


async def wait_for_room(
    has_room: Callable[[], bool],
    wake: asyncio.Event,
    timeout: float | None,
    *,
    check: Callable[[], None],
    full: Callable[[float | None], StreamwireError],
) -> None:
    """Wait until ``has_room()``; ``wake`` is set whenever room may have appeared. ``check``
    raises if the owner failed or closed meanwhile, and what it raises propagates unchanged
    (a :class:`~streamwire.errors.ConnectTimeout` included); only when this wait's own
    ``timeout`` runs out is ``full(timeout)`` raised (typically
    :class:`~streamwire.errors.ProducerBufferFull`).

    Cancellation: only the wait stops; nothing was accepted.
    """
    if has_room():
        return
    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            while not has_room():
                wake.clear()
                await wake.wait()
                check()
    except TimeoutError:
        if not scope.expired():
            raise  # the owner's own failure, which happens to be a timeout
        raise full(timeout) from None


async def wait_for_bytes(
    size: int,
    timeout: float | None,
    *,
    has_room: Callable[[int], bool],
    wake: asyncio.Event,
    max_bytes: int,
    check: Callable[[], None],
    what: str,
) -> None:
    """:func:`wait_for_room` for one message of ``size`` bytes in a buffer bounded to
    ``max_bytes``: :class:`~streamwire.errors.ConfigurationError` if it can never fit,
    :class:`~streamwire.errors.ProducerBufferFull` (naming ``what``) after ``timeout``.

    Cancellation: only the wait stops; nothing was accepted.
    """
    if has_room(size):
        return
    if size > max_bytes:
        raise ConfigurationError(f"a {size}-byte message exceeds max_buffer_bytes")
    await wait_for_room(
        lambda: has_room(size),
        wake,
        timeout,
        check=check,
        full=lambda t: ProducerBufferFull(f"producer buffer for {what!r} stayed full for {t} s"),
    )


async def wait_flushed(
    idle: asyncio.Event,
    timeout: float | None,
    *,
    pending: Callable[[], int],
    take_failure: Callable[[], BaseException | None],
    first: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """A producer's ``flush``: wait up to ``timeout`` seconds (after ``first()``, if given,
    within the same time) until ``idle`` is set, i.e. every accepted message is confirmed or
    failed; then raise the first failure since the previous flush (``take_failure()``
    returns it and forgets it). :class:`~streamwire.errors.FlushTimeout`, naming
    ``pending()``, when the time runs out; errors of ``first()`` propagate unchanged.

    Cancellation: only the wait stops.
    """
    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            if first is not None:
                await first()
            await idle.wait()
    except TimeoutError as exc:
        if not scope.expired():
            raise
        raise FlushTimeout(f"{pending()} messages unconfirmed after {timeout} s") from exc
    failure = take_failure()
    if failure is not None:
        raise failure


class AutoCommit:
    """When a named consumer stores its offset by itself: once ``every`` messages were
    handed out since the last store, or ``interval`` seconds after the first of them.

    The consumer calls :meth:`handed_out` as it hands messages out and stores the offset
    when it returns True; :meth:`stored` after every store (automatic or not).
    """

    __slots__ = ("_due", "every", "interval", "uncommitted")

    def __init__(self, every: int | None, interval: float | None) -> None:
        self.every = every
        self.interval = interval
        self.uncommitted = 0
        """Messages handed out since the last store."""
        self._due: float | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.every or self.interval)

    @property
    def owed(self) -> bool:
        """Enabled, and messages were handed out since the last store (close stores them)."""
        return self.enabled and self.uncommitted > 0

    def handed_out(self, count: int) -> bool:
        """``count`` more messages were handed out; True when the offset should be stored."""
        self.uncommitted += count
        if self.every and self.uncommitted >= self.every:
            return True
        if self.interval is None:
            return False
        now = time.monotonic()
        if self._due is None:
            self._due = now + self.interval
        return now >= self._due

    def stored(self) -> None:
        self.uncommitted = 0
        self._due = None


async def wait_confirmed(
    future: asyncio.Future[_T], wait: float | None, what: str = "no confirmation"
) -> _T:
    """Wait up to ``wait`` seconds for a producer's confirmation future (shielded: the
    message is not cancelled). :class:`FlushTimeout` when this wait runs out; the future's
    own failure (a per-message timeout included) is raised as it is.

    Cancellation: only the wait stops.
    """
    scope = asyncio.timeout(wait)
    try:
        async with scope:
            return await asyncio.shield(future)
    except TimeoutError:
        if not scope.expired():
            raise
        raise FlushTimeout(f"{what} within {wait} s") from None
