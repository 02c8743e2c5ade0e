"""The results section docs/benchmarks.md opens with, from a run's JSON reports:
``python -m bench.page RUN.json [SPARK_JVM.json]``.

It prints Markdown: the run's facts (when, which core, which Iggy server), the headline plot
and its six-column table (``bench.headline.summary_table``), the legend, every peer with
its version, call, batch and options (``bench.headline.PEER_SETUPS``), and, given the
report of ``python -m bench --spark-jvm``, the Spark side-by-side with the JVM connector.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench import spark_jvm
from bench.headline import PEER_SETUPS, headline, summary_table

__all__ = ("LEGEND", "main", "results_section")

LEGEND = """\
How to read it: each row is one of streamwire's calls, held against the fastest other
client measured for the same work in the same run. **Rate ratio** is streamwire's rate over
the peer's, the median of the rounds' own ratios, with the lowest and highest round in
brackets (the whiskers of the plot); above 1, streamwire is faster. **CPU ratio** is the
peer's client CPU per message over streamwire's; above 1, streamwire spends less (– where a
peer runs in a process whose CPU is not measured). A ratio in **bold** misses its goal (at
least 1x a peer; at least 0.9x the raw ceiling, which is not a client)."""


def _facts(report: dict[str, Any], iggy_server: str | None) -> str:
    rounds = report.get("rounds", "?")
    machine = report.get("machine", {})
    iggy = report.get("iggy", {})
    server = (
        "the conformance double (a Python server: client cost only)"
        if iggy.get("double", True)
        else f"a real Iggy server{f', {iggy_server}' if iggy_server else ''}"
    )
    return (
        f"{report.get('when', '?')}: `python -m bench --rounds {rounds}`, Python "
        f"{machine.get('python', '?')}, {machine.get('cpus', '?')} cores shared with the "
        f"brokers, {report.get('codec', '?')}. Iggy: {server}."
    )


def _clients(report: dict[str, Any]) -> set[str]:
    """Every client a run measured (RabbitMQ's per message size, the others per direction)."""
    found: set[str] = set()
    for broker in ("rabbitmq", "liftbridge", "iggy"):
        part = report.get(broker) or {}
        sections = part.values() if broker == "rabbitmq" else [part]
        for section in sections:
            for direction in ("publish", "consume", "send", "poll"):
                clients = section.get(direction) if isinstance(section, dict) else None
                if isinstance(clients, dict):
                    found.update(clients)
    return found


def results_section(
    report: dict[str, Any], jvm: dict[str, Any] | None = None, iggy_server: str | None = None
) -> str:
    """The Markdown of the results section (see the module notes)."""
    rows = headline(report)
    used = sorted(_clients(report) & set(PEER_SETUPS))
    peers = "\n".join(f"* **{name}**: {PEER_SETUPS[name]}." for name in used)
    parts = [
        _facts(report, iggy_server),
        "![Each path against its fastest peer](img/bench-headline.png)",
        summary_table(rows),
        LEGEND,
        f"The peers measured, each at its documented defaults:\n\n{peers}",
    ]
    if jvm is not None:
        result = jvm["spark_jvm"]
        parts.append(
            f"**Spark, against the JVM connector** ({jvm.get('when', '?')}: `python -m bench "
            f"--spark-jvm`, {result['rows']:,} rows, `{result['master']}`, one session, "
            f"Sparkling Rabbit's `{result['jar']}` built from its sources outside this "
            "repository). Rate ratio: streamwire over Sparkling Rabbit; CPU per row counts "
            "the JVM and the Python workers, not the broker.\n\n" + spark_jvm.table(result)
        )
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.page")
    parser.add_argument("run", type=Path, help="a python -m bench JSON report")
    parser.add_argument("spark_jvm", type=Path, nargs="?", help="a --spark-jvm JSON report")
    parser.add_argument("--iggy-server", help="the Iggy server's version and commit, as shown")
    args = parser.parse_args(argv)
    report = json.loads(args.run.read_text(encoding="utf-8"))
    jvm = json.loads(args.spark_jvm.read_text(encoding="utf-8")) if args.spark_jvm else None
    print(results_section(report, jvm, args.iggy_server))
    return 0


if __name__ == "__main__":
    sys.exit(main())
