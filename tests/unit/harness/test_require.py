"""``STREAMWIRE_REQUIRE=1`` (set by ``.ci/run``): a test that would skip for a broker the harness
starts fails instead; only the real Iggy server stays optional."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.brokers import require, skip_missing


@pytest.fixture
def no_brokers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STREAMWIRE_BROKERS_DIR", str(tmp_path))
    (tmp_path / "liftbridge.unavailable").write_text("go install failed\nlog\n", encoding="utf-8")
    return tmp_path


FAIL, SKIP = pytest.fail.Exception, pytest.skip.Exception


@pytest.mark.parametrize(
    ("value", "name", "outcome", "says"),
    [
        ("1", "nats", FAIL, "STREAMWIRE_REQUIRE=1: this run needs it"),
        ("1", "spark", FAIL, "broker spark is not running"),
        ("yes", "liftbridge", FAIL, "unavailable: go install failed"),  # the recorded reason
        ("", "nats", SKIP, "broker nats is not running"),
        ("0", "nats", SKIP, "broker nats is not running"),
        ("no", "liftbridge", SKIP, "unavailable: go install failed"),
        ("1", "iggy", SKIP, "broker iggy is not running"),  # the real server stays optional
    ],
)
def test_a_missing_broker_fails_under_require_and_skips_otherwise(
    no_brokers: Path,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    name: str,
    outcome: type[BaseException],
    says: str,
) -> None:
    monkeypatch.setenv("STREAMWIRE_REQUIRE", value)
    with pytest.raises(outcome, match=says):
        require(name)


def test_skip_missing_without_a_broker_name_fails_under_require(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMWIRE_REQUIRE", "1")
    with pytest.raises(pytest.fail.Exception, match="Spark needs Java"):
        skip_missing("Spark needs Java 17+ on PATH")
