"""``python -m tests.spark.table DIR``: the table of a Spark fault run (the JSON reports
``tests/spark/test_faults.py`` wrote to ``STREAMWIRE_FAULT_RESULTS=DIR``), as Markdown: one
row per fault and lane. A report is written only once the query succeeded, so each row
is a query that exited 0; a query that failed shows as the test's failure, not here."""

from __future__ import annotations

import sys
from typing import Any

from tests.faults.table import print_reports


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
    return print_reports(argv, "tests.spark.table", "spark-*.json", table)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
