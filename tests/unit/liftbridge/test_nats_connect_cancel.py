"""NatsLink.connect cancelled while nats-py connects: nats-py's connect task ends.

nats-py (2.16) connects through ``asyncio.wait_for``, which before Python 3.12 loses a
cancellation that arrives in the step its connection attempt failed: it raises the attempt's
error instead, and nats-py tries the server again, every ``reconnect_time_wait``, up to
``max_reconnect_attempts`` times (two minutes with the defaults). A Liftbridge client opened
without NATS redials it in the background; closing it cancelled the redial, whose cleanup
waited for that task without a bound: the close hung for two minutes (the rare 120 s
timeouts of ``test_grpc_transport.py`` under load).

The fake here does what nats-py does against a server that refuses, with that lost
cancellation written out, so the race is the same on every Python version.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import streamwire.liftbridge._nats as nats_link
from streamwire.errors import ConnectTimeout
from streamwire.liftbridge._nats import NatsLink
from streamwire.transport.deadline import Deadline


class RefusedNats:
    """nats-py's connect against a server that refuses, as NatsLink sees it: each attempt
    waits for its connection (``fail_attempt`` makes it fail); a failed one is reported to
    ``error_cb`` and tried again after ``reconnect_time_wait`` (0 here). A cancellation
    that arrives while a failed attempt's outcome is on its way (between the attempt's end
    and the task's next step: the hop of ``wait_for``'s waiter) is lost, as
    ``asyncio.wait_for`` loses it before Python 3.12. With ``lose_every``, every
    cancellation is lost (a connect that never ends by cancellation)."""

    def __init__(self, *, lose_every: bool = False) -> None:
        self.lose_every = lose_every
        self.attempts = 0
        self.attempt: asyncio.Future[None] | None = None
        self.started = asyncio.Event()
        self.closed = False
        self.stop = False

    def fail_attempt(self) -> None:
        assert self.attempt is not None
        self.attempt.set_exception(ConnectionRefusedError(111, "Connect call failed"))

    async def connect(self, **kwargs: Any) -> None:
        loop = asyncio.get_running_loop()
        while not self.stop:
            self.attempts += 1
            attempt = self.attempt = loop.create_future()
            waiter = loop.create_future()  # released by a callback, as wait_for's

            def release(_: object, waiter: asyncio.Future[None] = waiter) -> None:
                if not waiter.done():
                    waiter.set_result(None)

            attempt.add_done_callback(release)
            self.started.set()
            try:
                await waiter
            except asyncio.CancelledError:
                if not (attempt.done() or self.lose_every):
                    raise
                # lost: the attempt ended, its outcome wins (wait_for before 3.12)
            try:
                attempt.result()
            except OSError as exc:  # nats-py: reported, then the server is tried again
                await kwargs["error_cb"](exc)
            except asyncio.InvalidStateError:
                pass  # (lose_every: the attempt never ended)
            await asyncio.sleep(0)  # reconnect_time_wait

    async def close(self) -> None:
        self.closed = True


def connecting(nc: RefusedNats) -> asyncio.Task[NatsLink]:
    return asyncio.create_task(
        NatsLink.connect(["nats://127.0.0.1:4222"], deadline=Deadline(30, exc_type=ConnectTimeout))
    )


def nats_tasks() -> list[asyncio.Task[Any]]:
    """Tasks running the fake's connect (nats-py's, as NatsLink starts it)."""
    tasks = asyncio.all_tasks()
    return [t for t in tasks if "RefusedNats.connect" in repr(t.get_coro()) and not t.done()]


async def test_a_cancellation_nats_py_loses_is_raised_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nc = RefusedNats()
    monkeypatch.setattr(nats_link, "NatsClient", lambda: nc)
    link = connecting(nc)
    async with asyncio.timeout(5):
        await nc.started.wait()
    # the attempt fails and, in the same step, the link is cancelled (a client's close
    # cancelling its NATS redial): the cancellation reaches nats-py's task between the
    # attempt's end and its next step, and is lost there
    nc.fail_attempt()
    link.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await link
    assert nats_tasks() == []
    assert nc.attempts == 1  # raised again where the lost one was reported: no new attempt
    assert nc.closed


async def test_a_connect_that_never_ends_by_cancellation_is_left_after_a_bound(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    nc = RefusedNats(lose_every=True)
    monkeypatch.setattr(nats_link, "NatsClient", lambda: nc)
    monkeypatch.setattr(nats_link, "_CONNECT_END_TIMEOUT", 0.3)
    link = connecting(nc)
    async with asyncio.timeout(5):
        await nc.started.wait()
    link.cancel()
    caplog.set_level(logging.WARNING, logger=nats_link.__name__)
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):
            await link
    assert "nats-py's connect still runs" in caplog.text
    assert nc.closed
    (left,) = nats_tasks()
    nc.stop = True  # it ends at its next turn
    left.cancel()
    async with asyncio.timeout(5):
        await asyncio.wait({left})
    assert left.done()
