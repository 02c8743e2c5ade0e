"""The ``streamwire.testing`` pytest plugin, used the way an application's test suite would
use it: a separate pytest run (pytester, subprocess) with only the entry point installed."""

from __future__ import annotations

import pytest

from tests.brokers import require

pytestmark = pytest.mark.integration

APP_TEST = """
import pytest

@pytest.mark.asyncio
async def test_orders_round_trip(streamwire_stream):
    client, stream = await streamwire_stream("rabbitmq")
    async with client.producer(stream) as producer:
        await producer.send_and_wait(b"order", headers={"n": 1})
    async with client.consumer(stream) as consumer:
        (message,) = await consumer.next_batch(1, timeout=10)
    assert message.value == b"order"
    assert message.headers["n"].as_int() == 1

@pytest.mark.asyncio
async def test_url(streamwire_url):
    assert (await streamwire_url("rabbitmq")).startswith("rabbitmq-stream://")
"""


def test_plugin_round_trip_and_cleanup(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = require("rabbitmq")
    monkeypatch.setenv("STREAMWIRE_RABBITMQ_URL", broker.url)
    pytester.makepyfile(test_app=APP_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "ignore")
    result.assert_outcomes(passed=2)


def test_plugin_skips_with_the_reason_when_no_broker_answers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMWIRE_RABBITMQ_URL", "rabbitmq-stream://guest:guest@127.0.0.1:1/")
    pytester.makepyfile(test_app=APP_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", "-W", "ignore")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(
        ["*no rabbitmq broker at rabbitmq-stream://guest:***@127.0.0.1:1/*"]
    )
