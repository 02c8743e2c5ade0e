"""``integration/brokers.sh fault``: the signals reach the process under the pid file and only
it, a kill returns once the process is gone, and bad requests are refused with the usage."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.harness import cli, config, lanes, nemesis, readiness
from integration.harness.procs import is_running


def _ctx(tmp_path: Path) -> lanes.Context:
    env = {"STREAMWIRE_BROKERS_DIR": str(tmp_path / "state")}
    return lanes.Context(config.Paths.from_environ(tmp_path, env), env)


def _cli_env(tmp_path: Path) -> dict[str, str]:
    """What ``integration/brokers.sh`` passes its CLI, for a state directory of the test's."""
    return {
        "PATH": os.environ["PATH"],
        "STREAMWIRE_BROKERS_DIR": str(tmp_path / "state"),
        "STREAMWIRE_BROKERS_BACKEND": "native",
    }


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    return stat[stat.rfind(")") + 2]


def _wait_state(pid: int, wanted: str) -> str:
    deadline = time.monotonic() + 10
    while (state := _state(pid)) != wanted and time.monotonic() < deadline:
        time.sleep(0.01)
    return state


@pytest.fixture
def server(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in for the harness's nats-server: a process under the pid file it would have."""
    process = subprocess.Popen(["sleep", "60"])
    pidfile = tmp_path / "state" / "nats" / "nats.pid"
    pidfile.parent.mkdir(parents=True)
    pidfile.write_text(f"{process.pid}\n", encoding="ascii")
    yield process
    if process.poll() is None:
        os.kill(process.pid, signal.SIGCONT)
        process.kill()
        process.wait()


def test_pause_stops_the_process_and_resume_continues_it(
    tmp_path: Path, server: subprocess.Popen[bytes]
) -> None:
    ctx = _ctx(tmp_path)
    assert nemesis.pids(ctx, "nats") == [server.pid]
    assert nemesis.fault(ctx, "pause", "nats") == 0
    assert _wait_state(server.pid, "T") == "T"
    assert nemesis.fault(ctx, "resume", "nats") == 0
    assert _wait_state(server.pid, "S") == "S"


def test_kill_returns_once_the_process_is_gone(
    tmp_path: Path, server: subprocess.Popen[bytes]
) -> None:
    assert nemesis.fault(_ctx(tmp_path), "kill", "nats") == 0
    assert not is_running(server.pid)  # reaped by the harness (here a child of the test)
    assert not Path(f"/proc/{server.pid}").exists()


def test_a_paused_process_is_killed_too(tmp_path: Path, server: subprocess.Popen[bytes]) -> None:
    ctx = _ctx(tmp_path)
    assert nemesis.fault(ctx, "pause", "nats") == 0
    assert _wait_state(server.pid, "T") == "T"
    assert nemesis.fault(ctx, "kill", "nats") == 0
    assert not Path(f"/proc/{server.pid}").exists()


def test_no_process_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert nemesis.fault(_ctx(tmp_path), "pause", "liftbridge") == 3
    assert "runs no process of it; nothing to pause" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("verb", "target", "node"),
    [("freeze", "nats", None), ("pause", "kafka", None), ("pause", "rabbitmq-cluster", None),
     ("kill", "nats", 2)],
)  # fmt: skip
def test_bad_requests_are_exit_2(tmp_path: Path, verb: str, target: str, node: int | None) -> None:
    assert nemesis.fault(_ctx(tmp_path), verb, target, node) == 2


USAGE = "fault pause|resume|kill|revive NAME [N]"
NETWORK = "partition takes rabbitmq-cluster N; heal takes rabbitmq-cluster"


@pytest.mark.parametrize(
    ("argv", "says"),
    [(["fault"], USAGE), (["fault", "pause"], USAGE), (["fault", "freeze", "nats"], USAGE),
     (["fault", "kill", "x", "y", "z"], USAGE),
     (["fault", "kill", "rabbitmq-cluster", "one"], USAGE),
     (["fault", "partition", "nats"], NETWORK),
     (["fault", "partition", "rabbitmq-cluster"], NETWORK),
     (["fault", "heal", "rabbitmq-cluster", "1"], NETWORK),
     (["fault", "partition", "rabbitmq-cluster", "4"], "node number must be 1..3")],
)  # fmt: skip
def test_cli_usage_errors_exit_2(
    tmp_path: Path, argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv, _cli_env(tmp_path)) == 2
    assert says in capsys.readouterr().err


def test_cli_pauses_through_the_pid_file(tmp_path: Path, server: subprocess.Popen[bytes]) -> None:
    env = _cli_env(tmp_path)
    assert cli.main(["fault", "pause", "nats"], env) == 0
    assert _wait_state(server.pid, "T") == "T"
    assert cli.main(["fault", "resume", "nats"], env) == 0


def test_readiness_looks_only_past_the_earlier_runs_lines(tmp_path: Path) -> None:
    """A server started again on its data appends to its log: the line that said the last
    run was ready must not say this one is."""
    log = tmp_path / "server.log"
    log.write_text("became metadata leader\n", encoding="utf-8")
    mark = log.stat().st_size
    assert readiness.file_contains(log, "became metadata leader")
    assert not readiness.file_contains(log, "became metadata leader", start=mark)
    with log.open("a", encoding="utf-8") as f:
        f.write("starting\nbecame metadata leader\n")
    assert readiness.file_contains(log, "became metadata leader", start=mark)


def test_revive_starts_the_iggy_binary_the_harness_recorded(tmp_path: Path) -> None:
    """Killed, the server is started again from the binary its env file names, whether or
    not IGGY_SERVER_BIN is set where ``fault revive`` runs (here a script standing in for
    iggy-server: it listens on the port the harness gives it)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = tmp_path / "iggy-server"
    server.write_text(
        "#!/usr/bin/env python3\n"
        "import os, socket, time\n"
        "host, port = os.environ['IGGY_TCP_ADDRESS'].rsplit(':', 1)\n"
        "s = socket.socket(); s.bind((host, int(port))); s.listen()\n"
        "time.sleep(60)\n",
        encoding="utf-8",
    )
    server.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    (state / "iggy.env").write_text(f"BINARY={server}\n", encoding="utf-8")
    env = {"STREAMWIRE_BROKERS_DIR": str(state), "STREAMWIRE_IGGY_PORT": str(port)}
    ctx = lanes.Context(config.Paths.from_environ(tmp_path, env), env)
    try:
        assert nemesis.fault(ctx, "revive", "iggy") == 0
        (pid,) = nemesis.pids(ctx, "iggy")
        assert readiness.port_open("127.0.0.1", port)
    finally:
        for pid in nemesis.pids(ctx, "iggy"):
            os.kill(pid, signal.SIGKILL)
