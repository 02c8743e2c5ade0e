"""wait_confirmed: the producers' send_and_wait wait."""

from __future__ import annotations

import asyncio

import pytest

from streamwire.errors import FlushTimeout, RequestTimeout
from streamwire.transport.resources import wait_confirmed


async def test_result_error_and_timeout_are_told_apart() -> None:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    loop.call_soon(done.set_result, 7)
    assert await wait_confirmed(done, 5) == 7

    failed: asyncio.Future[int] = loop.create_future()
    loop.call_soon(failed.set_exception, RequestTimeout("the message's own deadline"))
    with pytest.raises(RequestTimeout, match="own deadline"):  # not turned into FlushTimeout
        await wait_confirmed(failed, 5)

    pending: asyncio.Future[int] = loop.create_future()
    with pytest.raises(FlushTimeout, match=r"nothing within 0\.01 s"):
        await wait_confirmed(pending, 0.01, "nothing")
    assert not pending.cancelled()  # shielded: the message keeps its future
    pending.cancel()
