"""The streamwire command line: parsing, input formats, one-line errors."""

from __future__ import annotations

import io

import pytest

from streamwire import cli
from streamwire.errors import StreamwireError


def test_lines_and_length_delimited_input() -> None:
    assert cli._read_messages(io.BytesIO(b"a\nbb\n"), False) == [b"a", b"bb"]
    data = (1).to_bytes(4, "big") + b"x" + (0).to_bytes(4, "big") + (3).to_bytes(4, "big") + b"y\nz"
    assert cli._read_messages(io.BytesIO(data), True) == [b"x", b"", b"y\nz"]
    with pytest.raises(StreamwireError, match="truncated"):
        cli._read_messages(io.BytesIO(b"\x00\x00\x00\x05ab"), True)
    with pytest.raises(StreamwireError, match="truncated"):
        cli._read_messages(io.BytesIO(b"\x00\x00"), True)


def test_bad_url_prints_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["consume", "kafka://localhost", "s"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("streamwire: error: unknown URL scheme")
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_demo_reports_unreachable_brokers(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        [
            "demo",
            "--rabbitmq",
            "rabbitmq-stream://guest:guest@127.0.0.1:1/",
            "--liftbridge",
            "liftbridge://127.0.0.1:1",
            "--iggy",
            "iggy://127.0.0.1:1",
            "--timeout",
            "2",
        ]
    )
    out = capsys.readouterr()
    assert code == 1
    assert "unavailable" in out.out
    assert "no broker was reachable" in out.err


def test_demo_refuses_unknown_brokers(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--brokers", "kafka"]) == 2
    assert "unknown broker(s) for --brokers: kafka" in capsys.readouterr().err


def test_usage_error_exits_2() -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["frobnicate"])
    assert info.value.code == 2
