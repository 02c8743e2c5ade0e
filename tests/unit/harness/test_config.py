"""Ports, node names and folders of the harness, with their STREAMWIRE_* overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.harness import config


def test_variable_names_upper_case_the_target_and_write_dashes_as_underscores() -> None:
    assert config.variable("rabbitmq-cluster", "STREAM_PORT") == (
        "STREAMWIRE_RABBITMQ_CLUSTER_STREAM_PORT"
    )
    assert config.variable("nats", "TLS_PORT") == "STREAMWIRE_NATS_TLS_PORT"
    assert config.variable("liftbridge", "TLS_PORT") == "STREAMWIRE_LIFTBRIDGE_TLS_PORT"


def test_defaults_apply_when_unset_or_empty() -> None:
    assert config.setting("rabbitmq", "STREAM_PORT", {}) == "5552"
    assert config.setting("rabbitmq", "STREAM_PORT", {"STREAMWIRE_RABBITMQ_STREAM_PORT": ""}) == (
        "5552"
    )
    assert config.setting("rabbitmq310", "NODE", {}) == "rabbit310@localhost"
    assert config.setting("liftbridge", "TLS_PORT", {}) == "9293"
    assert config.setting("liftbridge", "MTLS_PORT", {}) == "9294"
    assert config.setting("rabbitmq-cluster", "TLS_PORT", {}) == "5571"


def test_an_override_moves_a_port_or_a_node_name() -> None:
    env = {
        "STREAMWIRE_RABBITMQ_STREAM_PORT": "5652",
        "STREAMWIRE_RABBITMQ_CLUSTER_NODE_PREFIX": "mine",
    }
    assert config.setting("rabbitmq", "STREAM_PORT", env) == "5652"
    assert config.setting("rabbitmq-cluster", "NODE_PREFIX", env) == "mine"
    # another target's key is not affected
    assert config.setting("rabbitmq40", "STREAM_PORT", env) == "5554"


@pytest.mark.parametrize("value", ["x", "0", "65536", "-1", "5552 ", "1e3", "\uff15\uff15"])
def test_a_value_that_is_not_a_port_is_refused(value: str) -> None:
    with pytest.raises(config.SettingError, match=r"STREAMWIRE_NATS_PORT=.* is not a port number"):
        config.setting("nats", "PORT", {"STREAMWIRE_NATS_PORT": value})


def test_the_cluster_base_ports_leave_room_for_three_nodes() -> None:
    env = {"STREAMWIRE_RABBITMQ_CLUSTER_STREAM_PORT": "65534"}
    with pytest.raises(config.SettingError):
        config.setting("rabbitmq-cluster", "STREAM_PORT", env)
    with pytest.raises(config.SettingError):
        config.setting(
            "rabbitmq-cluster", "TLS_PORT", {"STREAMWIRE_RABBITMQ_CLUSTER_TLS_PORT": "65534"}
        )
    assert config.setting("nats", "PORT", {"STREAMWIRE_NATS_PORT": "65535"}) == "65535"
    assert config.cluster_port(17561, 3) == 17563
    with pytest.raises(config.SettingError):
        config.cluster_port(17561, 4)


def test_a_node_name_with_a_space_is_refused() -> None:
    with pytest.raises(config.SettingError):
        config.setting("rabbitmq", "NODE", {"STREAMWIRE_RABBITMQ_NODE": "a b@localhost"})


def test_an_unknown_key_is_an_error() -> None:
    with pytest.raises(config.SettingError):
        config.setting("nats", "STREAM_PORT", {})


def test_the_resolved_environment_names_every_setting_once() -> None:
    resolved = config.resolved_environment({"STREAMWIRE_IGGY_PORT": "18090"})
    expected = {config.variable(t, k) for t, keys in config.DEFAULTS.items() for k in keys}
    assert set(resolved) == expected
    assert resolved["STREAMWIRE_IGGY_PORT"] == "18090"
    assert resolved["STREAMWIRE_RABBITMQ40_NODE"] == "rabbit40@localhost"
    with pytest.raises(config.SettingError):
        config.resolved_environment({"STREAMWIRE_LIFTBRIDGE_PORT": "nope"})


def test_the_default_ports_of_all_targets_are_distinct() -> None:
    used: list[int] = []
    for target, keys in config.DEFAULTS.items():
        for key, value in keys.items():
            if config.is_port_key(key):
                span = config.CLUSTER_SIZE if target == "rabbitmq-cluster" else 1
                used += range(int(value), int(value) + span)
    assert len(used) == len(set(used))


def test_targets_and_down_order() -> None:
    assert set(config.ALL_TARGETS) <= set(config.KNOWN_TARGETS)
    assert sorted(config.DOWN_ORDER) == sorted(config.KNOWN_TARGETS)
    assert config.DOWN_ORDER.index("liftbridge") < config.DOWN_ORDER.index("nats")
    assert set(config.DEFAULTS) == set(config.KNOWN_TARGETS)


def test_ready_timeout() -> None:
    assert config.ready_timeout(120, {}) == 120
    assert config.ready_timeout(120, {"STREAMWIRE_READY_TIMEOUT": "7"}) == 7
    for bad in ("soon", "0", "-3"):
        with pytest.raises(config.SettingError):
            config.ready_timeout(1, {"STREAMWIRE_READY_TIMEOUT": bad})


def test_paths_default_below_the_repository_and_follow_the_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    paths = config.Paths.from_environ(repo, {})
    assert (paths.cache, paths.venv, paths.state) == (
        repo / ".cache",
        repo / ".venv",
        repo / ".brokers",
    )
    monkeypatch.chdir(tmp_path)
    moved = config.Paths.from_environ(
        repo, {"STREAMWIRE_BROKERS_DIR": "state", "STREAMWIRE_CACHE": "/opt/harness-cache"}
    )
    assert moved.state == tmp_path / "state"  # relative to where the harness was started
    assert moved.cache == Path("/opt/harness-cache")
    assert moved.venv == repo / ".venv"
