"""The fuzz targets (fuzz/targets.py) run over their seed corpus and its truncations and
bit flips with only streamwire errors — so ``make fuzz`` starts from working harnesses."""

from __future__ import annotations

import pytest

from fuzz.targets import TARGETS, check, seeds
from streamwire.transport.h2machine import ConnectionEnded, Messages, StreamEnded


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_target_accepts_its_seed_corpus_and_mutations(target: str) -> None:
    corpus = seeds(target)
    assert corpus, f"no seed vectors for {target}"
    for seed in corpus:
        check(target, seed)
        for cut in range(0, len(seed), max(1, len(seed) // 16)):
            check(target, seed[:cut])
        flipped = bytearray(seed)
        for i in range(0, len(flipped), 3):
            flipped[i] ^= 0x5A
        check(target, bytes(flipped))


def test_h2_machine_seeds_are_served_calls() -> None:
    """The HTTP/2 seeds (built in code) are responses the machine takes, not noise it refuses
    at once: calls get their messages and status, GOAWAYs and closes end the connection."""
    events: list[object] = []
    for seed in seeds("h2-machine"):
        outcome = TARGETS["h2-machine"](seed)
        assert isinstance(outcome, list)
        events += outcome
    assert any(isinstance(e, Messages) and e.messages == [b"abc"] for e in events)
    assert any(isinstance(e, StreamEnded) and e.ended.code == 0 for e in events)
    ended = [e for e in events if isinstance(e, ConnectionEnded)]
    assert any(e.too_many_pings for e in ended)
    assert any(e.not_http2 for e in ended)
