"""Helpers of the lifecycle tests: cancelling a close() and closing again."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import pytest

__all__ = ("cancel", "close_cancelled_then_closed")


class Closable(Protocol):
    async def close(self) -> None: ...


async def cancel(task: asyncio.Task[Any], timeout: float = 10.0) -> None:
    """Cancel ``task`` and check that the cancellation reached it (``CancelledError``)."""
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(timeout):
            await task


async def close_cancelled_then_closed(client: Closable, timeout: float = 30.0) -> None:
    """``client.close()`` cancelled right after it starts (the cancellation must reach the
    caller), then ``client.close()`` again (it must finish the job)."""
    closing = asyncio.create_task(client.close())
    await asyncio.sleep(0)  # close() started: it waits (in a producer's flush, say)
    await cancel(closing, timeout)
    async with asyncio.timeout(timeout):
        await client.close()
