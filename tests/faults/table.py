"""``python -m tests.faults.table DIR``: the results table of a ``make test-faults`` run (the
JSON reports ``test_histories.py`` wrote to ``STREAMWIRE_FAULT_RESULTS=DIR``), as Markdown:
one row per broker and fault class, summed over the seeds."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def table(rows: list[dict[str, Any]]) -> str:
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        cells.setdefault((row["lane"], row["fault"]), []).append(row)
    lines = [
        "| broker | fault | runs | acknowledged | lost | duplicated | order | unexpected "
        "| resume skips/repeats | recovery after heal (max) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (lane, fault), runs in sorted(cells.items()):
        recovered = [s for r in runs for s in r["recovery"].values() if s is not None]
        never = sum(1 for r in runs for s in r["recovery"].values() if s is None)
        duplicated = sum(n - 1 for r in runs for n in r["duplicated"].values())
        resumes = sum(len(r["resume_skips"]) + len(r["resume_repeats"]) for r in runs)
        recovery = f"{max(recovered):.2f} s" if recovered else "-"
        if never:
            recovery += f" ({never} never)"
        lines.append(
            f"| {lane} | {fault} | {len(runs)} | {sum(r['acked'] for r in runs)} "
            f"| {sum(len(r['lost']) for r in runs)} | {duplicated} "
            f"| {sum(len(r['order']) for r in runs)} | {sum(len(r['unexpected']) for r in runs)} "
            f"| {resumes} | {recovery} |"
        )
    return "\n".join(lines)


def print_reports(
    argv: list[str],
    prog: str,
    pattern: str,
    render: Callable[[list[dict[str, Any]]], str],
    *,
    skip: str | None = None,
) -> int:
    """``python -m <prog> DIR``: the JSON reports in DIR matching ``pattern`` (less those
    whose name starts with ``skip``), rendered."""
    if len(argv) != 1:
        print(f"usage: python -m {prog} DIR", file=sys.stderr)
        return 2
    files = sorted(
        f for f in Path(argv[0]).glob(pattern) if skip is None or not f.name.startswith(skip)
    )
    print(render([json.loads(f.read_text(encoding="utf-8")) for f in files]))
    return 0


def main(argv: list[str]) -> int:
    # the Spark jobs under the same faults write theirs beside (``python -m tests.spark.table``)
    return print_reports(argv, "tests.faults.table", "*.json", table, skip="spark-")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
