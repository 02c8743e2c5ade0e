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


@pytest.mark.parametrize("name", ["nats", "liftbridge", "spark"])
def test_a_missing_broker_fails_under_require(
    no_brokers: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("STREAMWIRE_REQUIRE", "1")
    with pytest.raises(pytest.fail.Exception, match="STREAMWIRE_REQUIRE=1: this run needs it"):
        require(name)


def test_the_recorded_reason_is_kept_in_the_failure(
    no_brokers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMWIRE_REQUIRE", "yes")
    with pytest.raises(pytest.fail.Exception, match="unavailable: go install failed"):
        require("liftbridge")


@pytest.mark.parametrize("value", ["", "0", "no"])
def test_without_require_a_missing_broker_skips(
    no_brokers: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("STREAMWIRE_REQUIRE", value)
    with pytest.raises(pytest.skip.Exception, match="broker nats is not running"):
        require("nats")


def test_the_real_iggy_server_stays_optional(
    no_brokers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMWIRE_REQUIRE", "1")
    with pytest.raises(pytest.skip.Exception, match="broker iggy is not running"):
        require("iggy")


def test_skip_missing_without_a_broker_name_fails_under_require(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMWIRE_REQUIRE", "1")
    with pytest.raises(pytest.fail.Exception, match="Spark needs Java"):
        skip_missing("Spark needs Java 17+ on PATH")
