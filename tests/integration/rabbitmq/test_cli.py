"""The CLI against the real broker: publish from stdin, consume to stdout, demo."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
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
    assert missing.returncode == 1  # a runtime error, not a usage error
    line = missing.stderr.decode().strip()
    assert line.startswith("streamwire: error:")
    assert "STREAM_DOES_NOT_EXIST" in line
    assert "does not exist" in line


def test_publish_create_makes_the_stream(broker: BrokerInfo) -> None:
    stream = f"sw-cli-create-{uuid.uuid4().hex[:8]}"
    refused = run("publish", broker.url, stream, stdin=b"x\n")
    assert refused.returncode == 1
    assert "STREAM_DOES_NOT_EXIST" in refused.stderr.decode()
    created = run("publish", "--create", broker.url, stream, stdin=b"one\ntwo\n")
    assert created.returncode == 0, created.stderr
    again = run("publish", "--create", broker.url, stream, stdin=b"three\n")  # exists: fine
    assert again.returncode == 0, again.stderr
    con = run("consume", broker.url, stream, "--idle", "2")
    assert con.stdout == b"one\ntwo\nthree\n"


def test_consume_follow_waits_for_new_messages_and_ctrl_c_ends_it(broker: BrokerInfo) -> None:
    stream = f"sw-cli-follow-{uuid.uuid4().hex[:8]}"
    assert run("publish", "--create", broker.url, stream, stdin=b"before\n").returncode == 0
    command = ["consume", "--follow", "--idle", "1", broker.url, stream]
    follower = subprocess.Popen(
        [sys.executable, "-m", "streamwire", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == b"before\n"
        # more than twice --idle: --follow keeps waiting
        time.sleep(2.5)
        assert follower.poll() is None
        assert run("publish", broker.url, stream, stdin=b"after\n").returncode == 0
        assert follower.stdout.readline() == b"after\n"
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, err
    assert b"stopped after 2 messages" in err
    assert b"Traceback" not in err


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
