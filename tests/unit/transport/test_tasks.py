"""cancel_and_wait / cancel_tasks: stopping background tasks never swallows the caller's
cancellation, and never hangs on a task that refuses to end."""

from __future__ import annotations

import asyncio

import pytest

from streamwire.transport.tasks import caller_cancelled, cancel_and_wait, cancel_tasks


async def _forever() -> None:
    await asyncio.Event().wait()


async def _stubborn(release: asyncio.Event) -> None:
    """Ignores cancellation until ``release`` is set."""
    while not release.is_set():
        try:
            await release.wait()
        except asyncio.CancelledError:
            continue


async def test_the_task_is_cancelled_and_awaited() -> None:
    task = asyncio.create_task(_forever())
    await asyncio.sleep(0)
    async with asyncio.timeout(5):
        await cancel_and_wait(task)
    assert task.cancelled()
    assert not caller_cancelled()


async def test_none_done_and_failed_tasks_are_fine() -> None:
    async def fail() -> None:
        raise RuntimeError("boom")

    failed = asyncio.create_task(fail())
    done = asyncio.create_task(asyncio.sleep(0))
    await asyncio.wait({failed, done})
    async with asyncio.timeout(5):
        await cancel_tasks([None, failed, done])
    assert isinstance(failed.exception(), RuntimeError)


async def test_the_current_task_is_skipped() -> None:
    async def stop_myself() -> str:
        me = asyncio.current_task()
        await cancel_and_wait(me)
        return "still running"

    async with asyncio.timeout(5):
        assert await asyncio.create_task(stop_myself()) == "still running"


async def test_a_task_that_will_not_end_is_left_after_the_timeout() -> None:
    release = asyncio.Event()
    task = asyncio.create_task(_stubborn(release))
    await asyncio.sleep(0)
    async with asyncio.timeout(5):
        await cancel_and_wait(task, timeout=0.05)
    assert not task.done()
    release.set()
    async with asyncio.timeout(5):
        await task


async def test_the_caller_s_cancellation_during_the_wait_propagates() -> None:
    release = asyncio.Event()

    async def slow_to_end() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await release.wait()

    task = asyncio.create_task(slow_to_end())
    await asyncio.sleep(0)
    stopper = asyncio.create_task(cancel_and_wait(task, timeout=10))
    await asyncio.sleep(0.01)
    stopper.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await stopper
    assert stopper.cancelled()
    release.set()
    async with asyncio.timeout(5):
        await asyncio.wait({task})


async def test_a_cancellation_already_being_handled_is_raised_again() -> None:
    """The ``finally`` of a cancelled close(): the wait completes, then the caller's
    cancellation is raised again instead of being lost in ``await task``."""
    reached_after = False

    async def closing() -> None:
        nonlocal reached_after
        worker = asyncio.create_task(_forever())
        try:
            await asyncio.Event().wait()  # the clean close, cancelled
        finally:
            await cancel_and_wait(worker, timeout=5)
            assert worker.cancelled()  # the worker was stopped before re-raising
            reached_after = True

    task = asyncio.create_task(closing())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await task
    assert not reached_after


async def test_a_timeout_around_the_wait_still_fires() -> None:
    release = asyncio.Event()
    task = asyncio.create_task(_stubborn(release))
    await asyncio.sleep(0)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await cancel_and_wait(task, timeout=None)
    assert not task.done()
    release.set()
    async with asyncio.timeout(5):
        await task
