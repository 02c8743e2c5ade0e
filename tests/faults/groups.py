"""``make test-faults``: the fault workloads in groups that share no broker, one pytest each,
at the same time; the exit status is the worst of theirs.

Every broker's cells (``test_histories.py``, by lane) form a group, and the clusters' partitions
(``test_partitions.py``) another: a pause or a kill in one group never reaches another's
broker, and most of a run is waiting for a fault to end, so the groups overlap instead of
queueing (a long run of 20 seeds takes under an hour instead of about three). The Spark
sink's and source's faults (``tests/spark/test_faults.py``) run after them: they pause and
kill the brokers the broker groups use. Each group's output goes to ``DIR/<group>.log``; its
reports go where ``STREAMWIRE_FAULT_RESULTS`` says.

    python -m tests.faults.groups DIR [PYTEST_ARG ...]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

__all__ = ("GROUPS", "main")

HISTORIES = "tests/faults/test_histories.py"

#: Each group's pytest arguments: the cells of one broker, or the clusters.
GROUPS: dict[str, list[str]] = {
    "rabbitmq": [HISTORIES, "-k", "rabbitmq"],
    "liftbridge": [HISTORIES, "-k", "liftbridge"],
    "iggy": [HISTORIES, "-k", "iggy"],
    "clusters": ["tests/faults/test_partitions.py"],
}
#: Groups run once the others are done, one after another: the Spark sink's and source's
#: faults pause and kill the same single-node brokers the broker groups use.
AFTER: dict[str, list[str]] = {
    "spark": ["tests/spark/test_faults.py"],
}


def _run(groups: dict[str, list[str]], out: Path, extra: list[str], started: float) -> int:
    """The groups at once; the worst exit status."""
    running: dict[str, subprocess.Popen[bytes]] = {}
    for name, args in groups.items():
        with (out / f"{name}.log").open("wb") as log:
            command = [sys.executable, "-m", "pytest", *args, *extra]
            running[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        print(f"[faults] {name}: {' '.join(command[1:])} (output: {out / name}.log)")
    worst = 0
    try:
        for name, process in running.items():
            code = process.wait()
            tail = (out / f"{name}.log").read_text(errors="replace").strip().splitlines()[-1:]
            minutes = (time.monotonic() - started) / 60
            print(f"[faults] {name}: exit {code} after {minutes:.0f} min: {' '.join(tail)}")
            worst = max(worst, code)
    finally:
        for process in running.values():
            if process.poll() is None:
                process.terminate()
                process.wait(30)
    return worst


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    extra = argv[1:]
    started = time.monotonic()
    worst = _run(GROUPS, out, extra, started)
    for name, args in AFTER.items():
        worst = max(worst, _run({name: args}, out, extra, started))
    return worst


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
