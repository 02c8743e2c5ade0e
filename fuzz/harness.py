"""Run one fuzz target under atheris (coverage-guided):

    python fuzz/harness.py TARGET [libFuzzer options, e.g. -max_total_time=60 CORPUS_DIR]

Every input must return or raise a StreamwireError; anything else stops the run with the
crashing input saved by libFuzzer (add it to tests/vectors as a regression vector).
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

with atheris.instrument_imports():
    from fuzz.targets import TARGETS, check


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        raise SystemExit(f"usage: harness.py TARGET [...]; targets: {', '.join(TARGETS)}")
    target = sys.argv.pop(1)
    atheris.Setup(sys.argv, lambda data: check(target, data))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
