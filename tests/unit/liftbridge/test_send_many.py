"""``Producer.send_many``'s one future over the call's confirmation futures: resolved once all
are stored, with the offsets as runs per partition; failed with the first failure in send
order once all are settled, never before."""

from __future__ import annotations

import asyncio

import pytest

from streamwire.codec.message import Confirmation
from streamwire.errors import ClosedError, ConnectionClosed, RequestTimeout
from streamwire.liftbridge.producer import BatchConfirmation, _one_future, _ranges


def _confirmed(partition: int, offset: int | None) -> Confirmation:
    return Confirmation(None, offset, "s", partition)


def test_offsets_become_runs_per_partition_in_send_order() -> None:
    confirmations = [
        _confirmed(0, 5), _confirmed(0, 6), _confirmed(1, 0), _confirmed(1, 1),
        _confirmed(0, 7), _confirmed(0, 9), _confirmed(2, None), _confirmed(2, None),
    ]  # fmt: skip
    assert _ranges(confirmations) == (
        (0, 5, 6), (1, 0, 1), (0, 7, 7), (0, 9, 9), (2, None, None), (2, None, None),
    )  # fmt: skip


async def test_resolves_once_every_message_is_stored() -> None:
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(3)]
    many = _one_future(loop, futures, "s")
    for i, future in enumerate(futures):
        assert not many.done()
        future.set_result(_confirmed(0, 10 + i))
    assert await many == BatchConfirmation(3, "s", ((0, 10, 12),))


async def test_fails_with_the_first_failure_in_send_order_once_all_are_settled() -> None:
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future[Confirmation]] = [loop.create_future() for _ in range(3)]
    many = _one_future(loop, futures, "s")
    futures[2].set_exception(RequestTimeout("late"))
    futures[1].set_exception(ConnectionClosed("cut"))
    assert not many.done()  # the first message may still be stored
    futures[0].set_result(_confirmed(0, 1))
    with pytest.raises(ConnectionClosed):
        await many


async def test_a_cancelled_confirmation_is_a_closed_error() -> None:
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future[Confirmation]] = [loop.create_future()]
    many = _one_future(loop, futures, "s")
    futures[0].cancel()
    with pytest.raises(ClosedError, match="closed before confirmation"):
        await many


async def test_nothing_sent_is_resolved_at_once() -> None:
    many = _one_future(asyncio.get_running_loop(), [], "s")
    assert many.done()
    assert many.result() == BatchConfirmation(0, "s", ())
