"""The streamwire command line: parsing, input formats, one-line errors."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

import streamwire
from streamwire import _native, cli
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
    assert "docker compose up -d rabbitmq" in out.err  # and what to do about it


def test_demo_refuses_unknown_brokers(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--brokers", "kafka"]) == 2
    assert "unknown broker(s) for --brokers: kafka" in capsys.readouterr().err


def test_usage_error_exits_2() -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["frobnicate"])
    assert info.value.code == 2


class _Untouchable(io.RawIOBase):
    def readable(self) -> bool:
        return True

    def readinto(self, buffer: object) -> int:
        raise AssertionError("stdin was read before the URL was checked")


def test_publish_checks_the_url_before_reading_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(_Untouchable())))
    assert cli.main(["publish", "kafka://localhost", "s"]) == 2
    assert "unknown URL scheme 'kafka'" in capsys.readouterr().err


def test_a_runtime_error_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["consume", "rabbitmq-stream://127.0.0.1:1/", "s", "--timeout", "2"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("streamwire: error:")
    assert len(err.strip().splitlines()) == 1


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [f"streamwire {streamwire.__version__}", _native.reason]


@pytest.mark.parametrize("command", ["publish", "consume", "bench"])
def test_help_shows_url_formats_defaults_and_examples(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = capsys.readouterr().out
    for scheme in ("rabbitmq-stream://", "liftbridge://", "iggy://"):
        assert scheme in text
    assert "(default: 30.0)" in text or "(default: 10.0)" in text
    assert "seconds" in text
    assert "(default: None)" not in text


def test_top_level_help_has_examples_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    assert "examples:" in text
    assert "streamwire consume --follow" in text
    assert "0 ok, 1 runtime error, 2 usage error" in text


@pytest.mark.parametrize("bad", ["0", "-1", "x"])
def test_counts_must_be_positive(bad: str) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["consume", "rabbitmq-stream://localhost", "s", "--count", bad])
    assert info.value.code == 2


def test_python_dash_m_streamwire() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "streamwire", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines() == [
        f"streamwire {streamwire.__version__}",
        _native.reason,  # the same environment: the same choice
    ]


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["offsets", "rabbitmq-stream://h", "s"], "the following arguments are required: name"),
        (["offsets", "--set", "-1", "rabbitmq-stream://h", "s", "n"], "must be 0 or more"),
        (["offsets", "--partition", "x", "rabbitmq-stream://h", "s", "n"], "not an integer"),
    ],
)
def test_offsets_checks_its_arguments(
    args: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(args)
    assert exit_info.value.code == 2
    assert problem in capsys.readouterr().err


def test_offsets_on_an_unreachable_broker_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["offsets", "--timeout", "2", "rabbitmq-stream://127.0.0.1:9/", "s", "billing"])
    assert code == 1
    assert capsys.readouterr().err.startswith("streamwire: error:")
