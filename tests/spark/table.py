"""``python -m tests.spark.table DIR``: the table of a Spark fault run (the JSON reports
``tests/spark/test_faults.py`` wrote to ``STREAMWIRE_FAULT_RESULTS=DIR``), as Markdown: one
row per fault and lane. A report is written only once the query succeeded, so each row
is a query that exited 0; a query that failed shows as the test's failure, not here."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| fault | lane | rows written | rows in the stream | lost | duplicated |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in sorted(rows, key=lambda r: (r["fault"], r["lane"])):
        lines.append(
            f"| {row['fault']} | {row['lane']} | {row['rows']:,} | {row['stored']:,} "
            f"| {row['lost']:,} | {row['duplicated']:,} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.spark.table DIR", file=sys.stderr)
        return 2
    files = sorted(Path(argv[0]).glob("spark-*.json"))
    print(table([json.loads(f.read_text(encoding="utf-8")) for f in files]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
