"""``streamwire publish`` streams its input: messages go out as lines arrive on a pipe that
stays open (``tail -f app.log | streamwire publish``), confirmed at the end; input cut into
messages the same way however it is chunked; ``-v``/``--log-level`` log to stderr. Against
the Iggy conformance double on loopback (no broker needed)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import streamwire
from streamwire import cli
from streamwire.errors import StreamwireError
from tests.iggy_double import ThreadedIggyDouble

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def double() -> Iterator[ThreadedIggyDouble]:
    with ThreadedIggyDouble() as server:
        yield server


def stored(url: str, stream: str) -> list[bytes]:
    async def read() -> list[bytes]:
        async with streamwire.connect(url, timeout=5) as client:
            try:
                consumer = client.consumer(stream, offset="first")
                async with consumer:
                    return [m.value for m in await consumer.next_batch(1000, timeout=0.5)]
            except streamwire.StreamNotFoundError:  # not created yet
                return []

    return asyncio.run(read())


def publisher(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen(
        [sys.executable, "-m", "streamwire", *args],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def test_lines_go_out_while_the_pipe_stays_open(double: ThreadedIggyDouble) -> None:
    """Before, publish read all of stdin first: a pipe that stays open sent nothing."""
    proc = publisher("--log-level", "INFO", "publish", "--create", "--flush-every", "2",
                     double.url, "logs/app")  # fmt: skip
    assert proc.stdin is not None
    assert proc.stderr is not None
    try:
        proc.stdin.write(b"first\nsecond\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        while stored(double.url, "logs/app") != [b"first", b"second"]:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "nothing arrived while the pipe was open"
            time.sleep(0.1)
        proc.stdin.write(b"third\r\nfourth")  # a CRLF line and a last line without newline
        proc.stdin.close()
        assert proc.wait(30) == 0
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stderr.close()
    assert stored(double.url, "logs/app") == [b"first", b"second", b"third", b"fourth"]
    assert "published 4 messages to logs/app" in err
    assert "INFO streamwire.cli 2 messages confirmed" in err  # --log-level, --flush-every


@given(st.lists(st.binary(max_size=12), max_size=8), st.lists(st.integers(1, 7), max_size=30))
def test_records_come_out_the_same_however_the_input_is_chunked(
    values: list[bytes], cuts: list[int]
) -> None:
    data = b"".join(len(v).to_bytes(4, "big") + v for v in values)
    records, out, pos = cli._Records(delimited=True), [], 0
    for n in cuts:
        out += records.feed(data[pos : pos + n])
        pos += n
    out += records.feed(data[pos:]) + records.end()
    assert out == values
    lines = [v.replace(b"\n", b"").removesuffix(b"\r") for v in values]
    for newline in (b"\n", b"\r\n"):
        text = b"".join(line + newline for line in lines)
        records, out, pos = cli._Records(delimited=False), [], 0
        for n in cuts:
            out += records.feed(text[pos : pos + n])
            pos += n
        assert out + records.feed(text[pos:]) + records.end() == lines


def test_a_last_line_without_its_newline_counts() -> None:
    records = cli._Records(delimited=False)
    assert records.feed(b"a\r\nb") == [b"a"]
    assert records.end() == [b"b"]
    assert records.end() == []


def test_a_cut_record_at_the_end_is_an_error() -> None:
    records = cli._Records(delimited=True)
    assert records.feed(b"\x00\x00\x00\x05ab") == []
    with pytest.raises(StreamwireError, match="truncated message"):
        records.end()


def test_verbose_flags_set_the_log_level() -> None:
    parsed = cli._parser().parse_args(["-vv", "consume", "iggy://h", "s"])
    assert parsed.verbose == 2
    parsed = cli._parser().parse_args(["--log-level", "WARNING", "consume", "iggy://h", "s"])
    assert parsed.log_level == "WARNING"
