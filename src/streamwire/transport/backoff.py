"""Exponential backoff delays with jitter, for reconnect supervisors.

Pure: it computes delays and never sleeps, so with a seeded ``rng`` it is deterministic::

    backoff = Backoff(initial=0.1, maximum=10.0, max_attempts=8)
    for delay in backoff:
        try:
            return await connect()
        except TransportError:
            await asyncio.sleep(delay)
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Literal, Protocol, TypeAlias

from streamwire.errors import ConfigurationError

__all__ = ("Backoff", "Jitter", "RandomSource")

#: ``"full"``: uniform in ``[0, base]``; ``"equal"``: uniform in ``[base/2, base]``;
#: ``None``: exactly ``base``. (The AWS architecture blog's names.)
Jitter: TypeAlias = Literal["full", "equal"] | None


class RandomSource(Protocol):
    """What ``Backoff`` needs from a random generator (``random.Random`` fits)."""

    def random(self) -> float:
        """A float in ``[0.0, 1.0)``."""
        ...


def _check_finite(name: str, value: float, minimum: float) -> None:
    if not math.isfinite(value) or value < minimum:
        raise ConfigurationError(f"{name} must be a finite number >= {minimum}, not {value!r}")


class Backoff(Iterator[float]):
    """An iterator of delays in seconds: ``initial * multiplier**n``, capped at ``maximum``.

    The *base* delay grows geometrically and never exceeds ``maximum``; ``jitter`` then
    randomises each delay below its base. Iteration stops after ``max_attempts`` delays
    (``None``: never). :meth:`reset` starts over, for example after a successful connect.
    """

    __slots__ = (
        "_attempts",
        "_base",
        "initial",
        "jitter",
        "max_attempts",
        "maximum",
        "multiplier",
        "rng",
    )

    def __init__(
        self,
        *,
        initial: float = 0.1,
        maximum: float = 10.0,
        multiplier: float = 2.0,
        jitter: Jitter = "full",
        max_attempts: int | None = None,
        rng: RandomSource | None = None,
    ) -> None:
        _check_finite("initial", initial, 0.0)
        _check_finite("maximum", maximum, initial)
        _check_finite("multiplier", multiplier, 1.0)
        if jitter not in ("full", "equal", None):
            raise ConfigurationError(f"jitter must be 'full', 'equal' or None, not {jitter!r}")
        if max_attempts is not None and max_attempts < 0:
            raise ConfigurationError(f"max_attempts must be None or >= 0, not {max_attempts}")
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
        self.jitter: Jitter = jitter
        self.max_attempts = max_attempts
        self.rng: RandomSource = rng if rng is not None else random.Random()
        self._attempts = 0
        self._base = initial

    def __repr__(self) -> str:
        return (
            f"Backoff(initial={self.initial}, maximum={self.maximum}, "
            f"multiplier={self.multiplier}, jitter={self.jitter!r}, "
            f"max_attempts={self.max_attempts}, attempts={self._attempts})"
        )

    @property
    def attempts(self) -> int:
        """How many delays were handed out since the last :meth:`reset`."""
        return self._attempts

    @property
    def exhausted(self) -> bool:
        """True when ``max_attempts`` delays were handed out."""
        return self.max_attempts is not None and self._attempts >= self.max_attempts

    def peek_base(self) -> float:
        """The un-jittered base of the next delay."""
        return self._base

    def reset(self) -> None:
        """Start again from ``initial`` with a fresh attempt count."""
        self._attempts = 0
        self._base = self.initial

    def __iter__(self) -> Backoff:
        return self

    def __next__(self) -> float:
        if self.exhausted:
            raise StopIteration
        base = self._base
        self._attempts += 1
        # Multiply step by step (never multiplier**n), so huge attempt counts cannot overflow.
        self._base = min(self.maximum, base * self.multiplier)
        if self.jitter == "full":
            return base * self.rng.random()
        if self.jitter == "equal":
            half = base / 2
            return half + half * self.rng.random()
        return base
