"""Every example in examples/ runs against the harness brokers and prints what it should."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.brokers import require

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_rabbitmq_quickstart() -> None:
    broker = require("rabbitmq")
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "rabbitmq_quickstart.py"), broker.url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "stored, publishing id 1"
    assert lines[1].startswith("0 b'order #1' b'customer-7' {'qty': HeaderValue.int64(3)}")
