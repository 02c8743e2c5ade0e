"""One time budget shared by the steps of a multi-step operation.

Connecting is TCP + TLS + protocol handshake + authentication; the user gives one
``timeout`` for all of it. Each step runs in ``async with deadline.scope(...)`` and gets
whatever is left::

    deadline = Deadline(timeout)
    async with deadline.scope(ConnectTimeout, what=f"connecting to {host}:{port}"):
        stream = await open_tcp(host, port, timeout=None)
    async with deadline.scope(ConnectTimeout, what="handshake"):
        await handshake(stream)
"""

from __future__ import annotations

import asyncio
import builtins
import math
import time
from collections.abc import Callable
from types import TracebackType

from streamwire.errors import ConfigurationError, TimeoutError

__all__ = ("Deadline", "DeadlineScope")


class Deadline:
    """A point in time by which something must be done; ``timeout=None`` means never.

    ``clock`` returns seconds on a monotonic scale (default ``time.monotonic``, which is
    what the asyncio event loop uses too). ``exc_type`` and ``what`` are the defaults for
    the exception raised when the budget is exhausted.
    """

    __slots__ = ("_clock", "_exc_type", "_expires_at", "_started_at", "timeout", "what")

    def __init__(
        self,
        timeout: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        exc_type: type[TimeoutError] = TimeoutError,
        what: str = "operation",
    ) -> None:
        if timeout is not None and (math.isnan(timeout) or timeout < 0):
            raise ConfigurationError(f"timeout must be None or >= 0 seconds, not {timeout!r}")
        self.timeout = timeout
        self.what = what
        self._clock = clock
        self._exc_type = exc_type
        self._started_at = clock()
        self._expires_at = None if timeout is None else self._started_at + timeout

    def __repr__(self) -> str:
        return f"Deadline(timeout={self.timeout!r}, what={self.what!r})"

    def expired(self) -> bool:
        """True once the budget is used up (never for an unbounded deadline)."""
        return self._expires_at is not None and self._clock() >= self._expires_at

    def elapsed(self) -> float:
        """Seconds since the deadline was created."""
        return self._clock() - self._started_at

    def remaining(
        self, exc_type: type[TimeoutError] | None = None, what: str | None = None
    ) -> float | None:
        """Seconds left (``None`` if unbounded); raises ``exc_type`` if none are left."""
        if self._expires_at is None:
            return None
        left = self._expires_at - self._clock()
        if left <= 0:
            raise self._exhausted(exc_type, what)
        return left

    def child(self, timeout: float | None) -> Deadline:
        """A deadline for a sub-step: ``timeout`` from now, but no later than this one."""
        mine = None if self._expires_at is None else max(0.0, self._expires_at - self._clock())
        if timeout is None or (mine is not None and mine < timeout):
            timeout = mine
        return Deadline(timeout, clock=self._clock, exc_type=self._exc_type, what=self.what)

    def scope(
        self, exc_type: type[TimeoutError] | None = None, *, what: str | None = None
    ) -> DeadlineScope:
        """``async with`` block limited to the remaining budget.

        On expiry the block is cancelled (``asyncio.timeout``) and ``exc_type`` is raised
        instead of the builtin ``TimeoutError``, chained to it. Entering an exhausted
        deadline raises at once.
        """
        return DeadlineScope(self, exc_type or self._exc_type, what or self.what)

    def _exhausted(self, exc_type: type[TimeoutError] | None, what: str | None) -> TimeoutError:
        cls = exc_type or self._exc_type
        budget = f" after {self.timeout:g} s" if self.timeout is not None else ""
        return cls(f"{what or self.what} timed out{budget}")


class DeadlineScope:
    """The context manager returned by :meth:`Deadline.scope`. Single use."""

    __slots__ = ("_deadline", "_exc_type", "_timeout", "_what")

    def __init__(self, deadline: Deadline, exc_type: type[TimeoutError], what: str) -> None:
        self._deadline = deadline
        self._exc_type = exc_type
        self._what = what
        self._timeout: asyncio.Timeout | None = None

    async def __aenter__(self) -> Deadline:
        if self._timeout is not None:
            raise RuntimeError("a DeadlineScope cannot be entered twice")
        left = self._deadline.remaining(self._exc_type, self._what)
        self._timeout = asyncio.timeout(left)
        await self._timeout.__aenter__()
        return self._deadline

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        timeout = self._timeout
        if timeout is None:  # pragma: no cover - __aenter__ failed, so no __aexit__
            return None
        try:
            await timeout.__aexit__(exc_type, exc, tb)
        except builtins.TimeoutError as expired:
            if not timeout.expired():  # pragma: no cover - asyncio only raises when expired
                raise
            raise self._deadline._exhausted(self._exc_type, self._what) from expired
        return None
