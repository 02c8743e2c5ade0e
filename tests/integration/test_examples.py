"""Every example in examples/ runs against the harness brokers and prints what it should."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.brokers import require

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(example: str, url: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / example), url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_rabbitmq_quickstart() -> None:
    lines = run("rabbitmq_quickstart.py", require("rabbitmq").url)
    assert lines[0] == "stored, publishing id 1"
    assert lines[1].startswith("0 b'order #1' b'customer-7' {'qty': HeaderValue.int64(3)}")


def test_rabbitmq_super_stream() -> None:
    lines = run("rabbitmq_super_stream.py", require("rabbitmq").url)
    assert len(lines) == 4
    assert {line.split(": ")[1] for line in lines} == {
        f"invoice for {c}" for c in ("alice", "bob", "carol", "dave")
    }


def test_rabbitmq_filtering_and_compression() -> None:
    lines = run("rabbitmq_filtering_and_compression.py", require("rabbitmq").url)
    assert lines == ["eu orders: 2", "log batches stored, last publishing id 4"]
