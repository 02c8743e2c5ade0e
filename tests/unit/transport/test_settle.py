"""Futures made and resolved a run at a time (``streamwire.transport.settle``)."""

from __future__ import annotations

import asyncio

from streamwire.codec.message import Confirmation, confirmation, confirmations
from streamwire.transport.settle import future_factory, new_futures, resolve_futures


async def test_futures_are_of_the_running_loop_and_resolve_in_order() -> None:
    loop = asyncio.get_running_loop()
    futures = new_futures(future_factory(loop), 5)
    assert len({id(f) for f in futures}) == 5
    assert all(f.get_loop() is loop and not f.done() for f in futures)
    resolve_futures(futures, iter(range(10, 15)))
    assert [await f for f in futures] == [10, 11, 12, 13, 14]


async def test_futures_already_done_are_skipped_and_keep_their_outcome() -> None:
    futures = new_futures(future_factory(asyncio.get_running_loop()), 4)
    futures[1].cancel()
    futures[2].set_result("early")
    resolve_futures(futures, ["a", "b", "c", "d"])
    assert futures[0].result() == "a"
    assert futures[3].result() == "d"
    assert futures[1].cancelled()
    assert futures[2].result() == "early"


async def test_a_loop_with_its_own_create_future_is_asked_for_them() -> None:
    made: list[asyncio.Future[int]] = []

    class Loop(asyncio.SelectorEventLoop):
        def create_future(self) -> asyncio.Future[int]:
            future: asyncio.Future[int] = super().create_future()
            made.append(future)
            return future

    loop = Loop()
    try:
        assert new_futures(future_factory(loop), 2) == made
    finally:
        loop.close()


def test_confirmations_of_a_run_are_the_single_constructor_s() -> None:
    run = list(confirmations([None] * 3, range(7, 10), "s/t", 2))
    assert run == [confirmation(None, o, "s/t", 2) for o in (7, 8, 9)]
    assert all(type(c) is Confirmation for c in run)
    assert run[1].offset == 8
    assert run[1].partition == 2
    assert run[1].stream == "s/t"
