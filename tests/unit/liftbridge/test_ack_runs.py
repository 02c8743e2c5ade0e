"""Ack runs (``send_batch`` to one partition): the acks of many messages resolved into one
Ledger of lazy futures, over the same fake NATS link as test_acks.py."""

from __future__ import annotations

import asyncio

import pytest

from streamwire.codec.message import Confirmation
from streamwire.errors import ConnectionClosed
from streamwire.liftbridge import AckTimeout, IncorrectOffset
from streamwire.liftbridge._acks import AckRouter, AckRun
from streamwire.transport.pending import Ledger

from .support import FakeLink
from .test_acks import ack_bytes

Settled = list[tuple[int, BaseException | None]]


async def make_run(
    r: AckRouter, n: int, timeout: float | None = 5.0, *, partition: int = 2
) -> tuple[AckRun, Settled]:
    ledger = Ledger(asyncio.get_running_loop(), n, "stream", offsets=True)
    ledger.partition = partition
    settled: Settled = []

    def on_settled(run: AckRun, count: int, exc: BaseException | None) -> None:
        settled.append((count, exc))

    run = AckRun([r.next_id() for _ in range(n)], ledger, on_settled)
    r.expect_run(run, timeout, "a message to s.2")
    return run, settled


async def test_acks_in_any_order_resolve_the_lazy_futures(
    router: tuple[AckRouter, FakeLink],
) -> None:
    r, link = router
    run, settled = await make_run(r, 4)
    futures = run.ledger.futures()
    waited = futures[1]
    waiter = asyncio.ensure_future(asyncio.wait_for(waited, 5))  # one made real
    await asyncio.sleep(0)
    assert r.waiting == 4
    for i in (2, 0, 3, 1):
        await link.deliver(r.ack_inbox, ack_bytes(run.cids[i], offset=100 + i))
    assert [f.result() for f in futures] == [
        Confirmation(None, 100 + i, "stream", 2) for i in range(4)
    ]
    assert (await waiter).offset == 101
    assert settled == [(1, None)] * 4
    assert run.left == 0
    assert r.waiting == 0
    assert r.stats.acks == 4
    await link.deliver(r.ack_inbox, ack_bytes(run.cids[0]))  # a duplicate: ignored
    assert r.stats.unmatched == 1
    assert futures[0].result().offset == 100


async def test_an_error_ack_fails_only_its_message(router: tuple[AckRouter, FakeLink]) -> None:
    r, link = router
    run, settled = await make_run(r, 3)
    futures = run.ledger.futures()
    await link.deliver(r.ack_inbox, ack_bytes(run.cids[1], error=2))
    await link.deliver(r.ack_inbox, ack_bytes(run.cids[0], offset=7))
    assert isinstance(futures[1].exception(), IncorrectOffset)
    assert futures[0].result().offset == 7
    assert not futures[2].done()
    assert [exc is None for _, exc in settled] == [False, True]
    assert r.stats.error_acks == 1


async def test_missing_acks_time_out_and_late_ones_are_dropped(
    router: tuple[AckRouter, FakeLink],
) -> None:
    r, link = router
    run, settled = await make_run(r, 3, timeout=0.01)
    futures = run.ledger.futures()
    await link.deliver(r.ack_inbox, ack_bytes(run.cids[0], offset=1))
    with pytest.raises(AckTimeout, match=run.cids[2]):
        await asyncio.wait_for(futures[2], 5)
    assert isinstance(futures[1].exception(), AckTimeout)
    assert futures[0].result().offset == 1
    assert r.stats.timeouts == 2
    assert sum(n for n, _ in settled) == 3
    assert r.waiting == 0
    await link.deliver(r.ack_inbox, ack_bytes(run.cids[1]))
    assert r.stats.unmatched == 1


async def test_close_fails_what_waits_and_forget_drops_a_run(
    router: tuple[AckRouter, FakeLink],
) -> None:
    r, link = router
    gone, gone_settled = await make_run(r, 2)
    waiting, settled = await make_run(r, 2)
    r.forget_run(gone)
    await link.deliver(r.ack_inbox, ack_bytes(gone.cids[0]))
    assert r.stats.unmatched == 1
    assert not gone.ledger.futures()[0].done()
    assert gone_settled == []
    await link.deliver(r.ack_inbox, ack_bytes(waiting.cids[0], offset=5))
    r.close()
    futures = waiting.ledger.futures()
    assert futures[0].result().offset == 5
    assert isinstance(futures[1].exception(), ConnectionClosed)
    assert sum(n for n, _ in settled) == 2
    assert r.waiting == 0


async def test_run_deadlines_do_not_pile_up(router: tuple[AckRouter, FakeLink]) -> None:
    r, link = router
    for _ in range(3000):
        run, _ = await make_run(r, 1, 60.0)
        await link.deliver(r.ack_inbox, ack_bytes(run.cids[0], offset=1))
    assert len(r._expiry) <= 1025
