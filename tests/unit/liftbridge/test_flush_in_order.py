"""``flush_in_order`` over fake nats-py clients: the queued commands go out before the PING,
and nats-py's cancellation-swallowing ``_flush_pending`` cannot outlive the timeout."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

import pytest

from streamwire.liftbridge._nats import flush_in_order


class Recording:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def flush(self, timeout: float) -> None:
        self.calls.append("flush")


class WithFlusher(Recording):
    def __init__(self, *, stuck: bool = False) -> None:
        super().__init__()
        self.stuck = stuck
        self.pushes: list[asyncio.Task[Any]] = []

    async def _flush_pending(self, force_flush: bool = False) -> None:
        self.calls.append(f"push force={force_flush}")
        task = asyncio.current_task()
        assert task is not None
        self.pushes.append(task)
        if self.stuck:
            with contextlib.suppress(asyncio.CancelledError):  # as nats-py does
                await asyncio.Event().wait()


async def test_the_buffer_is_pushed_out_before_the_ping() -> None:
    nc = WithFlusher()
    await flush_in_order(cast(Any, nc), 5)
    assert nc.calls == ["push force=True", "flush"]


async def test_without_the_internal_only_flush_runs() -> None:
    nc = Recording()
    await flush_in_order(cast(Any, nc), 5)
    assert nc.calls == ["flush"]


async def test_a_stuck_flusher_times_out_and_leaves_no_task() -> None:
    nc = WithFlusher(stuck=True)
    with pytest.raises(TimeoutError):
        await flush_in_order(cast(Any, nc), 0.05)
    (push,) = nc.pushes
    await asyncio.wait({push}, timeout=5)
    assert push.done()
    assert nc.calls == ["push force=True"]  # no PING after a failed push
