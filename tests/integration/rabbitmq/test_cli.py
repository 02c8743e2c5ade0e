"""The CLI against the real broker: publish from stdin, consume to stdout, demo."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid

import pytest

import streamwire.rabbitmq as rmq
from tests.brokers import BrokerInfo

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq]


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "streamwire.cli", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_publish_then_consume_with_offsets(broker: BrokerInfo) -> None:
    stream = f"sw-cli-{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        async with await rmq.connect(broker.url) as c:
            await c.create_stream(stream)

    asyncio.run(create())
    pub = run("publish", broker.url, stream, stdin="alpha\nbeta\ncafé\n".encode())
    assert pub.returncode == 0, pub.stderr
    con = run("consume", broker.url, stream, "--from", "1", "--count", "2", "--with-offsets")
    assert con.returncode == 0, con.stderr
    assert con.stdout == b"1\tbeta\n2\tcaf\xc3\xa9\n"
    missing = run("consume", broker.url, "sw-cli-missing", "--count", "1")
    assert missing.returncode == 2
    assert missing.stderr.decode().startswith("streamwire: error:")


def test_demo_round_trip(broker: BrokerInfo) -> None:
    result = run("demo", "--brokers", "rabbitmq", "--rabbitmq", broker.url, "--count", "200")
    assert result.returncode == 0, result.stdout + result.stderr
    row = next(line for line in result.stdout.decode().splitlines() if line.startswith("rabbitmq"))
    assert " ok " in row
    assert "200" in row


def test_bench_prints_progress_and_a_table(broker: BrokerInfo) -> None:
    stream = f"sw-cli-bench-{uuid.uuid4().hex[:8]}"
    result = run("bench", broker.url, stream, "--count", "3000", "--batch", "500", "--progress")
    assert result.returncode == 0, result.stderr
    err = result.stderr.decode()
    assert "publish  [##############################]      3,000/3,000" in err
    assert "consume  [##############################]      3,000/3,000" in err
    lines = result.stdout.decode().splitlines()
    assert lines[0].split() == ["direction", "messages", "bytes", "seconds", "msg/s", "MB/s"]
    assert lines[1].split()[:3] == ["publish", "3,000", "100"]
    assert lines[2].split()[:2] == ["consume", "3,000"]

    async def drop() -> None:
        async with await rmq.connect(broker.url) as c:
            await c.delete_stream(stream)

    asyncio.run(drop())
