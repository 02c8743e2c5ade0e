"""``integration/brokers.sh fault``: process faults on a broker the harness runs.

* ``pause``: SIGSTOP to the server process (RabbitMQ: the Erlang VM). The kernel keeps its
  sockets: connections stay open, bytes are accepted until the windows fill, nothing is
  answered. What a hung server, a long GC pause or a frozen VM looks like to a client.
* ``resume``: SIGCONT after ``pause``; the server carries on with what it knew then.
* ``kill``: SIGKILL, no goodbye (a crash); returns once the process is gone.
* ``revive``: start it again **on its data**, as a restart after a crash would (``up``
  starts Liftbridge and Iggy on fresh data directories; this does not).
* ``partition`` (``rabbitmq-cluster N`` only): cut node N off from its peers, silently,
  both ways; clients still reach every node (``partition.py``). ``heal`` ends it.

Targets: ``rabbitmq``, ``rabbitmq40``, ``rabbitmq310``, ``rabbitmq-cluster N`` (one node),
``nats``, ``liftbridge`` (the plain server; its TLS listeners are other processes) and
``iggy`` (a server named by IGGY_SERVER_BIN). Native backend only.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping

from . import cluster, config, lanes, partition, rabbit, rabbit310
from .envfile import read_env, say
from .procs import is_running, read_pid

__all__ = ("SIGNALS", "TARGETS", "VERBS", "fault", "pids")

SIGNALS: Mapping[str, signal.Signals] = {
    "pause": signal.SIGSTOP,
    "resume": signal.SIGCONT,
    "kill": signal.SIGKILL,
}
VERBS = (*SIGNALS, "revive", "partition", "heal")
#: The verbs that act on the network between the cluster's nodes, not on a process.
NETWORK_VERBS = ("partition", "heal")
#: The harness's brokers that run as processes of their own (Spark's lanes are not faulted).
TARGETS = tuple(t for t in config.KNOWN_TARGETS if not t.startswith("spark"))
#: The pid file of each server the harness starts under one (lanes.py).
_PIDFILES: Mapping[str, str] = {
    "nats": "nats/nats.pid",
    "liftbridge": "liftbridge/liftbridge.pid",
    "iggy": "iggy/iggy.pid",
}
#: Seconds ``kill`` waits for the process to be gone.
KILL_WAIT = 15.0


def pids(ctx: lanes.Context, target: str, node: int | None = None) -> list[int]:
    """The processes of ``target`` (of its node ``node`` for the cluster) that a fault
    signals: the server itself, not its helpers (epmd, the Erlang port programs)."""
    if target in rabbit.SUITES:
        return rabbit.Node.select(ctx, target).chroot.beam_pids()
    if target == "rabbitmq310":
        return rabbit310.Node310.select(ctx).beam_pids()
    if target == "rabbitmq-cluster":
        if node is None:
            raise ValueError("rabbitmq-cluster needs a node number")
        return cluster.Cluster.select(ctx).beam_pids(node)
    pid = read_pid(ctx.state / _PIDFILES[target])
    return [pid] if pid is not None and is_running(pid) else []


def _recorded(ctx: lanes.Context, target: str) -> lanes.Context:
    """``ctx``, with the Iggy binary the harness started (its env file's BINARY) when
    IGGY_SERVER_BIN is not set here: a revive starts what was killed."""
    env_file = ctx.state / f"{target}.env"
    if target != "iggy" or ctx.environ.get("IGGY_SERVER_BIN") or not env_file.is_file():
        return ctx
    binary = read_env(env_file).get("BINARY", "")
    return lanes.Context(ctx.paths, {**ctx.environ, "IGGY_SERVER_BIN": binary}) if binary else ctx


def _revive(ctx: lanes.Context, target: str, node: int | None) -> int:
    ctx = _recorded(ctx, target)
    starts: Mapping[str, Callable[[], bool | int]] = {
        "rabbitmq": lambda: rabbit.up(ctx, "rabbitmq"),
        "rabbitmq40": lambda: rabbit.up(ctx, "rabbitmq40"),
        "rabbitmq310": lambda: rabbit310.up(ctx),
        "rabbitmq-cluster": lambda: cluster.start(ctx, str(node)) == 0,
        "nats": lambda: lanes.up_nats(ctx),
        "liftbridge": lambda: lanes.up_liftbridge(ctx, fresh=False),
        "iggy": lambda: lanes.up_iggy(ctx, fresh=False),
    }
    for pid in pids(ctx, target, node):  # a paused server would never answer "running"
        os.kill(pid, signal.SIGCONT)
    return 0 if starts[target]() else 1


def _network(ctx: lanes.Context, verb: str, target: str, node: int | None) -> int:
    """``partition rabbitmq-cluster N`` and ``heal rabbitmq-cluster``."""
    if target != "rabbitmq-cluster" or (verb == "partition") != (node is not None):
        say("fault: partition takes rabbitmq-cluster N; heal takes rabbitmq-cluster")
        return 2
    if verb == "heal":
        say("rabbitmq-cluster: " + ("healed" if partition.heal() else "no partition to heal"))
        return 0
    assert node is not None
    c = cluster.Cluster.select(ctx)
    try:
        config.cluster_port(0, node)
    except config.SettingError as exc:
        say(f"fault: {exc}")
        return 2
    outside = [n for n in range(1, config.CLUSTER_SIZE + 1) if c.outside_cgroup(n)]
    if outside or not any(c.beam_running(n) for n in range(1, config.CLUSTER_SIZE + 1)):
        say(
            f"rabbitmq-cluster: node(s) {outside or 'all'} not running in their cgroups; "
            "integration/brokers.sh up rabbitmq-cluster starts them there"
        )
        return 3
    peers = [c.partition_node(n) for n in range(1, config.CLUSTER_SIZE + 1) if n != node]
    c.dir.mkdir(parents=True, exist_ok=True)
    try:
        partition.partition(c.partition_node(node), peers, c.dir / "harness.log")
    except partition.Unavailable as exc:
        say(f"rabbitmq-cluster: cannot partition node {node}: {exc}")
        return 1
    say(f"rabbitmq-cluster node {node}: cut off from its peers (fault heal rabbitmq-cluster)")
    return 0


def fault(ctx: lanes.Context, verb: str, target: str, node: int | None = None) -> int:
    """0 done, 2 a bad verb or target, 3 when the harness runs no process of ``target``,
    1 when ``kill`` did not end it or ``revive`` did not bring it back."""
    where = f"{target} node {node}" if node is not None else target
    if verb not in VERBS or target not in TARGETS:
        say(f"fault: no {verb!r} for {target!r} (verbs: {', '.join(VERBS)})")
        return 2
    if verb in NETWORK_VERBS:
        return _network(ctx, verb, target, node)
    if (target == "rabbitmq-cluster") != (node is not None):
        say("fault: a node number goes with rabbitmq-cluster, and only with it")
        return 2
    if verb == "revive":
        say(f"{where}: starting again on its data")
        return _revive(ctx, target, node)
    found = pids(ctx, target, node)
    if not found:
        say(f"{where}: the harness runs no process of it; nothing to {verb}")
        return 3
    for pid in found:
        os.kill(pid, SIGNALS[verb])
    say(f"{where}: {SIGNALS[verb].name} to pid {', '.join(map(str, found))}")
    if verb == "kill":
        deadline = time.monotonic() + KILL_WAIT
        while any(is_running(pid) for pid in found):
            if time.monotonic() > deadline:
                say(f"{where}: still running {KILL_WAIT:g} s after SIGKILL")
                return 1
            time.sleep(0.05)
    return 0
