"""Lifecycle and back-pressure pieces every protocol's clients, producers and consumers share.

* :class:`AsyncClosing`: ``async with obj`` closes it on exit.
* :class:`AsyncStartable`: additionally ``await obj`` (or entering ``async with``) starts it
  once; producers flush on a clean exit.
* :func:`wait_for_room`: wait on an event until a bounded buffer has room, or time out with
  the caller's error.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from types import TracebackType
from typing import Any, Self, TypeVar

from streamwire.errors import FlushTimeout, StreamwireError

__all__ = ("AsyncClosing", "AsyncStartable", "wait_confirmed", "wait_for_room")

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
