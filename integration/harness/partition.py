"""Network partitions between the nodes of ``rabbitmq-cluster``, which all live on loopback:
``integration/brokers.sh fault partition rabbitmq-cluster N`` cuts node N off from its peers,
``fault heal rabbitmq-cluster`` joins them again. Clients still reach every node: only the
traffic between nodes is cut, silently (packets dropped, no reset), both ways, as a switch
failing between racks would.

How: each node is started inside a cgroup (v2) of its own (:func:`in_cgroup`), so every socket
it opens carries that cgroup. A node reaches a peer on ports the peer owns: its Erlang
distribution port and its stream replication range (``cluster.py`` gives every node ranges
of its own). A partition is an iptables chain on OUTPUT (loopback traffic leaves through it
both ways) that puts a connection mark on every connection from node N's cgroup to a peer's
ports, and from a peer's cgroup to node N's, and drops every packet of a marked connection.
Connections already open are caught by their next packet (a tick, a replication write);
healing removes the rules, and marked connections that are still open carry on.

Needs root, a cgroup2 hierarchy (``/proc/self/mounts``) and iptables (installed from Debian
when missing, as debootstrap is); :class:`Unavailable` says which is missing.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .config import APT_WAIT

__all__ = [
    "CHAIN",
    "MARK",
    "Node",
    "Unavailable",
    "cgroup_of",
    "cgroup_root",
    "ensure_iptables",
    "heal",
    "install",
    "lose",
    "loss_rules",
    "in_cgroup",
    "node_cgroup",
    "partition",
    "rules",
]

CHAIN = "STREAMWIRE-PARTITION"
#: The connection mark of a partitioned connection.
MARK = "0x5157"
#: Where iptables' installation log goes when no log is given.
LOG = "streamwire-iptables.log"
#: Where the harness's cgroups live, under the cgroup2 root.
PARENT = "streamwire"


class Unavailable(Exception):
    """A partition cannot be made here (the message says what is missing)."""


@dataclass(frozen=True)
class Node:
    """What a partition needs of one node: its cgroup (relative to the cgroup2 root) and the
    ports peers connect to (``(first, last)`` ranges)."""

    cgroup: str
    ports: tuple[tuple[int, int], ...]


def cgroup_root(mounts: str | None = None) -> Path | None:
    """Where the cgroup2 hierarchy is mounted (``None``: nowhere)."""
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text(encoding="utf-8")
        except OSError:
            return None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def node_cgroup(name: str) -> str | None:
    """The cgroup ``streamwire/<name>`` (created when missing), relative to the cgroup2 root;
    ``None`` without a writable cgroup2 hierarchy."""
    root = cgroup_root()
    if root is None:
        return None
    relative = f"{PARENT}/{name}"
    try:
        (root / relative).mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return relative


def in_cgroup(cgroup: str | None, argv: Sequence[str]) -> list[str]:
    """``argv`` started inside ``cgroup`` (what it forks stays there); as is for ``None``."""
    root = cgroup_root()
    if cgroup is None or root is None:
        return list(argv)
    procs = str(root / cgroup / "cgroup.procs")
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *argv]


def cgroup_of(pid: int) -> str | None:
    """The cgroup2 path of process ``pid`` relative to the root (``None``: unknown)."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:].strip("/")
    return None


def _ports(ranges: Sequence[tuple[int, int]]) -> str:
    return ",".join(str(a) if a == b else f"{a}:{b}" for a, b in ranges)


def rules(isolated: Node, peers: Sequence[Node]) -> list[list[str]]:
    """The chain's rules (``iptables -A CHAIN`` arguments) cutting ``isolated`` off from
    ``peers``: mark connections either side opens to the other's ports, drop marked ones."""
    out: list[list[str]] = []
    for peer in peers:
        for source, target in ((isolated, peer), (peer, isolated)):
            by = ["-m", "cgroup", "--path", source.cgroup]
            to = ["-p", "tcp", "-m", "multiport", "--dports", _ports(target.ports)]
            out.append([*by, *to, "-j", "CONNMARK", "--set-mark", MARK])
    out.append(["-m", "connmark", "--mark", MARK, "-j", "DROP"])
    return out


def ensure_iptables(log: Path) -> str:
    """The iptables binary, installed from Debian when missing; :class:`Unavailable`."""
    found = shutil.which("iptables")
    if found:
        return found
    with log.open("a", encoding="utf-8") as out:
        install = ["apt-get", *APT_WAIT, "install", "-y", "-q", "iptables"]
        if subprocess.run(install, stdout=out, stderr=out, check=False).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], stdout=out, stderr=out, check=False)
            subprocess.run(install, stdout=out, stderr=out, check=False)
    found = shutil.which("iptables")
    if not found:
        raise Unavailable(f"iptables is missing and apt-get could not install it (see {log})")
    return found


def _iptables(binary: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary, "-w", "10", *args], capture_output=True, text=True, check=False)


def partition(isolated: Node, peers: Sequence[Node], log: Path, *, chain: str = CHAIN) -> None:
    """Cut ``isolated`` off from ``peers`` (replacing any partition made before in
    ``chain``)."""
    if cgroup_root() is None:
        raise Unavailable("no cgroup2 hierarchy is mounted (/proc/self/mounts)")
    install(chain, rules(isolated, peers), log)


def loss_rules(port: int, probability: float) -> list[list[str]]:
    """Rules dropping each TCP packet to or from local ``port`` with ``probability``."""
    chance = ["-m", "statistic", "--mode", "random", "--probability", f"{probability:.6f}"]
    sides = ("--dport", "--sport")
    return [["-p", "tcp", side, str(port), *chance, "-j", "DROP"] for side in sides]


def lose(port: int, probability: float, log: Path | None = None) -> str:
    """Drop packets to and from local ``port`` with ``probability`` (loopback traffic passes
    OUTPUT both ways) until :func:`heal` of the chain returned."""
    chain = f"STREAMWIRE-LOSS-{port}"
    install(chain, loss_rules(port, probability), log or Path(tempfile.gettempdir()) / LOG)
    return chain


def install(chain: str, chain_rules: Sequence[Sequence[str]], log: Path) -> None:
    """``chain`` with ``chain_rules``, first on OUTPUT (replacing a chain of that name)."""
    binary = ensure_iptables(log)
    heal(chain=chain)
    steps = [["-N", chain]] + [["-A", chain, *rule] for rule in chain_rules]
    steps.append(["-I", "OUTPUT", "1", "-j", chain])
    for step in steps:
        done = _iptables(binary, *step)
        if done.returncode != 0:
            heal(chain=chain)
            raise Unavailable(f"iptables {' '.join(step)} failed: {done.stderr.strip()}")


def heal(*, chain: str = CHAIN) -> bool:
    """Remove the partition in ``chain``, if any; whether there was one."""
    binary = shutil.which("iptables")
    if binary is None:
        return False
    if _iptables(binary, "-n", "-L", chain).returncode != 0:
        return False
    while _iptables(binary, "-D", "OUTPUT", "-j", chain).returncode == 0:
        pass
    _iptables(binary, "-F", chain)
    _iptables(binary, "-X", chain)
    return True
