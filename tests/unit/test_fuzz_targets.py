"""The fuzz targets (fuzz/targets.py) run over their seed corpus and its truncations and
bit flips with only streamwire errors — so ``make fuzz`` starts from working harnesses."""

from __future__ import annotations

import pytest

from fuzz.targets import TARGETS, check, seeds


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
