"""``make test-faults`` runs the fault workloads in groups at once (``tests/faults/groups.py``):
together the groups collect every test of ``tests/faults``, and no test twice."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

from tests.faults.groups import GROUPS


def _collected(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "STREAMWIRE_FAULT_SEEDS": "2"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_the_groups_together_run_every_fault_test_once() -> None:
    everything = _collected("tests/faults")
    assert everything, "tests/faults collected nothing"
    by_group = Counter(test for args in GROUPS.values() for test in _collected(*args))
    assert sorted(by_group) == sorted(everything)
    assert [test for test, times in by_group.items() if times > 1] == []
