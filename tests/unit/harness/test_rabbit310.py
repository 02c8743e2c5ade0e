"""rabbitmq310 on the host: its config, its environment, and which processes count as its
node (real processes standing in for a VM, found by their environment)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

from integration.harness import procs, rabbit310


def _node(directory: Path, name: str) -> rabbit310.Node310:
    return rabbit310.Node310(
        dir=directory, node=name, stream_port=17553, amqp_port=17673, dist_port=17627,
        epmd_port=17370,
    )  # fmt: skip


def test_config_and_environment(tmp_path: Path) -> None:
    n = _node(tmp_path, "h2rabbit310@localhost")
    text = rabbit310.node_config(n)
    assert "stream.listeners.tcp.1 = 127.0.0.1:17553\n" in text
    assert "distribution.listener.port_range.max = 17627\n" in text
    env = n.env()
    assert env["RABBITMQ_NODENAME"] == "h2rabbit310@localhost"
    assert env["RABBITMQ_MNESIA_BASE"] == str(tmp_path / "data" / "mnesia")
    assert env["ERL_EPMD_PORT"] == "17370"
    assert env["RABBITMQ_CONFIG_FILE"] == str(tmp_path / "rabbitmq.conf")
    assert n.node_log == tmp_path / "data" / "log" / "h2rabbit310@localhost.log"


def test_a_node_of_the_same_name_from_another_state_folder_is_not_ours(tmp_path: Path) -> None:
    name = f"t{uuid.uuid4().hex[:8]}@localhost"
    ours, theirs = _node(tmp_path / "ours", name), _node(tmp_path / "theirs", name)
    spawned: list[Path] = []
    for node in (ours, theirs):
        pidfile = tmp_path / f"{len(spawned)}.pid"
        env = {**os.environ, **node.env()}
        procs.spawn_detached(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            log=tmp_path / "log",
            pidfile=pidfile,
            env=env,
        )
        spawned.append(pidfile)
    try:
        ours_pid, theirs_pid = (procs.read_pid(p) for p in spawned)
        assert ours.pids() == [ours_pid]
        assert theirs.pids() == [theirs_pid]
        assert not ours.beam_running()  # python, not beam.smp
    finally:
        for pidfile in spawned:
            procs.stop_pid("stand-in", pidfile)
