"""``python -m tests.spark.table DIR``: the table of a Spark fault run (the JSON reports
``tests/spark/test_faults.py`` and the Spark tests of ``tests/faults/test_partitions.py``
wrote to ``STREAMWIRE_FAULT_RESULTS=DIR``), as Markdown: one row per side (the sink's rows
stored, the source's messages read), fault and lane, over every run of it. A report is
written only once the query succeeded, so each run counted is a query that exited 0; a
query that failed shows as the test's failure, not here."""

from __future__ import annotations

import sys
from typing import Any

from tests.faults.table import print_reports


def table(rows: list[dict[str, Any]]) -> str:
    """One row per side (the sink, the source), fault and lane: the runs, and the rows
    over all of them."""
    cells: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        cells.setdefault((row.get("side", "sink"), row["fault"], row["lane"]), []).append(row)
    lines = [
        "| side | fault | lane | runs | rows written | rows stored or read | lost | duplicated |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for (side, fault, lane), runs in sorted(cells.items()):
        total = {k: sum(r[k] for r in runs) for k in ("rows", "stored", "lost", "duplicated")}
        lines.append(
            f"| {side} | {fault} | {lane} | {len(runs)} | {total['rows']:,} "
            f"| {total['stored']:,} | {total['lost']:,} | {total['duplicated']:,} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return print_reports(argv, "tests.spark.table", "spark-*.json", table)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
