"""Deadline: one budget over several steps, with an injected clock where possible."""

from __future__ import annotations

import asyncio
import builtins

import pytest

from streamwire.errors import ConfigurationError, ConnectTimeout, RequestTimeout, TimeoutError
from streamwire.transport import Deadline


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_unbounded() -> None:
    deadline = Deadline(None)
    assert deadline.remaining() is None
    assert not deadline.expired()
    assert deadline.child(None).remaining() is None
    child = deadline.child(2.0).remaining()
    assert child is not None
    assert 0 < child <= 2.0


def test_remaining_counts_down_and_raises_when_exhausted() -> None:
    clock = FakeClock()
    deadline = Deadline(5.0, clock=clock, exc_type=ConnectTimeout, what="connecting to b:1")
    assert deadline.remaining() == 5.0
    clock.now += 2.0
    assert deadline.remaining() == 3.0
    assert deadline.elapsed() == 2.0
    assert not deadline.expired()
    clock.now += 3.0
    assert deadline.expired()
    with pytest.raises(ConnectTimeout, match=r"connecting to b:1 timed out after 5 s"):
        deadline.remaining()
    with pytest.raises(RequestTimeout, match="handshake"):
        deadline.remaining(RequestTimeout, "handshake")


def test_child_never_outlives_its_parent() -> None:
    clock = FakeClock()
    parent = Deadline(5.0, clock=clock)
    clock.now += 4.0
    assert parent.child(10.0).remaining() == pytest.approx(1.0)
    assert parent.child(0.5).remaining() == pytest.approx(0.5)
    assert parent.child(None).remaining() == pytest.approx(1.0)
    clock.now += 2.0
    with pytest.raises(TimeoutError):
        parent.child(10.0).remaining()


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_invalid_timeout(bad: float) -> None:
    with pytest.raises(ConfigurationError):
        Deadline(bad)


async def test_scope_converts_expiry_to_the_given_class() -> None:
    deadline = Deadline(0.05)
    with pytest.raises(ConnectTimeout, match="TLS handshake timed out") as info:
        async with deadline.scope(ConnectTimeout, what="TLS handshake"):
            await asyncio.sleep(10)
    assert isinstance(info.value, builtins.TimeoutError)
    assert isinstance(info.value.__cause__, builtins.TimeoutError)


async def test_scopes_share_one_budget() -> None:
    clock = FakeClock()
    deadline = Deadline(30.0, clock=clock, exc_type=ConnectTimeout, what="connect")
    async with deadline.scope():
        clock.now += 29.95  # the first step used up almost all of the budget
    with pytest.raises(ConnectTimeout, match="connect timed out after 30 s"):
        async with deadline.scope():
            await asyncio.sleep(10)  # only 0.05 s were left for this step


async def test_exhausted_scope_raises_on_entry() -> None:
    clock = FakeClock()
    deadline = Deadline(1.0, clock=clock, exc_type=RequestTimeout)
    clock.now += 1.0
    entered = False
    with pytest.raises(RequestTimeout):
        async with deadline.scope():
            entered = True
    assert not entered


async def test_scope_leaves_other_errors_and_cancellation_alone() -> None:
    deadline = Deadline(5.0)
    with pytest.raises(ValueError, match="inner"):
        async with deadline.scope():
            raise ValueError("inner")
    inner_timeout = builtins.TimeoutError("from the inside")
    with pytest.raises(builtins.TimeoutError) as info:
        async with deadline.scope():
            raise inner_timeout
    assert info.value is inner_timeout

    async def sleeper() -> None:
        async with Deadline(5.0).scope():
            await asyncio.sleep(10)

    task = asyncio.create_task(sleeper())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_scope_returns_the_deadline_and_is_single_use() -> None:
    deadline = Deadline(None)
    scope = deadline.scope()
    async with scope as entered:
        assert entered is deadline
    with pytest.raises(RuntimeError):
        async with scope:
            pass
