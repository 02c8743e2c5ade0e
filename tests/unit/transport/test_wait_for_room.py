"""wait_for_room: the producers' wait for buffer room keeps the owner's own errors."""

from __future__ import annotations

import asyncio

import pytest

from streamwire.errors import ClosedError, ConnectTimeout, ProducerBufferFull, StreamwireError
from streamwire.transport.resources import wait_for_room


def _full(timeout: float | None) -> StreamwireError:
    return ProducerBufferFull(f"full for {timeout} s")


async def test_room_already_there_returns_at_once() -> None:
    def check() -> None:
        raise AssertionError("not called when there is room")

    await wait_for_room(lambda: True, asyncio.Event(), 0, check=check, full=_full)


async def test_room_appearing_ends_the_wait() -> None:
    room = [False]
    wake = asyncio.Event()

    def free() -> None:
        room[0] = True
        wake.set()

    asyncio.get_running_loop().call_later(0.01, free)
    async with asyncio.timeout(5):
        await wait_for_room(lambda: room[0], wake, 5, check=lambda: None, full=_full)


async def test_its_own_timeout_is_buffer_full() -> None:
    with pytest.raises(ProducerBufferFull, match=r"full for 0\.02 s"):
        async with asyncio.timeout(5):
            await wait_for_room(
                lambda: False, asyncio.Event(), 0.02, check=lambda: None, full=_full
            )


@pytest.mark.parametrize(
    "error",
    [ConnectTimeout("reconnecting timed out"), ClosedError("producer closed")],
    ids=["a-timeout", "not-a-timeout"],
)
async def test_the_owner_s_failure_propagates_unchanged(error: StreamwireError) -> None:
    wake = asyncio.Event()

    def check() -> None:
        raise error

    asyncio.get_running_loop().call_later(0.01, wake.set)
    with pytest.raises(type(error)) as info:
        async with asyncio.timeout(5):
            await wait_for_room(lambda: False, wake, 5, check=check, full=_full)
    assert info.value is error
