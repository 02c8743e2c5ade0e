"""Stopping background tasks without losing the caller's cancellation.

``task.cancel()`` followed by ``with suppress(CancelledError): await task`` cannot tell the
task's own cancellation from one aimed at the caller, and swallows both: a ``close()``
cancelled while it waits for its tasks would carry on as if nothing had happened. The
helpers here wait for the tasks to end (bounded), drop what they ended with (logged), and
then re-raise ``CancelledError`` if the *current* task is being cancelled
(``Task.cancelling()``), so that a cancellation aimed at the caller always reaches it::

    await cancel_and_wait(self._reader, timeout=1.0)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

__all__ = ("cancel_and_wait", "cancel_now", "cancel_tasks", "caller_cancelled")

logger = logging.getLogger(__name__)


def caller_cancelled() -> bool:
    """Whether the current task has a cancellation request pending or being handled."""
    current = asyncio.current_task()
    return current is not None and current.cancelling() > 0


def _settle(task: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of an ended task (so asyncio never warns about it)."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        logger.debug("task %r ended with %r while it was being stopped", task, exc)


def cancel_now(tasks: Iterable[asyncio.Future[Any] | None]) -> None:
    """Cancel every task (``None`` entries skipped) without waiting: for ``abort()``
    paths, which must not await."""
    for task in tasks:
        if task is not None:
            task.cancel()


async def cancel_tasks(
    tasks: Iterable[asyncio.Future[Any] | None], timeout: float | None = None
) -> None:
    """Cancel every task (``None`` entries and the current task are skipped), then wait up
    to ``timeout`` seconds for them to end. What they ended with is dropped (and logged);
    tasks still running after ``timeout`` are left to end on their own.

    Cancellation: the tasks are already cancelled; ``CancelledError`` propagates. It is also
    raised after the wait when the current task is being cancelled, even if a cancellation
    request reached it before this call (say, in the ``finally`` of a cancelled
    ``close()``): a caller's cancellation is never swallowed.
    """
    current = asyncio.current_task()
    stopping = [t for t in tasks if t is not None and t is not current]
    for task in stopping:
        task.cancel()
    running = [t for t in stopping if not t.done()]
    if running:
        _, pending = await asyncio.wait(running, timeout=timeout)
        for task in pending:
            logger.debug("task %r did not end within %s s of being cancelled", task, timeout)
    for task in stopping:
        if task.done():
            _settle(task)
    if caller_cancelled():
        raise asyncio.CancelledError


async def cancel_and_wait(task: asyncio.Future[Any] | None, timeout: float | None = None) -> None:
    """:func:`cancel_tasks` for one task (or ``None``)."""
    await cancel_tasks((task,), timeout)
