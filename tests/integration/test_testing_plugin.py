"""The ``streamwire.testing`` pytest plugin, used the way an application's test suite would
use it: a separate pytest run (pytester, subprocess) with only the entry point installed,
running the README's example test (examples/app_tests/test_orders.py) as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.brokers import require

pytestmark = pytest.mark.integration

APP_TEST = (
    Path(__file__).resolve().parents[2] / "examples" / "app_tests" / "test_orders.py"
).read_text(encoding="utf-8")

URL_TEST = """
async def test_url(streamwire_url):
    assert (await streamwire_url("rabbitmq")).startswith("rabbitmq-stream://")
"""

UNREACHABLE = "rabbitmq-stream://guest:guest@127.0.0.1:1/"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_app=APP_TEST, test_url=URL_TEST)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "ignore", "-rsf", *args)


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_the_readme_example_passes_in_both_pytest_asyncio_modes(
    mode: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMWIRE_RABBITMQ_URL", require("rabbitmq").url)
    result = run(pytester, "-o", f"asyncio_mode={mode}")
    result.assert_outcomes(passed=2)


def test_plugin_skips_with_the_reason_when_no_broker_answers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMWIRE_RABBITMQ_URL", UNREACHABLE)
    monkeypatch.delenv("STREAMWIRE_REQUIRE", raising=False)  # .ci/run sets it
    result = run(pytester)
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(
        ["*no rabbitmq broker at rabbitmq-stream://guest:***@127.0.0.1:1/*"]
    )


def test_require_makes_a_missing_broker_fail(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMWIRE_RABBITMQ_URL", UNREACHABLE)
    result = run(pytester, "--streamwire-require")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*no rabbitmq broker at*--streamwire-require is set*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_require_from_the_environment(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMWIRE_RABBITMQ_URL", UNREACHABLE)
    monkeypatch.setenv("STREAMWIRE_REQUIRE", "1")
    run(pytester).assert_outcomes(failed=2)


def test_without_pytest_asyncio_it_says_what_to_install(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMWIRE_RABBITMQ_URL", UNREACHABLE)
    result = run(pytester, "-p", "no:asyncio")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # collection errors: nothing ran
    assert (
        "test_orders_round_trip uses streamwire's async fixtures, which need pytest-asyncio: "
        "pip install 'streamwire[testing]'"
    ) in result.stdout.str()
