"""A broadcast wake-up for coroutines waiting on a condition (test doubles use it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ("Signal",)


class Signal:
    """Wakes every current waiter on :meth:`pulse`; waiters re-check their condition.

    Unlike ``asyncio.Condition`` it needs no lock, and unlike one shared ``asyncio.Event``
    no waiter can miss a pulse: each pulse sets the event the waiters hold and replaces it.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def pulse(self) -> None:
        """Wake everyone waiting now."""
        self._event.set()
        self._event = asyncio.Event()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Return once ``condition()`` is true, re-checking it after every pulse."""
        while not condition():
            await self._event.wait()
