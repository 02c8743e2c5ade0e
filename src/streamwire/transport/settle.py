"""Futures made and resolved by the run, for the producers' per-message confirmations.

A producer hands out one future per accepted message and resolves a whole batch of them
when the broker answers. Making them with the loop's ``create_future`` (a Python method) and
resolving them one by one in a Python loop cost more than everything else per message; here
both are done by ``map`` over C-level callables, with a per-future loop only when some
future is already done (cancelled by its caller).
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

__all__ = ("future_factory", "new_futures", "resolve_futures")

T = TypeVar("T")

_set_result: Any = asyncio.Future.set_result
_done: Any = asyncio.Future.done


def future_factory(loop: asyncio.AbstractEventLoop) -> Callable[[], asyncio.Future[Any]]:
    """A callable making futures of ``loop``: ``asyncio.Future(loop=loop)`` without a Python
    frame when the loop makes plain asyncio futures, else the loop's own ``create_future``."""
    if type(loop).create_future is asyncio.BaseEventLoop.create_future:
        return functools.partial(asyncio.Future, loop=loop)
    return loop.create_future


def new_futures(make: Callable[[], asyncio.Future[T]], count: int) -> list[asyncio.Future[T]]:
    """``count`` new futures from ``make`` (see :func:`future_factory`)."""
    return [make() for _ in range(count)]


def resolve_futures(futures: Sequence[asyncio.Future[T]], results: Iterable[T]) -> None:
    """Set ``futures[i]`` to the i-th result, skipping futures already done. ``futures``
    must be asyncio futures (as :func:`future_factory` makes)."""
    if any(map(_done, futures)):
        for future, result in zip(futures, results, strict=False):
            if not future.done():
                future.set_result(result)
        return
    deque(map(_set_result, futures, results), maxlen=0)
