"""``make fuzz``: every target for a bounded time, each seeded from the golden vectors.

    python fuzz/run.py [--seconds 30] [TARGET ...]

Corpora grow under fuzz/corpus-work/<target> (git-ignored). Exits non-zero if any target
found a crash; libFuzzer leaves the input as crash-* in the working directory.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fuzz.targets import TARGETS, seeds  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("targets", nargs="*", default=sorted(TARGETS))
    args = parser.parse_args()
    failed = []
    for target in args.targets:
        corpus = HERE / "corpus-work" / target
        corpus.mkdir(parents=True, exist_ok=True)
        for i, seed in enumerate(seeds(target)):
            (corpus / f"seed-{i:03d}").write_bytes(seed)
        print(f"== {target}: {args.seconds} s", flush=True)
        result = subprocess.run(
            [
                sys.executable,
                str(HERE / "harness.py"),
                target,
                f"-max_total_time={args.seconds}",
                "-rss_limit_mb=2048",
                "-timeout=5",
                str(corpus),
            ],
            check=False,
            timeout=args.seconds + 120,
        )
        if result.returncode != 0:
            failed.append(target)
    print("fuzz:", "crashes in " + ", ".join(failed) if failed else "no crashes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
