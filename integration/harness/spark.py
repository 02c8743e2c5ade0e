"""Apache Spark from the venv's pyspark package, two targets, each JVM under a pid file:

* ``spark``: a standalone cluster, a master at ``spark://127.0.0.1:7077`` and two workers of
  one core each (``bin/spark-class org.apache.spark.deploy.master.Master`` /
  ``...deploy.worker.Worker``), so that executors run in JVMs and Python workers of their own;
* ``spark-connect``: a Spark Connect server at ``sc://127.0.0.1:15002``, running ``local[2]``
  (what ``sbin/start-connect-server.sh --wait`` runs).

Both run natively whatever the backend (pyspark is a Python package of the venv, as the
tests' own Spark is) and only on the loopback address. The JVMs use the tests' flags (serial
GC, the JIT's first tier: half the start time on a small machine).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

from . import config
from .envfile import say, write_env
from .lanes import Context
from .procs import is_running, pid_alive, read_pid, spawn_detached, stop_pid
from .readiness import Outcome, port_open, wait_until

__all__ = ["WORKERS", "down_spark", "down_spark_connect", "up_spark", "up_spark_connect"]

LOOPBACK = config.LOOPBACK
WORKERS = 2
JVM_FLAGS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _venv_python(ctx: Context) -> Path:
    return ctx.paths.venv / "bin" / "python"


def spark_home(ctx: Context) -> tuple[Path | None, str]:
    """The venv's pyspark directory (its ``bin/`` and ``sbin/`` are a Spark distribution)
    and its version, or ``None`` and why not."""
    python = _venv_python(ctx)
    if not python.is_file():
        return None, f"{python} not found: run make venv (the spark extra installs pyspark)"
    code = (
        "import os, pyspark; print(os.path.dirname(pyspark.__file__)); print(pyspark.__version__)"
    )
    try:
        done = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{python} could not be asked for pyspark: {exc}"
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2:
        return None, "pyspark is not installed in the venv (pip install -e '.[dev]')"
    home = Path(lines[0])
    if not (home / "bin" / "spark-class").is_file():
        return None, f"{home} has no bin/spark-class"
    return home, lines[1]


def _java() -> Path | None:
    found = shutil.which("java")
    return Path(os.path.realpath(found)) if found else None


def _env(ctx: Context, home: Path, logs: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": LOOPBACK,
        "SPARK_LOCAL_HOSTNAME": "localhost",
        "SPARK_DAEMON_JAVA_OPTS": JVM_FLAGS,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_LOG_DIR": str(logs),
        "SPARK_PID_DIR": str(logs),
        "PYSPARK_PYTHON": str(_venv_python(ctx)),
    }


def _record(
    ctx: Context,
    name: str,
    url: str,
    port: int,
    version: str,
    home: Path,
    pidfile: Path,
    log: Path,
    **extra: str,
) -> None:
    """The env file of a target that is up (what ``status`` and the tests read)."""
    facts = {"HOST": LOOPBACK, "PORT": str(port), "URL": url, **extra, "VERSION": version}
    facts |= {"BACKEND": "native", "SPARK_HOME": str(home), "PID_FILE": str(pidfile)}
    write_env(ctx.state, name, {**facts, "LOG": str(log)})


def _alive_workers(ui_port: int) -> int:
    """How many workers the master's status page counts as alive (-1: no answer)."""
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{ui_port}/json/", timeout=5) as reply:
            status = json.load(reply)
    except (OSError, ValueError):
        return -1
    return int(status.get("aliveworkers", 0))


def _pids(directory: Path) -> list[Path]:
    return [directory / "master.pid", *(directory / f"worker{i}.pid" for i in range(1, 3))]


def _needs(ctx: Context, name: str) -> tuple[Path, str, Path, Path] | None:
    """``(pyspark home, its version, java, the target's folder)``, or ``None`` with the
    target recorded as unavailable, saying why."""
    home, version = spark_home(ctx)
    if home is None:
        ctx.unavailable(name, version)
        return None
    java = _java()
    if java is None:
        ctx.unavailable(name, "java not found on PATH (Spark needs Java 17+)")
        return None
    directory = ctx.state / name
    directory.mkdir(parents=True, exist_ok=True)
    return home, version, java, directory


def up_spark(ctx: Context) -> bool:
    needs = _needs(ctx, "spark")
    if needs is None:
        return False
    home, version, java, directory = needs
    port, ui = ctx.port("spark"), ctx.port("spark", "UI_PORT")
    env = _env(ctx, home, directory)
    spark_class = str(home / "bin" / "spark-class")
    master_pid, master_log = directory / "master.pid", directory / "master.log"
    url = f"spark://{LOOPBACK}:{port}"
    if pid_alive(master_pid, java) and port_open(LOOPBACK, port):
        say("spark: master already running")
    else:
        if port_open(LOOPBACK, port):
            return ctx.unavailable(
                "spark", f"port {port} is in use by a process outside the harness"
            )
        for pidfile in _pids(directory):
            stop_pid("spark", pidfile, java)
        say(f"spark: starting a standalone master (pyspark {version}) on {url}")
        argv = [spark_class, MASTER_CLASS, "--host", LOOPBACK, "--port", str(port)]
        argv += ["--webui-port", str(ui)]
        pid = spawn_detached(argv, log=master_log, pidfile=master_pid, env=env)
        outcome = wait_until(
            lambda: port_open(LOOPBACK, port) and _alive_workers(ui) >= 0,
            lambda: is_running(pid),
            ctx.timeout(90),
        )
        if outcome is not Outcome.READY:
            stop_pid("spark", master_pid, java)
            return ctx.unavailable("spark", f"the master did not answer on {url}", master_log)
    worker_pids = []
    for i in range(1, WORKERS + 1):
        pidfile, log = directory / f"worker{i}.pid", directory / f"worker{i}.log"
        if pid_alive(pidfile, java):
            worker_pids.append(read_pid(pidfile))
            continue
        say(f"spark: starting worker {i} (1 core, 1 GiB)")
        argv = [spark_class, WORKER_CLASS, url, "--host", LOOPBACK, "--cores", "1"]
        argv += ["--memory", "1g", "--webui-port", str(ui + i)]
        argv += ["--work-dir", str(directory / f"work{i}")]
        worker_pids.append(spawn_detached(argv, log=log, pidfile=pidfile, env=env))
    logs = [master_log, *(directory / f"worker{i}.log" for i in range(1, WORKERS + 1))]
    outcome = wait_until(
        lambda: _alive_workers(ui) >= WORKERS,
        lambda: all(pid is not None and is_running(pid) for pid in worker_pids),
        ctx.timeout(90),
    )
    if outcome is not Outcome.READY:
        down_spark(ctx)
        return ctx.unavailable("spark", f"{WORKERS} workers did not register with {url}", *logs)
    _record(
        ctx, "spark", url, port, version, home, master_pid, master_log,
        UI_PORT=str(ui), WORKERS=str(WORKERS),
    )  # fmt: skip
    say(f"spark: up, pyspark {version}, master {url} with {WORKERS} workers")
    return True


def down_spark(ctx: Context) -> None:
    directory = ctx.state / "spark"
    (ctx.state / "spark.env").unlink(missing_ok=True)
    java = _java()
    if java is None:
        return
    if pid_alive(directory / "master.pid", java):
        say("spark: stopping the workers and the master")
    for pidfile in reversed(_pids(directory)):  # the workers first
        stop_pid("spark", pidfile, java)


def up_spark_connect(ctx: Context) -> bool:
    needs = _needs(ctx, "spark-connect")
    if needs is None:
        return False
    home, version, java, directory = needs
    port = ctx.port("spark-connect")
    pidfile, log = directory / "connect.pid", directory / "connect.log"
    url = f"sc://{LOOPBACK}:{port}"
    if pid_alive(pidfile, java) and port_open(LOOPBACK, port):
        say("spark-connect: already running")
    else:
        if port_open(LOOPBACK, port):
            return ctx.unavailable(
                "spark-connect", f"port {port} is in use by a process outside the harness"
            )
        stop_pid("spark-connect", pidfile, java)
        say(f"spark-connect: starting a Spark Connect server (pyspark {version}) on {url}")
        python = str(_venv_python(ctx))
        confs = {
            "spark.connect.grpc.binding.address": LOOPBACK,
            "spark.connect.grpc.binding.port": str(port),
            "spark.driver.host": LOOPBACK,
            "spark.driver.bindAddress": LOOPBACK,
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.session.timeZone": "UTC",
            "spark.pyspark.python": python,
            "spark.pyspark.driver.python": python,
        }
        # what sbin/start-connect-server.sh --wait runs, without its shell in between (the
        # pid is the JVM's, so stopping it stops the server)
        argv = [str(home / "bin" / "spark-submit"), "--class", CONNECT_CLASS]
        argv += ["--name", "Spark Connect server", "--master", "local[2]", "--driver-memory", "1g"]
        argv += ["--driver-java-options", JVM_FLAGS]
        for key, value in confs.items():
            argv += ["--conf", f"{key}={value}"]
        env = {**_env(ctx, home, directory), "SPARK_CONNECT_MODE": "0"}
        del env["SPARK_DAEMON_MEMORY"]  # the launcher would size the driver by it
        pid = spawn_detached(argv, log=log, pidfile=pidfile, env=env)
        outcome = wait_until(
            lambda: port_open(LOOPBACK, port), lambda: is_running(pid), ctx.timeout(120)
        )
        if outcome is not Outcome.READY:
            stop_pid("spark-connect", pidfile, java)
            return ctx.unavailable("spark-connect", f"the server did not answer on {url}", log)
    _record(ctx, "spark-connect", url, port, version, home, pidfile, log)
    say(f"spark-connect: up, pyspark {version}, {url}")
    return True


def down_spark_connect(ctx: Context) -> None:
    directory = ctx.state / "spark-connect"
    (ctx.state / "spark-connect.env").unlink(missing_ok=True)
    java = _java()
    if pid_alive(directory / "connect.pid", java):
        say("spark-connect: stopping")
    stop_pid("spark-connect", directory / "connect.pid", java)
