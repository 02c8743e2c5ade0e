"""Process supervision: pid files, detached starts, stops with a grace period, and finding a
broker's processes by their root directory (a chroot) or their environment."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from .envfile import say

__all__ = [
    "PROC",
    "comm",
    "environ_of",
    "is_running",
    "pid_alive",
    "pids_rooted_at",
    "pids_with_environ",
    "read_pid",
    "spawn_detached",
    "stop_pid",
    "terminate_rounds",
]

PROC = Path("/proc")


def read_pid(pidfile: Path) -> int | None:
    """The pid in ``pidfile`` (its digits), or None when there is no usable one."""
    try:
        digits = "".join(
            c for c in pidfile.read_text(encoding="ascii", errors="ignore") if c.isdigit()
        )
    except OSError:
        return None
    return int(digits) if digits and int(digits) > 0 else None


def is_running(pid: int, proc: Path = PROC) -> bool:
    """True while ``pid`` exists and is not a zombie. A child of this process that exited is
    reaped here (otherwise it would stay a zombie until the harness exits)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass  # not our child
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = (proc / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True
    # "pid (comm) S ...": the state follows the last ")" (comm may hold parentheses)
    if stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] != "Z":
        return True
    # a zombie: when it is a child of ours that exited after the waitpid above (a rehearsal of
    # CI met that race on 3.13), reap it now
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return False


def _exe(pid: int, proc: Path) -> str | None:
    try:
        return os.path.realpath(os.readlink(proc / str(pid) / "exe"))
    except OSError:
        return None


def pid_alive(pidfile: Path, exe: Path | None = None, proc: Path = PROC) -> bool:
    """True when the pid in ``pidfile`` runs and, when ``exe`` is given, runs that program (a
    recycled pid of another program does not count)."""
    pid = read_pid(pidfile)
    if pid is None or not is_running(pid, proc):
        return False
    return exe is None or _exe(pid, proc) == os.path.realpath(exe)


def stop_pid(
    name: str,
    pidfile: Path,
    exe: Path | None = None,
    *,
    grace: float = 15.0,
    proc: Path = PROC,
) -> None:
    """SIGTERM to the process of ``pidfile`` (if it is alive and runs ``exe``), SIGKILL when
    it is still there after ``grace`` seconds; the pid file is removed in any case."""
    if pid_alive(pidfile, exe, proc):
        pid = read_pid(pidfile)
        assert pid is not None
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while is_running(pid, proc) and time.monotonic() < deadline:
            time.sleep(0.1)
        if is_running(pid, proc):
            say(f"{name}: pid {pid} ignored SIGTERM for {grace:g} s; sending SIGKILL")
            _signal(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while is_running(pid, proc) and time.monotonic() < deadline:
                time.sleep(0.05)
    pidfile.unlink(missing_ok=True)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def spawn_detached(
    argv: Sequence[str],
    *,
    log: Path,
    pidfile: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """Starts ``argv`` in a session of its own (``setsid``: a Ctrl-C or the end of the
    harness's process group never reaches it), stdin from /dev/null, stdout and stderr
    appended to ``log``, no other file descriptors; writes its pid to ``pidfile``."""
    program = argv[0]
    if "/" not in program:
        raise ValueError(f"spawn_detached needs a path to the program, not {program!r}")
    args = list(argv)
    if cwd is not None:
        # posix_spawn cannot change directory; env does, then execs the program (same pid)
        args = ["/usr/bin/env", "-C", str(cwd), *args]
        program = args[0]
    log.parent.mkdir(parents=True, exist_ok=True)
    actions: list[tuple[int, ...] | tuple[int, int, str, int, int]] = [
        (os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_fds() if fd > 2
    ]
    actions += [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    pid = os.posix_spawn(
        program,
        args,
        dict(os.environ if env is None else env),
        file_actions=actions,
        setsid=True,
    )
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    pidfile.write_text(f"{pid}\n", encoding="ascii")
    return pid


def _inheritable_fds() -> list[int]:
    """This process's descriptors that a child would inherit (a caller's lock file, a test
    runner's capture files): a broker must not keep them open for its whole life."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if os.get_inheritable(fd):
                found.append(fd)
        except OSError:
            continue  # the descriptor listdir itself used
    return found


def _pids(proc: Path) -> Iterator[int]:
    try:
        entries = list(proc.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.isdigit():
            yield int(entry.name)


def pids_rooted_at(root: Path, proc: Path = PROC) -> list[int]:
    """Processes whose root directory is ``root`` (those running in that chroot)."""
    want = os.path.realpath(root)
    found = []
    for pid in _pids(proc):
        try:
            if os.readlink(proc / str(pid) / "root") == want:
                found.append(pid)
        except OSError:
            continue
    return sorted(found)


def environ_of(pid: int, proc: Path = PROC) -> dict[str, str]:
    """The environment ``pid`` was started with (empty when unreadable)."""
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.decode(errors="replace").partition("=")
        if sep:
            env[key] = value
    return env


def pids_with_environ(
    wanted: Mapping[str, str], among: Iterable[int] | None = None, proc: Path = PROC
) -> list[int]:
    """Processes (of ``among``, or all) whose environment holds every ``KEY=VALUE`` of
    ``wanted``."""
    found = []
    for pid in _pids(proc) if among is None else among:
        env = environ_of(pid, proc)
        if env and all(env.get(k) == v for k, v in wanted.items()):
            found.append(pid)
    return sorted(found)


def comm(pid: int, proc: Path = PROC) -> str:
    """The process's command name (``beam.smp``, ``epmd``, ...), or "" when it is gone."""
    try:
        return (proc / str(pid) / "comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def terminate_rounds(
    pids: Callable[[], list[int]], *, rounds: int = 10, interval: float = 0.5
) -> bool:
    """Signals whatever ``pids()`` returns, round after round (SIGTERM, SIGKILL in the last
    round), until it returns nothing; True when nothing is left."""
    for round_ in range(1, rounds + 1):
        left = pids()
        if not left:
            return True
        for pid in left:
            _signal(pid, signal.SIGKILL if round_ == rounds else signal.SIGTERM)
        time.sleep(interval)
        for pid in left:
            is_running(pid)  # reaps our own children
    return not pids()
