"""The verbs, the status lines, the lock and the internal calls of the bash lanes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from integration.harness import cli, config, envfile, lanes

REPO = Path(__file__).resolve().parents[3]
BROKERS_SH = REPO / "integration" / "brokers.sh"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "STREAMWIRE_BROKERS_DIR": str(tmp_path / "state"),
        "STREAMWIRE_CACHE": str(tmp_path / "cache"),
        "STREAMWIRE_BROKERS_BACKEND": "native",
        **extra,
    }


@pytest.mark.parametrize(
    "argv",
    [[], ["bogus"], ["up", "kafka"], ["up", "nats", "extra"], ["stop", "rabbitmq", "1"],
     ["start", "rabbitmq-cluster"], ["restart", "all"], ["restart"], ["a", "b", "c", "d"]],
)  # fmt: skip
def test_usage_errors_exit_2(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv, _env(tmp_path)) == 2
    assert "usage: integration/brokers.sh up|down|status" in capsys.readouterr().err


def test_a_bad_port_exits_2_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["status"], _env(tmp_path, STREAMWIRE_NATS_TLS_PORT="44430000")) == 2
    assert "STREAMWIRE_NATS_TLS_PORT=44430000 is not a port number" in capsys.readouterr().err


def test_status_lists_every_broker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "iggy.unavailable").write_text("no server\nlog...\n", encoding="utf-8")
    assert cli.main(["status"], _env(tmp_path)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["BROKER", "STATE", "VERSION", "DETAIL"]
    assert [line.split()[0] for line in out[1:-1]] == [
        "rabbitmq", "rabbitmq40", "rabbitmq310", "rabbitmq-cluster", "nats", "liftbridge", "iggy",
        "spark", "spark-connect",
    ]  # fmt: skip
    assert out[-4] == f"{'iggy':<16} {'unavailable':<12} {'-':<14} (no server)"
    assert out[-3] == f"{'spark':<16} {'down':<12} {'-':<14} "
    assert out[-1] == "(backend: native)"


def test_status_line_up_with_tls_down_and_stale(tmp_path: Path) -> None:
    with socket.socket() as plain, socket.socket() as gone:
        plain.bind(("127.0.0.1", 0))
        plain.listen()
        gone.bind(("127.0.0.1", 0))
        port, closed = plain.getsockname()[1], gone.getsockname()[1]
        facts = {"HOST": "127.0.0.1", "PORT": str(port), "URL": "nats://x", "VERSION": "v2"}
        envfile.write_env(tmp_path, "nats", {**facts, "TLS_PORT": str(closed)})
        line = cli.status_line(tmp_path, "nats")
        assert line == (
            f"{'nats':<16} {'up':<12} {'v2':<14} nats://x (TLS port {closed}: nothing answers)"
        )
        envfile.write_env(tmp_path, "nats", {**facts, "TLS_PORT": str(port)})
        assert cli.status_line(tmp_path, "nats").endswith(f"nats://x + TLS on port {port}")
        cluster = {"HOST": "127.0.0.1", "PORT": str(closed), "VERSION": "4.3.6"}
        envfile.write_env(
            tmp_path, "rabbitmq-cluster", {**cluster, "PORT_NODE1": str(closed),
                                           "PORT_NODE2": str(port)}
        )  # fmt: skip
        assert cli.status_line(tmp_path, "rabbitmq-cluster").split()[1] == "up"
    envfile.write_env(tmp_path, "nats", facts)
    assert cli.status_line(tmp_path, "nats").split(None, 3)[1:] == [
        "down",
        "v2",
        f"stale {tmp_path / 'nats.env'}: nothing answers on 127.0.0.1:{port}",
    ]
    assert cli.status_line(tmp_path, "liftbridge") == f"{'liftbridge':<16} {'down':<12} {'-':<14} "


def test_the_lock_is_exclusive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    held = cli.acquire_lock(tmp_path)
    try:
        with pytest.raises(SystemExit) as exited:
            cli.acquire_lock(tmp_path, wait=0.3)
        assert exited.value.code == 1
        assert "holds" in capsys.readouterr().err
    finally:
        os.close(held)
    os.close(cli.acquire_lock(tmp_path, wait=0.3))


def test_the_lock_is_the_one_flock_1_takes(tmp_path: Path) -> None:
    held = cli.acquire_lock(tmp_path)
    try:
        busy = subprocess.run(["flock", "-n", str(tmp_path / ".lock"), "true"], check=False)
        assert busy.returncode == 1
    finally:
        os.close(held)


def test_down_goes_on_past_a_failing_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped: list[str] = []

    def broken(ctx: lanes.Context) -> None:
        raise OSError("umount: target is busy")

    def recorder(name: str) -> Callable[[lanes.Context], None]:
        def stop(ctx: lanes.Context) -> None:
            stopped.append(name)

        return stop

    for name in cli.PYTHON_DOWN:
        monkeypatch.setitem(cli.PYTHON_DOWN, name, recorder(name))
    monkeypatch.setitem(cli.PYTHON_DOWN, "rabbitmq40", broken)
    assert cli.main(["down", "all"], _env(tmp_path)) == 1
    assert stopped == [n for n in config.DOWN_ORDER if n != "rabbitmq40"]
    err = capsys.readouterr().err
    assert "[brokers] rabbitmq40: down failed: OSError('umount: target is busy')" in err
    assert "[brokers] nats: down" in err


def test_backend_selection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.select_backend({"STREAMWIRE_BROKERS_BACKEND": "native"}) == ("native", None)
    with pytest.raises(SystemExit) as exited:
        cli.select_backend({"STREAMWIRE_BROKERS_BACKEND": "podman"})
    assert exited.value.code == 2
    assert "must be auto, docker or native" in capsys.readouterr().err


def test_brokers_sh_runs_the_package(tmp_path: Path) -> None:
    env = _env(tmp_path, STREAMWIRE_VENV=str(Path(sys.prefix)))
    done = subprocess.run(
        [str(BROKERS_SH), "status", "iggy"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split()[:2] == ["iggy", "down"]
    usage = subprocess.run([str(BROKERS_SH)], env=env, capture_output=True, text=True, check=False)
    assert usage.returncode == 2
    assert "usage:" in usage.stderr


@pytest.mark.parametrize(
    ("require", "target", "fails", "code"),
    [
        ("", "all", ["nats"], 0),  # a developer's machine: report it and go on
        ("1", "all", ["iggy"], 0),  # no registry has an Iggy server: optional in CI too
        ("1", "all", ["nats", "iggy"], 1),
        ("1", "all", [], 0),
        ("1", "spark", ["spark"], 1),
        ("", "spark", ["spark"], 1),  # a named lane that does not start always fails
    ],
)
def test_up_fails_under_require_when_a_broker_does_not_start(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    require: str,
    target: str,
    fails: list[str],
    code: int,
) -> None:
    started: list[str] = []

    def lane(name: str) -> Callable[[lanes.Context], bool]:
        def up(ctx: lanes.Context) -> bool:
            started.append(name)
            return ctx.unavailable(name, "did not start") if name in fails else True

        return up

    monkeypatch.setattr(cli, "PYTHON_UP", {name: lane(name) for name in config.KNOWN_TARGETS})
    assert cli.main(["up", target], _env(tmp_path, STREAMWIRE_REQUIRE=require)) == code
    assert started == cli.expand(target)  # every one is tried, failing or not
    err = capsys.readouterr().err
    must = [name for name in fails if name != "iggy"]
    if require and must:
        assert f"STREAMWIRE_REQUIRE=1 and {' '.join(must)} did not start: failing" in err
    else:
        assert "STREAMWIRE_REQUIRE" not in err


def test_must_start_spares_only_the_optional_iggy_server() -> None:
    failed = ["rabbitmq", "iggy", "spark-connect"]
    assert config.must_start(failed, {"STREAMWIRE_REQUIRE": "true"}) == [
        "rabbitmq",
        "spark-connect",
    ]
    assert config.must_start(failed, {"STREAMWIRE_REQUIRE": "0"}) == []
    assert config.must_start(failed, {}) == []
