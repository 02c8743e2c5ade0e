"""Backoff: bounds, cap, jitter ranges, attempts and reset, as properties."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamwire.errors import ConfigurationError
from streamwire.transport import Backoff, Jitter

initials = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)
multipliers = st.floats(min_value=1.0, max_value=10.0, allow_nan=False)
JITTERS: list[Jitter] = ["full", "equal", None]
jitters = st.sampled_from(JITTERS)


@st.composite
def backoffs(draw: st.DrawFn) -> Backoff:
    initial = draw(initials)
    maximum = initial + draw(st.floats(min_value=0.0, max_value=60.0, allow_nan=False))
    return Backoff(
        initial=initial,
        maximum=maximum,
        multiplier=draw(multipliers),
        jitter=draw(jitters),
        rng=random.Random(draw(st.integers())),
    )


def bases(backoff: Backoff, n: int) -> list[float]:
    result = []
    for _ in range(n):
        result.append(backoff.peek_base())
        next(backoff)
    return result


@given(backoffs(), st.integers(min_value=1, max_value=200))
def test_base_is_monotone_and_capped(backoff: Backoff, n: int) -> None:
    seen = bases(backoff, n)
    assert seen[0] == backoff.initial
    assert all(a <= b for a, b in itertools.pairwise(seen))
    assert all(b <= backoff.maximum for b in seen)


@given(backoffs(), st.integers(min_value=1, max_value=200))
def test_delays_stay_within_their_jitter_range(backoff: Backoff, n: int) -> None:
    for _ in range(n):
        base = backoff.peek_base()
        delay = next(backoff)
        assert 0.0 <= delay <= backoff.maximum
        if backoff.jitter == "full":
            assert 0.0 <= delay <= base
        elif backoff.jitter == "equal":
            assert base / 2 <= delay <= base
        else:
            assert delay == base


@given(initials, multipliers, jitters, st.integers(min_value=0, max_value=50), st.integers())
def test_deterministic_with_a_seeded_rng_and_reset_restarts(
    initial: float, multiplier: float, jitter: Jitter, attempts: int, seed: int
) -> None:
    def make() -> Backoff:
        return Backoff(
            initial=initial,
            maximum=initial * 10 + 1,
            multiplier=multiplier,
            jitter=jitter,
            max_attempts=attempts,
            rng=random.Random(seed),
        )

    first, second = make(), make()
    delays = list(first)
    assert delays == list(second)
    assert len(delays) == attempts
    assert first.exhausted
    assert first.attempts == attempts
    first.reset()
    assert first.attempts == 0
    assert first.peek_base() == initial
    assert len(list(first)) == attempts


@given(st.integers(min_value=0, max_value=100_000))
def test_huge_attempt_counts_do_not_overflow(n: int) -> None:
    backoff = Backoff(initial=1.0, maximum=30.0, multiplier=10.0, jitter=None)
    for _ in range(min(n, 2000)):
        next(backoff)
    assert next(backoff) <= 30.0


def test_without_jitter_the_sequence_is_exact() -> None:
    backoff = Backoff(initial=0.1, maximum=1.0, multiplier=2.0, jitter=None, max_attempts=6)
    assert list(backoff) == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    with pytest.raises(StopIteration):
        next(backoff)


def test_default_rng_is_used_when_none_given() -> None:
    delays = list(itertools.islice(Backoff(), 20))
    assert all(0.0 <= d <= 10.0 for d in delays)
    assert "jitter='full'" in repr(Backoff())


class FixedRandom:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


def test_any_random_source_fits() -> None:
    assert next(Backoff(initial=2.0, jitter="full", rng=FixedRandom(0.25))) == 0.5
    assert next(Backoff(initial=2.0, jitter="equal", rng=FixedRandom(0.5))) == 1.5


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial": -1.0},
        {"initial": float("nan")},
        {"initial": 5.0, "maximum": 1.0},
        {"maximum": float("inf")},
        {"multiplier": 0.5},
        {"jitter": "half"},
        {"max_attempts": -1},
    ],
)
def test_invalid_settings(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        Backoff(**kwargs)  # type: ignore[arg-type]
