"""``python -m tests.spark.table``: the Spark fault runs' reports summed per side, fault and
lane (``make test-faults`` prints it after several runs of each)."""

from __future__ import annotations

from tests.spark.table import table


def _run(
    side: str, fault: str, lane: str, stored: int, lost: int = 0, dup: int = 0
) -> dict[str, object]:
    return {
        "side": side,
        "fault": fault,
        "lane": lane,
        "rows": 100,
        "stored": stored,
        "lost": lost,
        "duplicated": dup,
    }


def test_runs_of_a_cell_are_summed_and_each_cell_is_one_row() -> None:
    rows = [
        _run("sink", "cut", "rabbitmq", 100),
        _run("sink", "cut", "rabbitmq", 101, dup=1),
        _run("source", "cut", "rabbitmq", 99, lost=1),
        _run("sink", "kill", "iggy", 100),
    ]
    lines = table(rows).splitlines()
    assert lines[2:] == [
        "| sink | cut | rabbitmq | 2 | 200 | 201 | 0 | 1 |",
        "| sink | kill | iggy | 1 | 100 | 100 | 0 | 0 |",
        "| source | cut | rabbitmq | 1 | 100 | 99 | 1 | 0 |",
    ]


def test_a_report_without_a_side_is_the_sinks() -> None:
    """Reports written before the source had any: the sink's."""
    old = _run("sink", "stall", "liftbridge", 100)
    del old["side"]
    assert table([old]).splitlines()[2] == "| sink | stall | liftbridge | 1 | 100 | 100 | 0 | 0 |"
