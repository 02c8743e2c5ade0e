"""The Docker backend through ``integration/brokers.sh``, with a stand-in ``docker`` command
on PATH: it answers ``docker info`` and ``docker compose version``, starts a listener on the
service's port for ``compose up -d`` and stops it for ``compose stop``, and logs every call.
(No Docker engine is needed; docs/brokers.md says what the real one was checked with.)"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from integration.harness import envfile
from integration.harness.readiness import port_open

REPO = Path(__file__).resolve().parents[3]

_FAKE_DOCKER = r"""#!{python}
import os, signal, subprocess, sys, time
from pathlib import Path
state = Path(os.environ["FAKE_DOCKER_DIR"])
args = sys.argv[1:]
with (state / "calls").open("a") as f:
    f.write(" ".join(args) + "\n")
if args in (["info"], ["compose", "version"]):
    raise SystemExit(0)
assert args[0] == "compose", args
rest = args[1:]
assert rest[:6] == ["-f", str(Path(os.environ["FAKE_COMPOSE_FILE"])), "-p", "streamwire",
                    "--profile", "compat"], rest
verb, operands = rest[6], rest[7:]
name = operands[-1]
pidfile = state / f"{{name}}.pid"
if verb == "up" and pidfile.exists():
    pass  # already up, as compose leaves a running container
elif verb == "up":
    port = int(os.environ["FAKE_PORT_" + name.upper()])
    code = ("import socket, time; s = socket.socket(); "
            f"s.bind(('127.0.0.1', {{port}})); s.listen(); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pidfile.write_text(str(p.pid))
elif verb == "stop":
    if pidfile.exists():
        pid = int(pidfile.read_text())
        os.kill(pid, signal.SIGKILL)
        pidfile.unlink()
        for _ in range(500):  # gone once it is reaped (or a zombie of init's)
            try:
                if open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            except OSError:
                break
            time.sleep(0.01)
elif verb == "ps":
    print("c0ffee" if pidfile.exists() else "")
elif verb == "exec":
    print("nats-server: v2.15.1")
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_the_docker_backend_runs_compose_per_service(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "docker"
    fake.write_text(_FAKE_DOCKER.format(python=sys.executable), encoding="utf-8")
    fake.chmod(0o755)
    port = _free_port()
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STREAMWIRE_BROKERS_DIR": str(tmp_path / "state"),
        "STREAMWIRE_VENV": sys.prefix,
        "STREAMWIRE_NATS_PORT": str(port),
        "FAKE_DOCKER_DIR": str(tmp_path),
        "FAKE_COMPOSE_FILE": str(REPO / "docker-compose.yml"),
        "FAKE_PORT_NATS": str(port),
    }

    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(REPO / "integration" / "brokers.sh"), *args],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    try:
        up = harness("up", "nats")
        assert up.returncode == 0, up.stderr
        assert "[brokers] backend: docker;" in up.stderr
        facts = envfile.read_env(tmp_path / "state" / "nats.env")
        assert facts["BACKEND"] == "docker"
        assert facts["URL"] == f"nats://127.0.0.1:{port}"
        assert facts["VERSION"] == "v2.15.1"
        assert port_open("127.0.0.1", port)
        status = harness("status", "nats")
        assert status.stdout.splitlines()[1].split()[:3] == ["nats", "up", "v2.15.1"]
        assert status.stdout.splitlines()[-1] == "(backend: docker)"
        # the native-only targets say so
        cluster = harness("up", "rabbitmq-cluster")
        assert cluster.returncode == 1
        reason = (tmp_path / "state" / "rabbitmq-cluster.unavailable").read_text(encoding="utf-8")
        assert reason.startswith("docker-compose.yml has no service for rabbitmq-cluster")
        assert harness("stop", "rabbitmq-cluster", "1").returncode == 2
        restart = harness("restart", "nats")
        assert restart.returncode == 0, restart.stderr
        assert "nats: restarting its container" in restart.stderr
    finally:
        down = harness("down", "nats")
    assert down.returncode == 0, down.stderr
    assert not port_open("127.0.0.1", port)
    assert not (tmp_path / "state" / "nats.env").exists()
    calls = (tmp_path / "calls").read_text(encoding="utf-8").splitlines()
    compose = [c.split(" compat ", 1)[1] for c in calls if c.startswith("compose -f")]
    assert compose[:2] == ["up -d nats", "exec -T nats /nats-server --version"]
    assert compose[-2:] == ["stop nats", "rm -f nats"]
    assert "restart nats" in compose
