"""``integration/brokers.sh fault partition``'s mechanism (``partition.py``): the rules it
writes, and, on this machine's kernel, what they do to real TCP connections between
processes in cgroups of their own: the isolated one and its peers neither reach each other
(new connections, and connections open before the partition, both ways), peers still reach
each other, a process outside the cgroups still reaches everyone, and healing restores all
of it. Needs root, cgroup2 and iptables (installed from Debian when missing)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.harness import partition
from integration.harness.partition import Node
from tests.brokers import skip_missing

MOUNTS = """\
sysfs /sys sysfs rw 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""


def test_the_cgroup2_root_comes_from_the_mount_table() -> None:
    assert partition.cgroup_root(MOUNTS) == Path("/sys/fs/cgroup/unified")
    assert partition.cgroup_root("cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\n") is None


def test_rules_mark_both_directions_to_the_owners_ports_and_drop_what_is_marked() -> None:
    a = Node("sw/a", ((25681, 25681), (6600, 6699)))
    b = Node("sw/b", ((25682, 25682), (6700, 6799)))
    c = Node("sw/c", ((25683, 25683), (6800, 6899)))
    got = partition.rules(a, [b, c])
    mark = ["-j", "CONNMARK", "--set-mark", partition.MARK]
    tcp = ["-p", "tcp", "-m", "multiport", "--dports"]
    assert got == [
        ["-m", "cgroup", "--path", "sw/a", *tcp, "25682,6700:6799", *mark],
        ["-m", "cgroup", "--path", "sw/b", *tcp, "25681,6600:6699", *mark],
        ["-m", "cgroup", "--path", "sw/a", *tcp, "25683,6800:6899", *mark],
        ["-m", "cgroup", "--path", "sw/c", *tcp, "25681,6600:6699", *mark],
        ["-m", "connmark", "--mark", partition.MARK, "-j", "DROP"],
    ]


def test_a_command_starts_inside_its_cgroup() -> None:
    root = partition.cgroup_root()
    if root is None or os.geteuid() != 0:
        skip_missing("starting a process in a cgroup needs root and cgroup2")
    name = partition.node_cgroup(f"test-{uuid.uuid4().hex[:8]}")
    assert name is not None
    try:
        argv = partition.in_cgroup(name, [sys.executable, "-c", "import os; print(os.getpid())"])
        pid = int(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
        assert pid > 0
        probe = [sys.executable, "-c", "print(open('/proc/self/cgroup').read())"]
        out = subprocess.run(
            partition.in_cgroup(name, probe), capture_output=True, text=True, check=True
        )
        assert f"0::/{name}" in out.stdout
    finally:
        (root / name).rmdir()


# --- on the kernel ---------------------------------------------------------------------

ECHO = """\
import socket, sys, threading
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
def serve(conn):
    while data := conn.recv(100):
        conn.sendall(data)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""

DIAL = """\
import socket, sys
kept = {}
for line in sys.stdin:
    verb, port = line.split()
    try:
        if verb == "new":
            s = socket.create_connection(("127.0.0.1", int(port)), timeout=1.5)
            s.settimeout(1.5)
            s.sendall(b"x"); ok = s.recv(1) == b"x"; s.close()
        else:  # "open": once, then "kept": over the connection opened then
            if verb == "open":
                kept[port] = socket.create_connection(("127.0.0.1", int(port)), timeout=1.5)
                kept[port].settimeout(1.5)
            kept[port].sendall(b"y"); ok = kept[port].recv(1) == b"y"
    except OSError:
        ok = False
    print("ok" if ok else "cut", flush=True)
"""


class Member:
    """A process in a cgroup of its own that serves an echo port and dials on request."""

    def __init__(self, cgroup: str) -> None:
        self.cgroup = cgroup
        self.server = subprocess.Popen(
            partition.in_cgroup(cgroup, [sys.executable, "-c", ECHO]),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.server.stdout is not None
        self.port = int(self.server.stdout.readline())
        self.dialer = subprocess.Popen(
            partition.in_cgroup(cgroup, [sys.executable, "-c", DIAL]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    @property
    def node(self) -> Node:
        return Node(self.cgroup, ((self.port, self.port),))

    def reaches(self, other: Member, verb: str = "new") -> bool:
        assert self.dialer.stdin is not None
        assert self.dialer.stdout is not None
        self.dialer.stdin.write(f"{verb} {other.port}\n")
        self.dialer.stdin.flush()
        return self.dialer.stdout.readline().strip() == "ok"

    def close(self) -> None:
        for process in (self.server, self.dialer):
            process.kill()
            process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()


@pytest.fixture
def members() -> Iterator[list[Member]]:
    root = partition.cgroup_root()
    if root is None or os.geteuid() != 0:
        skip_missing("a partition needs root and a cgroup2 hierarchy")
    tag = uuid.uuid4().hex[:8]
    names = [partition.node_cgroup(f"test-{tag}-{n}") for n in range(3)]
    assert all(names), "cannot create cgroups under the cgroup2 root"
    group = [Member(name) for name in names if name]
    try:
        yield group
    finally:
        for member in group:
            member.close()
        for name in names:
            if name:
                (root / name).rmdir()


def _reach(b: Member) -> bool:
    with socket.create_connection(("127.0.0.1", b.port), timeout=1.5) as s:
        s.settimeout(1.5)
        s.sendall(b"z")
        return s.recv(1) == b"z"


def _seen(pairs: dict[str, tuple[Member, Member, str]]) -> dict[str, bool]:
    return {name: a.reaches(b, verb) for name, (a, b, verb) in pairs.items()}


def test_a_partition_cuts_the_isolated_member_off_both_ways_and_healing_restores_it(
    members: list[Member], tmp_path: Path
) -> None:
    a, b, c = members
    chain = f"SW-TEST-{uuid.uuid4().hex[:8]}"
    before = _seen({"a-b open": (a, b, "open"), "b-a open": (b, a, "open")})
    assert before == {"a-b open": True, "b-a open": True}
    pairs = {
        name: (x, y, verb)
        for name, x, y, verb in [
            ("a-b", a, b, "new"),
            ("b-a", b, a, "new"),
            ("a-c", a, c, "new"),
            ("c-a", c, a, "new"),
            ("a-b kept", a, b, "kept"),  # connections open before the partition
            ("b-a kept", b, a, "kept"),
            ("b-c", b, c, "new"),  # the majority side
            ("c-b", c, b, "new"),
        ]
    }
    try:
        partition.partition(a.node, [b.node, c.node], tmp_path / "log", chain=chain)
        during = _seen(pairs)
        outside = {"to a": _reach(a), "to b": _reach(b)}  # a client outside the cgroups
    finally:
        healed = partition.heal(chain=chain)
    assert during == {name: name.startswith(("b-c", "c-b")) for name in pairs}
    assert outside == {"to a": True, "to b": True}
    assert healed
    new = {name: pair for name, pair in pairs.items() if pair[2] == "new"}
    assert _seen(new) == dict.fromkeys(new, True)
    assert not partition.heal(chain=chain)  # nothing left to heal
