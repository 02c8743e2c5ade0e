"""Every example in examples/ runs against the harness brokers and prints what it should."""

from __future__ import annotations

import ast
import asyncio
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import streamwire
from tests.brokers import require
from tests.iggy_lanes import LANES, lane

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run_args(example: str, *args: str, timeout: float = 120) -> list[str]:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / example), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def run(example: str, url: str) -> list[str]:
    return run_args(example, url)


def test_rabbitmq_quickstart() -> None:
    lines = run("rabbitmq_quickstart.py", require("rabbitmq").url)
    assert lines[0] == "stored, publishing id 1"
    assert lines[1].startswith("0 b'order #1' b'customer-7' {'qty': 3}")


def test_rabbitmq_super_stream() -> None:
    lines = run("rabbitmq_super_stream.py", require("rabbitmq").url)
    assert len(lines) == 4
    assert {line.split(": ")[1] for line in lines} == {
        f"invoice for {c}" for c in ("alice", "bob", "carol", "dave")
    }


def test_rabbitmq_filtering_and_compression() -> None:
    lines = run("rabbitmq_filtering_and_compression.py", require("rabbitmq").url)
    assert lines == ["eu orders: 2", "log batches stored, last publishing id 4"]


def _liftbridge_url() -> str:
    broker, nats = require("liftbridge"), require("nats")
    return f"liftbridge://{broker.host}:{broker.port}?nats=nats://{nats.host}:{nats.port}"


def _without_docstring(source: str) -> str:
    module = ast.parse(source)
    docstring = module.body[0]
    assert isinstance(docstring, ast.Expr), "the example starts with its docstring"
    lines = source.splitlines()
    return "\n".join(lines[docstring.end_lineno :]).strip()


def test_the_readme_shows_the_plugin_example_as_it_is() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## 4. Test your application", 1)[1]
    shown = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert shown is not None
    example = (EXAMPLES / "app_tests" / "test_orders.py").read_text(encoding="utf-8")
    assert shown.group(1).strip() == _without_docstring(example)


def test_the_readme_shows_the_first_message_example_as_it_is() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## 3. First message", 1)[1]
    shown = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert shown is not None
    example = (EXAMPLES / "first_message.py").read_text(encoding="utf-8")
    assert shown.group(1).strip() == _without_docstring(example)


@asynccontextmanager
async def _broker_url(broker: str) -> AsyncIterator[str]:
    if broker == "rabbitmq":
        yield require("rabbitmq").url
    elif broker == "liftbridge":
        yield _liftbridge_url()
    else:  # Iggy: the double in both modes, and a real server when the harness has one
        async with lane(broker.removeprefix("iggy-")) as found:
            yield found.url


@pytest.mark.parametrize("broker", ["rabbitmq", "liftbridge", *(f"iggy-{name}" for name in LANES)])
async def test_first_message(broker: str) -> None:
    async with _broker_url(broker) as url:
        await _first_message(url)


async def _first_message(url: str) -> None:
    async with streamwire.connect(url, timeout=10) as client:
        await client.delete_stream("hello", missing_ok=True)
    try:
        (line,) = await asyncio.to_thread(run, "first_message.py", url)
        offset, text, headers = line.split(" ", 1)[0], line[2:19], line[20:]
        assert (offset, text) == ("0", "hello, streamwire")
        # typed values come back as they went; Liftbridge does not keep the headers' order
        assert ast.literal_eval(headers) == {"lang": "en", "n": 1}
    finally:
        async with streamwire.connect(url, timeout=10) as client:
            await client.delete_stream("hello", missing_ok=True)


@pytest.mark.parametrize("broker", ["rabbitmq", "liftbridge"])
def test_produce_then_consume_resumes_after_the_commit(broker: str) -> None:
    url = require("rabbitmq").url if broker == "rabbitmq" else _liftbridge_url()
    stream = f"example-{uuid.uuid4().hex[:8]}"
    assert run_args("produce.py", url, stream, "5") == [f"published 5 messages to {stream}"]
    first = run_args("consume.py", url, stream, "reader", "first")
    assert first[-1] == "consumed 5 messages"
    assert first[0].split(maxsplit=2)[2] == "event 0 {'seq': 0}"
    assert run_args("produce.py", url, stream, "2")[-1].startswith("published 2")
    again = run_args("consume.py", url, stream, "reader", "next")  # resumes after the commit
    assert again[-1] == "consumed 2 messages"


async def test_produce_and_consume_run_with_no_arguments() -> None:
    broker = require("rabbitmq")
    if (broker.host, broker.port) not in {("127.0.0.1", 5552), ("localhost", 5552)}:
        pytest.skip(f"the examples default to localhost:5552; the broker is at {broker.host}")
    async with streamwire.connect(broker.url, timeout=10) as client:
        await client.delete_stream("events", missing_ok=True)
    try:
        assert run_args("produce.py") == ["published 10 messages to events"]
        lines = run_args("consume.py")
        assert lines[-1] == "consumed 10 messages"
        assert lines[0] == "0 b'user-0' event 0 {'seq': 0}"
        assert run_args("consume.py", broker.url, "events", "reader", "next") == [
            "consumed 0 messages"  # resumes after the first run's commit
        ]
    finally:
        async with streamwire.connect(broker.url, timeout=10) as client:
            await client.delete_stream("events", missing_ok=True)


def test_every_example_is_listed_in_the_examples_readme() -> None:
    listed = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for example in sorted(EXAMPLES.glob("*.py")):
        assert f"[{example.name}]({example.name})" in listed, example.name


@pytest.mark.one_core  # Spark runs once, with the native core (docs/development.md)
def test_spark_job() -> None:
    pytest.importorskip("pyspark")
    url = require("rabbitmq").url
    stream = f"example-spark-{uuid.uuid4().hex[:8]}"
    lines = run_args("spark_sink.py", url, stream, timeout=600)
    assert lines[0].startswith("batch 0: BatchMetrics(")
    assert lines[-1] == "rows in the stream: 100"  # the replayed batch stored nothing twice


def test_application_test_with_the_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMWIRE_RABBITMQ_URL", require("rabbitmq").url)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(EXAMPLES / "app_tests"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
