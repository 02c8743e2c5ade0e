"""The env and unavailability files the harness writes, as tests/brokers.py reads them."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pytest

from integration.harness import envfile
from tests import brokers


def test_write_env_puts_the_name_first_and_keeps_the_order(tmp_path: Path) -> None:
    (tmp_path / "nats.unavailable").write_text("old reason\n", encoding="utf-8")
    path = envfile.write_env(
        tmp_path,
        "nats",
        {"HOST": "127.0.0.1", "PORT": "4222", "URL": "nats://127.0.0.1:4222"},
        now=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    assert path.read_text(encoding="utf-8") == (
        "# written by integration/brokers.sh at 2026-01-02T03:04:05Z\n"
        "NAME=nats\nHOST=127.0.0.1\nPORT=4222\nURL=nats://127.0.0.1:4222\n"
    )
    assert not (tmp_path / "nats.unavailable").exists()
    assert not list(tmp_path.glob("*.tmp"))


def test_line_breaks_in_values_become_spaces(tmp_path: Path) -> None:
    envfile.write_env(tmp_path, "x", {"VERSION": "4.3\r\n6", "PORT": "1"})
    assert envfile.read_env(tmp_path / "x.env")["VERSION"] == "4.3  6"


@pytest.mark.parametrize("key", ["port", "NAME", "A-B", "", "1X"])
def test_bad_keys_are_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="key"):
        envfile.write_env(tmp_path, "x", {key: "1"})


def test_the_tests_read_what_the_harness_writes(tmp_path: Path) -> None:
    envfile.write_env(
        tmp_path,
        "rabbitmq",
        {
            "HOST": "127.0.0.1",
            "PORT": "17552",
            "PORT_STREAM": "17552",
            "PORT_AMQP": "17672",
            "URL": "rabbitmq-stream://guest:guest@127.0.0.1:17552/",
            "VERSION": "4.3.6",
            "NODE": "h2@localhost",
        },
    )
    values = brokers.read_env(tmp_path / "rabbitmq.env")
    assert values == envfile.read_env(tmp_path / "rabbitmq.env")
    info = brokers._to_info("rabbitmq", values)
    assert info.ports == {"main": 17552, "stream": 17552, "amqp": 17672}
    assert info.version == "4.3.6"
    assert info.extra == {"NODE": "h2@localhost"}


def test_parse_facts() -> None:
    assert envfile.parse_facts(["A=1", "B=x=y", "C="]) == {"A": "1", "B": "x=y", "C": ""}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        envfile.parse_facts(["novalue"])


def test_mark_unavailable_records_the_reason_and_the_log_tails(tmp_path: Path) -> None:
    (tmp_path / "liftbridge.env").write_text("NAME=liftbridge\n", encoding="utf-8")
    log = tmp_path / "lb.log"
    log.write_text("".join(f"line {i}\n" for i in range(40)), encoding="utf-8")
    empty = tmp_path / "empty.log"
    empty.write_text("", encoding="utf-8")
    out = io.StringIO()
    path = envfile.mark_unavailable(
        tmp_path, "liftbridge", "it broke", [log, empty, tmp_path / "missing.log"], stream=out
    )
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == "it broke"
    assert lines[1] == f"--- last lines of {log} ---"
    assert lines[2:] == [f"line {i}" for i in range(25, 40)]
    assert not (tmp_path / "liftbridge.env").exists()
    said = out.getvalue().splitlines()
    assert said[0] == "[brokers] liftbridge: UNAVAILABLE: it broke"
    assert said[-1] == "    line 39"


def test_mark_unavailable_without_logs(tmp_path: Path) -> None:
    out = io.StringIO()
    envfile.mark_unavailable(tmp_path, "iggy", "no server", stream=out)
    assert (tmp_path / "iggy.unavailable").read_text(encoding="utf-8") == "no server\n"
    assert out.getvalue() == "[brokers] iggy: UNAVAILABLE: no server\n"
