"""Readiness: TCP probes on real sockets and the poll loop."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from integration.harness import procs, readiness
from integration.harness.readiness import Outcome


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_port_open_on_a_listening_socket_and_not_after_it_closed() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert readiness.port_open("127.0.0.1", port)
    assert not readiness.port_open("127.0.0.1", port, timeout=0.5)


def test_file_contains(tmp_path: Path) -> None:
    log = tmp_path / "lb.log"
    assert not readiness.file_contains(log, "leader")
    log.write_text("starting\nServer became metadata leader\n", encoding="utf-8")
    assert readiness.file_contains(log, "Server became metadata leader")
    assert not readiness.file_contains(log, "follower")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps = 0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1


def test_wait_until_ready_after_a_few_polls() -> None:
    clock = _Clock()
    answers = iter([False, False, True])
    outcome = wait = readiness.wait_until(
        lambda: next(answers), lambda: True, 10, clock=clock, sleep=clock.sleep
    )
    assert wait is outcome is Outcome.READY
    assert clock.sleeps == 2


def test_wait_until_gives_up_at_the_deadline() -> None:
    clock = _Clock()
    outcome = readiness.wait_until(lambda: False, lambda: True, 3, clock=clock, sleep=clock.sleep)
    assert outcome is Outcome.TIMEOUT
    assert clock.now == 3.0  # 0.5 s steps


def test_wait_until_stops_early_when_the_process_died() -> None:
    clock = _Clock()
    outcome = readiness.wait_until(lambda: False, lambda: False, 60, clock=clock, sleep=clock.sleep)
    assert outcome is Outcome.DIED
    assert clock.sleeps == 0


def test_ready_wins_over_dead() -> None:
    # a broker that answered and exited right after still counts as ready
    assert readiness.wait_until(lambda: True, lambda: False, 1) is Outcome.READY


_LISTEN_LATER = """
import socket, sys, time
time.sleep(0.3)
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
time.sleep(30)
"""


def test_waiting_for_a_real_process_that_listens_late(tmp_path: Path) -> None:
    port = _free_port()
    pidfile = tmp_path / "p.pid"
    pid = procs.spawn_detached(
        [sys.executable, "-c", _LISTEN_LATER, str(port)], log=tmp_path / "log", pidfile=pidfile
    )
    try:
        outcome = readiness.wait_until(
            lambda: readiness.port_open("127.0.0.1", port),
            lambda: procs.is_running(pid),
            20,
            interval=0.05,
        )
        assert outcome is Outcome.READY
    finally:
        procs.stop_pid("listener", pidfile)


def test_waiting_for_a_real_process_that_exits_says_died(tmp_path: Path) -> None:
    port = _free_port()
    pid = procs.spawn_detached(
        [sys.executable, "-c", "raise SystemExit(3)"],
        log=tmp_path / "log",
        pidfile=tmp_path / "p.pid",
    )
    outcome = readiness.wait_until(
        lambda: readiness.port_open("127.0.0.1", port),
        lambda: procs.is_running(pid),
        20,
        interval=0.05,
    )
    assert outcome is Outcome.DIED


def test_appears_waits_for_a_late_process_and_then_follows_it() -> None:
    clock = _Clock()
    states = iter([False, False, True, True, False])
    alive = readiness.Appears(lambda: next(states), within=30, clock=clock)
    assert alive()  # not there yet, but launched a moment ago
    clock.now = 10
    assert alive()
    assert alive()  # there
    assert alive.seen
    assert alive()
    assert not alive()  # seen, then gone: it died


def test_appears_gives_up_when_the_process_never_shows() -> None:
    clock = _Clock()
    alive = readiness.Appears(lambda: False, within=30, clock=clock)
    assert alive()
    clock.now = 30
    assert not alive()
