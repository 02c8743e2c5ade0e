"""``Handover``: the bounded buffer between a Liftbridge subscription's reading thread and the
event loop. The batching is structural: a thread wakes the loop only when a task waits and no
wake-up is pending, so everything appended before the loop runs is handed over by one
wake-up. These tests hold the loop still (a blocking ``join`` on purpose) to make that exact.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from streamwire.liftbridge._stream_reader import Handover
from tests.proxy import wait_until

BUDGET = 5.0


def run_thread(target: Callable[[], object]) -> None:
    """Run ``target`` in a thread to its end while the event loop is held still."""
    thread = threading.Thread(target=target)
    thread.start()
    thread.join(BUDGET)
    assert not thread.is_alive()


async def test_one_wake_up_hands_over_everything_appended_meanwhile() -> None:
    handover: Handover[int] = Handover(1000)
    stop = threading.Event()
    getter = asyncio.create_task(handover.get(1000, timeout=BUDGET))
    await asyncio.sleep(0)  # the getter waits

    def produce() -> None:
        for i in range(500):
            assert handover.put(i, stop)

    run_thread(produce)  # the loop does not run meanwhile: one wake-up is pending
    assert await getter == list(range(500))
    assert handover.wakeups == 1
    assert len(handover) == 0


async def test_no_wake_up_without_a_waiting_task() -> None:
    handover: Handover[int] = Handover(10)
    stop = threading.Event()
    run_thread(lambda: [handover.put(i, stop) for i in range(5)])
    await asyncio.sleep(0.05)
    assert handover.wakeups == 0
    assert handover.take(3) == [0, 1, 2]
    assert await handover.get(10, timeout=0) == [3, 4]  # no wait: already there
    assert handover.wakeups == 0


async def test_a_full_buffer_blocks_the_thread_until_room_is_made() -> None:
    handover: Handover[int] = Handover(3)
    stop = threading.Event()
    done = threading.Event()
    results: list[bool] = []

    def produce() -> None:
        results.extend(handover.put(i, stop) for i in range(6))
        done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    await wait_until(lambda: len(handover) == 3, BUDGET, "3 buffered")
    await asyncio.sleep(0.1)
    assert len(handover) == 3  # the thread waits for room
    assert not done.is_set()
    got: list[int] = []
    async with asyncio.timeout(BUDGET):
        while len(got) < 6:
            got += await handover.get(2, timeout=BUDGET)
            assert len(handover) <= 3
    thread.join(BUDGET)
    assert got == list(range(6))
    assert results == [True] * 6


async def test_stop_releases_a_thread_waiting_for_room() -> None:
    handover: Handover[int] = Handover(1)
    stop = threading.Event()
    results: list[bool] = []
    thread = threading.Thread(
        target=lambda: results.extend([handover.put(0, stop), handover.put(1, stop)])
    )
    thread.start()
    await wait_until(lambda: len(handover) == 1, BUDGET, "1 buffered")
    stop.set()
    handover.release()
    thread.join(BUDGET)
    assert not thread.is_alive()
    assert results == [True, False]  # the second one was dropped
    assert handover.take(10) == [0]


async def test_the_final_item_comes_last_and_ends_putting() -> None:
    handover: Handover[object] = Handover(10)
    stop = threading.Event()
    assert handover.put(1, stop)
    assert handover.put(2, stop)
    end = object()
    handover.finish(end)
    handover.finish("ignored: the first one wins")
    assert not handover.put(3, stop)
    assert handover.take(1) == [1]
    assert handover.take(10) == [2, end]
    assert not handover.ready()
    assert await handover.get(10, timeout=0) == []


async def test_finish_wakes_a_waiting_task() -> None:
    handover: Handover[str] = Handover(10)
    getter = asyncio.create_task(handover.get(10, timeout=BUDGET))
    await asyncio.sleep(0)
    handover.finish("end")
    assert await getter == ["end"]


async def test_a_timed_out_or_cancelled_get_takes_nothing_and_leaves_no_waiter() -> None:
    handover: Handover[int] = Handover(10)
    assert await handover.get(10, timeout=0.05) == []
    getter = asyncio.create_task(handover.get(10, timeout=None))
    await asyncio.sleep(0)
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    assert not handover._waiters
    stop = threading.Event()
    run_thread(lambda: handover.put(7, stop))
    assert handover.wakeups == 0  # nobody waited: no wake-up was scheduled
    assert await handover.get(10, timeout=0) == [7]


async def test_two_waiting_tasks_share_the_items() -> None:
    handover: Handover[int] = Handover(10)
    stop = threading.Event()
    getters = [asyncio.create_task(handover.get(1, timeout=BUDGET)) for _ in range(2)]
    await asyncio.sleep(0)
    run_thread(lambda: [handover.put(i, stop) for i in range(2)])
    results = await asyncio.gather(*getters)
    assert sorted(x for r in results for x in r) == [0, 1]
    assert handover.wakeups == 1


async def _in_a_run(handover: Handover[int], stop: threading.Event) -> None:
    """Put the loop side in a run of items: a take that finds two or more."""
    run_thread(lambda: [handover.put(i, stop) for i in range(2)])
    assert handover.take(10) == [0, 1]


async def test_in_a_run_a_waiting_task_lingers_instead_of_being_woken_per_item() -> None:
    handover: Handover[int] = Handover(1000, linger=0.05, wake_batch=100)
    stop = threading.Event()
    await _in_a_run(handover, stop)
    getter = asyncio.create_task(handover.get(1000, timeout=BUDGET))
    await asyncio.sleep(0)  # the getter waits, lingering
    run_thread(lambda: [handover.put(i, stop) for i in range(2, 12)])
    assert await getter == list(range(2, 12))  # its timer woke it: the thread did not
    assert handover.wakeups == 0


async def test_in_a_run_the_thread_wakes_a_lingering_task_at_the_wake_batch() -> None:
    handover: Handover[int] = Handover(1000, linger=BUDGET * 10, wake_batch=100)
    stop = threading.Event()
    await _in_a_run(handover, stop)
    getter = asyncio.create_task(handover.get(1000, timeout=BUDGET))
    await asyncio.sleep(0)
    run_thread(lambda: [handover.put(i, stop) for i in range(100)])
    assert await getter == list(range(100))  # long before its timer
    assert handover.wakeups == 1


async def test_after_an_empty_linger_the_first_item_wakes_the_task_again() -> None:
    handover: Handover[int] = Handover(1000, linger=0.01, wake_batch=100)
    stop = threading.Event()
    await _in_a_run(handover, stop)
    assert await handover.get(10, timeout=0.05) == []  # lingered, found nothing: run over
    getter = asyncio.create_task(handover.get(10, timeout=BUDGET))
    await asyncio.sleep(0)
    run_thread(lambda: handover.put(7, stop))
    assert await getter == [7]
    assert handover.wakeups == 1  # woken by the thread, at the first item


def test_the_wake_batch_is_at_most_a_quarter_of_the_capacity() -> None:
    assert Handover[int](1024).wake_batch == 256
    assert Handover[int](100).wake_batch == 25
    assert Handover[int](2).wake_batch == 1
    assert Handover[int](1_000_000).wake_batch == 256
