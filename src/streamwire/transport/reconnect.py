"""Reconnect policy and the retry loop every protocol's recovery shares."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from streamwire.errors import (
    AuthenticationError,
    ClosedError,
    ConfigurationError,
    ConnectionClosed,
    ServerError,
    StreamwireError,
    TimeoutError,
    TransportError,
)
from streamwire.transport.backoff import Backoff

__all__ = ("ReconnectPolicy", "is_retriable", "retry")

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconnectPolicy:
    """How hard to try to get a connection back: jittered exponential backoff, bounded by
    ``max_attempts`` and by ``max_elapsed`` seconds (``None``: unbounded)."""

    initial_delay: float = 0.1
    max_delay: float = 5.0
    max_attempts: int | None = None
    max_elapsed: float | None = 60.0

    def __post_init__(self) -> None:
        if self.initial_delay < 0 or self.max_delay < self.initial_delay:
            raise ConfigurationError("need 0 <= initial_delay <= max_delay")
        if self.max_elapsed is not None and self.max_elapsed <= 0:
            raise ConfigurationError("max_elapsed must be positive or None")

    def backoff(self) -> Backoff:
        return Backoff(
            initial=self.initial_delay, maximum=self.max_delay, max_attempts=self.max_attempts
        )


def is_retriable(exc: BaseException) -> bool:
    """Whether trying again may help: transport failures and timeouts yes; refused
    credentials, bad arguments and local closing no; server errors as their class says."""
    if isinstance(exc, AuthenticationError | ConfigurationError | ClosedError):
        return False
    if isinstance(exc, ServerError):
        return exc.retriable
    return isinstance(exc, TransportError | TimeoutError)


async def retry(
    attempt: Callable[[], Awaitable[T]],
    policy: ReconnectPolicy,
    *,
    cause: BaseException | None = None,
    what: str = "reconnect",
    retriable: Callable[[BaseException], bool] = is_retriable,
) -> T:
    """Call ``attempt`` until it succeeds, sleeping per ``policy`` before each try.

    Raises the first non-retriable error at once, and :class:`ConnectionClosed` (chained to
    the last error) when the policy gives up.

    Cancellation: propagates at once; nothing is left running.
    """
    loop = asyncio.get_running_loop()
    give_up_at = None if policy.max_elapsed is None else loop.time() + policy.max_elapsed
    last: BaseException | None = cause
    tries = 0
    for delay in policy.backoff():
        if give_up_at is not None:
            delay = min(delay, max(0.0, give_up_at - loop.time()))
        await asyncio.sleep(delay)
        tries += 1
        try:
            return await attempt()
        except StreamwireError as exc:
            if not retriable(exc):
                raise
            last = exc
            logger.debug("%s: attempt %d failed: %s", what, tries, exc)
        if give_up_at is not None and loop.time() >= give_up_at:
            break
    raise ConnectionClosed(f"{what}: gave up after {tries} attempts") from last
