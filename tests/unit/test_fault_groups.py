"""``make test-faults`` runs the fault workloads in groups at once (``tests/faults/groups.py``):
together the groups collect every test of ``tests/faults``, and no test twice; the Spark
group after them collects every test of ``tests/spark/test_faults.py``, every seed; a round
of seeds starts where it is asked to."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.faults.groups import AFTER, GROUPS


def _collected(*args: str, seeds: int = 2, first: int = 0) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *args],
        capture_output=True,
        text=True,
        check=False,
        env={
            **os.environ,
            "STREAMWIRE_FAULT_SEEDS": str(seeds),
            "STREAMWIRE_FAULT_FIRST_SEED": str(first),
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_the_groups_together_run_every_fault_test_once() -> None:
    with ThreadPoolExecutor() as pool:  # the whole and each group, collected at once
        whole = pool.submit(_collected, "tests/faults")
        groups = list(pool.map(lambda args: _collected(*args), GROUPS.values()))
    everything = whole.result()
    assert everything, "tests/faults collected nothing"
    by_group = Counter(test for tests in groups for test in tests)
    assert sorted(by_group) == sorted(everything)
    assert [test for test, times in by_group.items() if times > 1] == []


def test_the_spark_group_runs_every_seed_of_every_spark_fault_test() -> None:
    pytest.importorskip("pyspark")  # the Spark tests collect only where it is installed
    assert AFTER == {"spark": ["tests/spark/test_faults.py"]}
    collected = _collected(*AFTER["spark"], seeds=2)
    assert collected, "tests/spark/test_faults.py collected nothing"
    # each test once per seed: its id ends in the seed, 0 or 1, and no other way
    runs = Counter(re.sub(r"[-\[]?[01]\]$", "]", test) for test in collected)
    assert set(runs.values()) == {2}, runs


def test_a_round_of_seeds_starts_at_the_first_seed_asked_for() -> None:
    """``make test-faults SEEDS=2 FIRST_SEED=3``: seeds 3 and 4, so that the reports of
    rounds run one after another (named by seed) add up in one directory."""
    collected = _collected("tests/faults/test_histories.py", seeds=2, first=3)
    seeds = Counter(re.findall(r"(\d+)\]$", test)[0] for test in collected)
    assert sorted(seeds) == ["3", "4"], seeds
    assert seeds["3"] == seeds["4"], seeds
