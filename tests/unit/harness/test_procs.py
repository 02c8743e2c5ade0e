"""Process supervision with real short-lived processes."""

from __future__ import annotations

import ast
import os
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest

from integration.harness import procs

_SLEEP = "import time; time.sleep(60)"
_IGNORE_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True)"
    "; time.sleep(60)"
)


def _spawn(tmp_path: Path, code: str, **kwargs: object) -> tuple[int, Path]:
    pidfile = tmp_path / f"{uuid.uuid4().hex}.pid"
    pid = procs.spawn_detached(
        [sys.executable, "-c", code],
        log=tmp_path / "out.log",
        pidfile=pidfile,
        **kwargs,  # type: ignore[arg-type]
    )
    return pid, pidfile


def _wait_for(predicate: object, timeout: float = 10) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("text", "pid"), [("123\n", 123), (" 12a3 \n", 123), ("", None), ("0\n", None), ("x", None)]
)
def test_read_pid(tmp_path: Path, text: str, pid: int | None) -> None:
    pidfile = tmp_path / "x.pid"
    pidfile.write_text(text, encoding="ascii")
    assert procs.read_pid(pidfile) == pid
    assert procs.read_pid(tmp_path / "missing.pid") is None


def test_spawn_detached_runs_in_its_own_session_with_a_clean_set_of_descriptors(
    tmp_path: Path,
) -> None:
    leaked = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(leaked, True)
    try:
        code = (
            "import os, sys; print(sorted(int(f) for f in os.listdir('/proc/self/fd')));"
            "print(os.getsid(0) == os.getpid()); print(repr(sys.stdin.read()));"
            "print(os.environ.get('MARK')); print(os.getcwd());"
            "print('to stderr', file=sys.stderr)"
        )
        pid, pidfile = _spawn(tmp_path, code, env={**os.environ, "MARK": "yes"}, cwd=tmp_path)
        assert procs.read_pid(pidfile) == pid
        _wait_for(lambda: not procs.is_running(pid))
    finally:
        os.close(leaked)
    fds, own_session, stdin, mark, cwd, stderr = (
        (tmp_path / "out.log").read_text(encoding="utf-8").splitlines()
    )
    assert leaked not in ast.literal_eval(fds)  # only 0, 1, 2 and the listing's own descriptor
    assert own_session == "True"
    assert stdin == "''"
    assert mark == "yes"
    assert cwd == str(tmp_path)
    assert stderr == "to stderr"


def test_spawn_detached_wants_a_path() -> None:
    with pytest.raises(ValueError, match="path"):
        procs.spawn_detached(["sleep", "1"], log=Path("/dev/null"), pidfile=Path("/dev/null"))


def test_pid_alive_checks_the_program(tmp_path: Path) -> None:
    _, pidfile = _spawn(tmp_path, _SLEEP)
    try:
        assert procs.pid_alive(pidfile)
        assert procs.pid_alive(pidfile, Path(sys.executable))
        sleep = shutil.which("sleep")
        assert sleep is not None
        assert not procs.pid_alive(pidfile, Path(sleep))  # a recycled pid of another program
    finally:
        procs.stop_pid("sleeper", pidfile)
    assert not procs.pid_alive(pidfile)
    assert not pidfile.exists()


def test_stop_pid_terminates_and_removes_the_pid_file(tmp_path: Path) -> None:
    pid, pidfile = _spawn(tmp_path, _SLEEP)
    started = time.monotonic()
    procs.stop_pid("sleeper", pidfile, Path(sys.executable))
    assert time.monotonic() - started < 5
    assert not procs.is_running(pid)
    assert not pidfile.exists()


def test_stop_pid_kills_what_ignores_sigterm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pid, pidfile = _spawn(tmp_path, _IGNORE_TERM)
    _wait_for(lambda: "ready" in (tmp_path / "out.log").read_text(encoding="utf-8"))
    procs.stop_pid("stubborn", pidfile, grace=0.5)
    assert not procs.is_running(pid)
    assert f"stubborn: pid {pid} ignored SIGTERM for 0.5 s; sending SIGKILL" in (
        capsys.readouterr().err
    )


def test_stop_pid_leaves_another_program_alone(tmp_path: Path) -> None:
    pid, pidfile = _spawn(tmp_path, _SLEEP)
    try:
        procs.stop_pid("other", pidfile, Path("/bin/true"))
        assert procs.is_running(pid)  # the pid file named a program it does not run
        assert not pidfile.exists()
    finally:
        os.kill(pid, signal.SIGKILL)
        _wait_for(lambda: not procs.is_running(pid))


def test_stop_pid_without_a_process(tmp_path: Path) -> None:
    procs.stop_pid("none", tmp_path / "missing.pid")
    stale = tmp_path / "stale.pid"
    stale.write_text("999999999\n", encoding="ascii")
    procs.stop_pid("none", stale)
    assert not stale.exists()


def test_an_exited_child_is_reaped_and_counts_as_gone(tmp_path: Path) -> None:
    pid, _ = _spawn(tmp_path, "pass")
    _wait_for(lambda: not procs.is_running(pid))
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped


def test_processes_found_by_environment_root_and_name(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    pid, pidfile = _spawn(tmp_path, _SLEEP, env={**os.environ, "HARNESS_TEST_MARK": marker})
    try:
        _wait_for(lambda: procs.environ_of(pid).get("HARNESS_TEST_MARK") == marker)
        assert procs.pids_with_environ({"HARNESS_TEST_MARK": marker}) == [pid]
        assert procs.pids_with_environ({"HARNESS_TEST_MARK": marker, "X": "y"}) == []
        assert procs.pids_with_environ({"HARNESS_TEST_MARK": marker}, among=[os.getpid()]) == []
        assert pid in procs.pids_rooted_at(Path("/"))
        assert procs.pids_rooted_at(tmp_path) == []  # nothing runs chrooted there
        assert procs.comm(pid).startswith("python")
    finally:
        procs.stop_pid("marked", pidfile)
    assert procs.comm(pid) == ""


def test_terminate_rounds_ends_with_sigkill(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    env = {**os.environ, "HARNESS_TEST_MARK": marker}
    polite, _ = _spawn(tmp_path, _SLEEP, env=env)
    stubborn, _ = _spawn(tmp_path, _IGNORE_TERM, env=env)
    _wait_for(lambda: "ready" in (tmp_path / "out.log").read_text(encoding="utf-8"))

    def marked() -> list[int]:
        return [
            p for p in procs.pids_with_environ({"HARNESS_TEST_MARK": marker}) if procs.is_running(p)
        ]

    assert sorted(marked()) == sorted([polite, stubborn])
    assert procs.terminate_rounds(marked, rounds=3, interval=0.2)
    assert not procs.is_running(polite)
    assert not procs.is_running(stubborn)
