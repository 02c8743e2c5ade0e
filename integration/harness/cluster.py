"""``rabbitmq-cluster``: three RabbitMQ 4.3 nodes (sid) clustered on loopback, in one chroot
that is a copy of ``rabbitmq``'s. Node N (1..3) is ``<prefix>N@localhost`` with stream port
STREAM_PORT+N-1, stream TLS TLS_PORT+N-1 (the harness's throwaway PKI, as ``rabbitmq``'s),
AMQP AMQP_PORT+N-1, distribution DIST_PORT+N-1, stream replication a range of its own from
REPLICATION_PORT (``config.replication_ports``); one epmd. Each node's settings are passed in
its environment (``RABBITMQ_NODENAME``, ``RABBITMQ_CONFIG_FILE``, ...), so the harness finds a
node's processes by ``RABBITMQ_NODENAME`` among the chroot's. Each node runs in a cgroup of
its own where cgroup2 is mounted, so that ``fault partition`` can cut it off
(``partition.py``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import config, partition, tls
from .envfile import log_tail, say, write_env
from .lanes import Context
from .mounts import (
    MOUNT_DATA,
    MountOps,
    SystemMounts,
    bind_chroot,
    claim,
    owner_elsewhere,
    safe_rm_tree,
    unbind_chroot,
)
from .procs import comm, pids_with_environ, terminate_rounds
from .rabbit import (
    BASE_ENV,
    Chroot,
    build_rootfs,
    config_digest,
    ctl_script,
    install_tls,
    prepare_etc,
    tls_listener_config,
    write_ctl,
)
from .readiness import Appears, Outcome, port_open, wait_until

__all__ = ["Cluster", "down", "node_config", "parse_node", "start", "status_lines", "stop", "up"]

LOOPBACK = config.LOOPBACK
SIZE = config.CLUSTER_SIZE
#: Seconds until a node counts a silent peer as down (Erlang's default: 60): a partition of
#: 20 s is noticed, and the majority elects new leaders, within the fault tests' runs.
NET_TICKTIME = 10
NAME = "rabbitmq-cluster"
_COORDINATOR_MEMBERS = (
    "case ra:members({rabbit_stream_coordinator, node()}) of "
    "{ok, M, _} -> [N || {_, N} <- M]; _ -> [] end."
)
_DROP_COORDINATOR_MEMBER = (
    "ra:force_delete_server(coordination, {rabbit_stream_coordinator, node()})."
)


@dataclass(frozen=True)
class Cluster:
    chroot: Chroot
    source: Path  # rabbitmq's chroot, which the cluster's is copied from
    dir: Path
    prefix: str
    stream_base: int
    tls_base: int
    amqp_base: int
    dist_base: int
    epmd_port: int
    replication_base: int

    @classmethod
    def select(cls, ctx: Context) -> Cluster:
        return cls(
            chroot=Chroot(ctx.paths.cache / "rabbitmq-sid-cluster"),
            source=ctx.paths.cache / "rabbitmq-sid",
            dir=ctx.state / NAME,
            prefix=config.setting(NAME, "NODE_PREFIX", ctx.environ),
            stream_base=ctx.port(NAME, "STREAM_PORT"),
            tls_base=ctx.port(NAME, "TLS_PORT"),
            amqp_base=ctx.port(NAME, "AMQP_PORT"),
            dist_base=ctx.port(NAME, "DIST_PORT"),
            epmd_port=ctx.port(NAME, "EPMD_PORT"),
            replication_base=ctx.port(NAME, "REPLICATION_PORT"),
        )

    @property
    def rootfs(self) -> Path:
        return self.chroot.rootfs

    def node(self, n: int) -> str:
        return f"{self.prefix}{n}@localhost"

    def stream(self, n: int) -> int:
        return config.cluster_port(self.stream_base, n)

    def tls(self, n: int) -> int:
        return config.cluster_port(self.tls_base, n)

    def amqp(self, n: int) -> int:
        return config.cluster_port(self.amqp_base, n)

    def dist(self, n: int) -> int:
        return config.cluster_port(self.dist_base, n)

    def replication(self, n: int) -> tuple[int, int]:
        return config.replication_ports(self.replication_base, n)

    def cgroup(self, n: int) -> str:
        """Node ``n``'s cgroup, relative to the cgroup2 root (``partition.node_cgroup``)."""
        return f"{partition.PARENT}/{NAME}-{n}"

    def partition_node(self, n: int) -> partition.Node:
        """Node ``n`` as a partition sees it: its cgroup and the ports its peers reach."""
        return partition.Node(self.cgroup(n), ((self.dist(n), self.dist(n)), self.replication(n)))

    def outside_cgroup(self, n: int) -> bool:
        """Node ``n`` runs, but not in its cgroup (started before the harness put nodes in
        cgroups, or where no cgroup2 is mounted)."""
        return any(partition.cgroup_of(pid) != self.cgroup(n) for pid in self.beam_pids(n))

    def digest(self, n: int) -> str:
        """The hash of what node ``n`` reads at start (its config, the TLS files)."""
        return config_digest(self.rootfs, f"/etc/rabbitmq/node{n}/rabbitmq.conf")

    def digest_file(self, n: int) -> Path:
        """Where the digest node ``n`` was started with is recorded."""
        return self.dir / f"config-{n}.sha256"

    def log(self, n: int) -> Path:
        return self.dir / "data" / f"node{n}" / "log" / f"{self.node(n)}.log"

    def env(self, n: int) -> list[str]:
        return [
            *BASE_ENV,
            f"ERL_EPMD_ADDRESS={LOOPBACK}",
            f"ERL_EPMD_PORT={self.epmd_port}",
            f"RABBITMQ_NODENAME={self.node(n)}",
            "RABBITMQ_USE_LONGNAME=false",
            f"RABBITMQ_NODE_PORT={self.amqp(n)}",
            f"RABBITMQ_DIST_PORT={self.dist(n)}",
            f"RABBITMQ_CONFIG_FILE=/etc/rabbitmq/node{n}/rabbitmq.conf",
            f"RABBITMQ_MNESIA_BASE={MOUNT_DATA}/node{n}/mnesia",
            f"RABBITMQ_LOG_BASE={MOUNT_DATA}/node{n}/log",
        ]

    def ctl(self, n: int, *args: str, log: Path | None = None) -> subprocess.CompletedProcess[str]:
        command = ["timeout", "90", "rabbitmqctl", "-n", self.node(n), *args]
        return self.chroot.run(self.env(n), command, log=log)

    def pids(self, n: int) -> list[int]:
        return pids_with_environ({"RABBITMQ_NODENAME": self.node(n)}, among=self.chroot.pids())

    def beam_pids(self, n: int) -> list[int]:
        return [p for p in self.pids(n) if comm(p) == "beam.smp"]

    def beam_running(self, n: int) -> bool:
        return bool(self.beam_pids(n))

    def cluster_status(self, n: int) -> dict[str, object]:
        done = self.ctl(n, "-q", "cluster_status", "--formatter", "json")
        try:
            parsed = json.loads(done.stdout) if done.returncode == 0 else {}
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}

    def members(self, n: int) -> list[str]:
        """The nodes node ``n`` counts as members of its cluster (``disk_nodes``)."""
        nodes = self.cluster_status(n).get("disk_nodes", [])
        return sorted(str(x) for x in nodes) if isinstance(nodes, list) else []

    def app_stopped(self, n: int) -> bool:
        """Node ``n``'s VM runs but its RabbitMQ application neither runs nor boots (after
        ``stop_app``, or a ``reset`` left half-way through a join)."""
        done = self.ctl(n, "-q", "eval", "rabbit:is_running() orelse rabbit:is_booting().")
        return done.returncode == 0 and done.stdout.strip() == "false"

    def coordinator_members(self, n: int) -> list[str]:
        """The members of the stream coordinator's Ra cluster as node ``n`` knows them (none
        before the first stream, or when ``n`` cannot tell)."""
        done = self.ctl(n, "-q", "eval", _COORDINATOR_MEMBERS)
        return sorted(re.findall(r"[\w.-]+@[\w.-]+", done.stdout)) if done.returncode == 0 else []

    def running_nodes(self, n: int) -> list[str]:
        """The nodes node ``n`` reports as running members of its cluster."""
        nodes = self.cluster_status(n).get("running_nodes", [])
        return sorted(str(x) for x in nodes) if isinstance(nodes, list) else []

    def all_running(self) -> bool:
        return self.running_nodes(1) == sorted(self.node(n) for n in range(1, SIZE + 1))


def parse_node(text: str) -> int | None:
    """``stop|start rabbitmq-cluster N``: N as a node number, None when it is not one."""
    if text.isascii() and text.isdigit() and not text.startswith("0") and 1 <= int(text) <= SIZE:
        return int(text)
    return None


def node_config(c: Cluster, n: int, *, with_tls: bool = False) -> str:
    return f"""\
# written by integration/brokers.sh: rabbitmq-cluster node {n}; loopback only
listeners.tcp.1 = {LOOPBACK}:{c.amqp(n)}
stream.listeners.tcp.1 = {LOOPBACK}:{c.stream(n)}
stream.advertised_host = localhost
stream.advertised_port = {c.stream(n)}
distribution.listener.interface = {LOOPBACK}
distribution.listener.port_range.min = {c.dist(n)}
distribution.listener.port_range.max = {c.dist(n)}
stream.replication.port_range.min = {c.replication(n)[0]}
stream.replication.port_range.max = {c.replication(n)[1]}
net_ticktime = {NET_TICKTIME}
""" + (tls_listener_config(c.tls(n)) if with_tls else "")


def _build_rootfs(ctx: Context, c: Cluster, log: Path, ops: MountOps) -> bool:
    """Copies rabbitmq's sid chroot (building it first if needed), leaving out whatever is
    mounted inside it (/proc, /dev, the data bind) while rabbitmq runs."""
    if (c.rootfs / ".streamwire-complete").is_file():
        return True
    mirror = ctx.environ.get("STREAMWIRE_DEBIAN_MIRROR", "") or "http://deb.debian.org/debian"
    if not build_rootfs(c.source, "sid", "rabbitmq", log, mirror, ops):
        return False
    for old in [*sorted(c.rootfs.parent.glob(f"{c.rootfs.name}.tmp.*")), c.rootfs]:
        if old.exists():
            say(f"{NAME}: removing incomplete chroot {old}")
            if not safe_rm_tree(old, ops):
                return False
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f"{c.rootfs.name}.tmp.", dir=c.rootfs.parent))
    tmp.chmod(0o755)
    say(f"{NAME}: copying {c.source} to {c.rootfs}")
    copy = (
        f"tar -C {_q(c.source)} --one-file-system --exclude='./proc/*' --exclude='./dev/*' "
        f"--exclude='.{MOUNT_DATA}/*' -cf - . | tar -C {_q(tmp)} -xpf -"
    )
    with log.open("a", encoding="utf-8") as out:
        copied = subprocess.run(
            ["bash", "-o", "pipefail", "-c", copy], stderr=out, check=False
        ).returncode
    if copied != 0:
        say(f"{NAME}: copying the chroot failed (see {log})")
        return False
    (tmp / "proc").mkdir(exist_ok=True)
    (tmp / "dev").mkdir(exist_ok=True)
    tmp.rename(c.rootfs)
    say(f"{NAME}: chroot ready in {time.monotonic() - started:.0f} s")
    return True


def _q(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


def _write_config(c: Cluster, with_tls: bool) -> None:
    etc = c.rootfs / "etc" / "rabbitmq"
    for n in range(1, SIZE + 1):
        (etc / f"node{n}").mkdir(parents=True, exist_ok=True)
        text = node_config(c, n, with_tls=with_tls)
        (etc / f"node{n}" / "rabbitmq.conf").write_text(text, encoding="utf-8")
    # everything else comes from each node's environment
    (etc / "rabbitmq-env.conf").write_text(
        "# written by integration/brokers.sh\nUSE_LONGNAME=false\n", encoding="utf-8"
    )
    prepare_etc(c.chroot, c.env(1), ["rabbitmq_stream"])


def _mount(c: Cluster, ops: MountOps) -> None:
    data = c.dir / "data"
    for n in range(1, SIZE + 1):
        (data / f"node{n}" / "mnesia").mkdir(parents=True, exist_ok=True)
        (data / f"node{n}" / "log").mkdir(parents=True, exist_ok=True)
    uid, gid = c.chroot.rabbitmq_ids()
    subprocess.run(["chown", "-R", f"{uid}:{gid}", str(data)], check=True)
    bind_chroot(c.rootfs, data, ops)


def _launch(c: Cluster, n: int, log: Path) -> bool:
    """Starts node ``n`` detached (returns at once; :func:`_wait_ready` waits)."""
    if any(port_open(LOOPBACK, p) for p in (c.stream(n), c.amqp(n), c.tls(n))):
        say(
            f"{NAME}: port {c.stream(n)}, {c.amqp(n)} or {c.tls(n)} is in use by a process "
            "outside the harness"
        )
        return False
    (c.dir / "data" / f"node{n}" / "mnesia" / f"{c.node(n)}.pid").unlink(missing_ok=True)
    say(f"{NAME}: starting node {n}, {c.node(n)} (stream {LOOPBACK}:{c.stream(n)})")
    c.digest_file(n).write_text(c.digest(n) + "\n", encoding="utf-8")
    argv = c.chroot.argv(c.env(n), ["rabbitmq-server", "-detached"])
    argv = partition.in_cgroup(partition.node_cgroup(f"{NAME}-{n}"), argv)
    with log.open("a", encoding="utf-8") as out:
        started = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
    return started.returncode == 0


def _wait_ready(ctx: Context, c: Cluster, n: int, log: Path, started: float) -> bool:
    """The stream port answers and await_startup succeeds."""
    within = max(0.0, 30 - (time.monotonic() - started))
    outcome = wait_until(
        lambda: port_open(LOOPBACK, c.stream(n)),
        Appears(lambda: c.beam_running(n), within=within),
        ctx.timeout(180),
    )
    if outcome is not Outcome.READY:
        say(f"{NAME}: node {n} did not open its stream port ({outcome.value})")
        return False
    return c.ctl(n, "await_startup", "--timeout", "120", log=log).returncode == 0


def _form(c: Cluster, log: Path) -> list[int] | None:
    """Joins every node that is not in node 1's cluster, by node 1's account or by its own
    (a node reset and left standalone, say by a join that stopped half-way): ``stop_app``,
    ``reset``, ``forget_cluster_node`` on node 1 if it still lists the node, ``join_cluster``.
    Returns the nodes joined, their application still stopped (:func:`_rejoined` boots
    them again); ``None`` when a step failed. A no-op once clustered, as membership
    survives restarts."""
    joined = []
    for n in range(2, SIZE + 1):
        if c.node(n) in c.members(1) and c.node(1) in c.members(n):
            continue
        say(f"{NAME}: joining node {n} to {c.node(1)}")
        for step in (["stop_app"], ["reset"]):
            if c.ctl(n, *step, log=log).returncode != 0:
                return None
        stale = c.node(n) in c.members(1)  # node 1 still lists the node it no longer has
        if stale and c.ctl(1, "forget_cluster_node", c.node(n), log=log).returncode != 0:
            return None
        if c.ctl(n, "join_cluster", c.node(1), log=log).returncode != 0:
            return None
        joined.append(n)
    return joined


def _rejoined(ctx: Context, c: Cluster, joined: list[int], log: Path) -> bool:
    """Boots the nodes just joined afresh (stop the VM, start it) rather than ``start_app``,
    so that nothing of their life before the reset runs on, and waits until the stream
    coordinator has them: without that, stream replicas on a rejoined node stayed
    unavailable (STREAM_NOT_AVAILABLE on subscribe, new streams without a member there;
    seen on 4.3.6)."""
    started = time.monotonic()
    for n in joined:
        _stop_node(c, n, log)
        if not _launch(c, n, log):
            return False
    if not all(_wait_ready(ctx, c, n, log, started) for n in joined):
        return False
    return all(_in_stream_coordinator(c, n, log) for n in joined)


def _in_stream_coordinator(c: Cluster, n: int, log: Path) -> bool:
    """The stream coordinator (a Ra cluster of its own, once a stream exists) takes node
    ``n`` in: its leader adds new nodes on its tick (30 s). A node that ran the coordinator
    before its reset may still run a member of its own, which the leader cannot start again
    ("already_started"): that one is dropped (``ra:force_delete_server``) and the leader adds
    the node on its next tick. Seen on 4.3.6 after a reset node 3 joined again."""
    if not c.coordinator_members(1):  # no stream yet: nothing to join
        return True
    if wait_until(lambda: c.node(n) in c.coordinator_members(1), lambda: True, 40) is Outcome.READY:
        return True
    say(f"{NAME}: the stream coordinator does not take node {n} in; dropping its old member")
    c.ctl(n, "-q", "eval", _DROP_COORDINATOR_MEMBER, log=log)
    if wait_until(lambda: c.node(n) in c.coordinator_members(1), lambda: True, 90) is Outcome.READY:
        return True
    say(f"{NAME}: node {n} is not a member of the stream coordinator (see its log)")
    return False


def tls_facts(c: Cluster, tls_dir: Path) -> dict[str, str]:
    """The env facts of the nodes' TLS listeners: every node's port, a URL per node and
    one naming the three (the client tries them in turn), the CA and the client
    certificate."""
    nodes = range(1, SIZE + 1)
    hosts = ",".join(f"localhost:{c.tls(n)}" for n in nodes)
    return {
        "TLS_PORT": str(c.tls(1)),
        "PORT_STREAM_TLS": str(c.tls(1)),
        **{f"PORT_TLS_NODE{n}": str(c.tls(n)) for n in nodes},
        "TLS_URL": f"rabbitmq-stream+tls://guest:guest@localhost:{c.tls(1)}/",
        "TLS_URLS": ",".join(
            f"rabbitmq-stream+tls://guest:guest@localhost:{c.tls(n)}/" for n in nodes
        ),
        "TLS_URL_ALL": f"rabbitmq-stream+tls://guest:guest@{hosts}/",
        "TLS_CA": str(tls_dir / "ca.pem"),
        "TLS_CLIENT_CERT": str(tls_dir / "client.pem"),
        "TLS_CLIENT_KEY": str(tls_dir / "client.key"),
        "ADVERTISED_TLS_HOST": "localhost",
    }


def _write_env(ctx: Context, c: Cluster, tls_up: bool) -> None:
    version = "".join(c.ctl(1, "version").stdout.strip().splitlines()[-1:]).strip() or "unknown"
    per_node: dict[str, str] = {}
    for n in range(1, SIZE + 1):
        per_node |= {
            f"PORT_NODE{n}": str(c.stream(n)),
            f"NODE{n}": c.node(n),
            f"LOG{n}": str(c.log(n)),
            f"CTL{n}": str(c.dir / f"rabbitmqctl-{n}"),
        }
    if tls_up:
        per_node |= tls_facts(c, ctx.state / "tls")
    nodes = range(1, SIZE + 1)
    write_env(
        ctx.state,
        NAME,
        {
            "HOST": LOOPBACK,
            "PORT": str(c.stream(1)),
            "PORT_STREAM": str(c.stream(1)),
            "URL": f"rabbitmq-stream://guest:guest@{LOOPBACK}:{c.stream(1)}/",
            "URLS": ",".join(
                f"rabbitmq-stream://guest:guest@{LOOPBACK}:{c.stream(n)}/" for n in nodes
            ),
            "NODES": ",".join(c.node(n) for n in nodes),
            "SIZE": str(SIZE),
            "PORT_EPMD": str(c.epmd_port),
            "VERSION": version,
            "USER": "guest",
            "PASSWORD": "guest",
            "VHOST": "/",
            "ADVERTISED_HOST": "localhost",
            "BACKEND": "native-chroot",
            "ROOTFS": str(c.rootfs),
            **per_node,
        },
    )


def up(ctx: Context, ops: MountOps | None = None) -> bool:
    mounts = ops or SystemMounts()
    c = Cluster.select(ctx)
    c.dir.mkdir(parents=True, exist_ok=True)
    log = c.dir / "harness.log"
    log.write_text("", encoding="utf-8")
    logs = [c.log(n) for n in range(1, SIZE + 1)]
    build_log = c.dir / "build.log"
    if not _build_rootfs(ctx, c, build_log, mounts):
        return ctx.unavailable(
            NAME, "could not build the Debian sid chroot for the cluster", build_log
        )
    other = owner_elsewhere(c.rootfs, ctx.state)
    if other is not None and any(c.beam_running(n) for n in range(1, SIZE + 1)):
        return ctx.unavailable(
            NAME,
            f"the chroot {c.rootfs} runs nodes of the harness in {other} (a shared "
            "STREAMWIRE_CACHE); give this harness its own cache",
        )
    claim(c.rootfs, ctx.state)
    tls_dir = ctx.state / "tls"
    with_tls = tls.ensure(tls_dir)
    if with_tls:
        install_tls(c.chroot, tls_dir)
    _write_config(c, with_tls)
    _mount(c, mounts)
    started_at = time.monotonic()
    started = False
    # a node started from another configuration (other TLS files, or before the cluster had
    # TLS listeners) is stopped here and started below with the others
    for n in range(1, SIZE + 1):
        if c.beam_running(n) and _started_otherwise(c, n, with_tls):
            say(f"{NAME}: node {n} runs with an older configuration; restarting it")
            _stop_node(c, n, log)
        elif c.beam_running(n) and partition.cgroup_root() and c.outside_cgroup(n):
            say(f"{NAME}: node {n} runs outside its cgroup (fault partition); restarting it")
            _stop_node(c, n, log)
    # start every stopped node at once: a clustered node waits for its peers when it boots
    for n in range(1, SIZE + 1):
        if c.beam_running(n):
            if not port_open(LOOPBACK, c.stream(n)) and c.app_stopped(n):
                say(f"{NAME}: node {n} runs with its application stopped; starting it")
                c.ctl(n, "start_app", log=log)  # a node left out is joined again below
                started = True
            continue
        if not _launch(c, n, log):
            return ctx.unavailable(NAME, f"node {n} could not be started", log, *logs)
        started = True
    for n in range(1, SIZE + 1):
        if not _wait_ready(ctx, c, n, log, started_at):
            return ctx.unavailable(
                NAME, f"node {n} ({c.node(n)}) did not become ready", log, c.log(n)
            )
    formed = not c.all_running()
    joined = _form(c, log) if formed else []
    if formed and (
        joined is None
        or not _rejoined(ctx, c, joined, log)
        or wait_until(c.all_running, lambda: True, 60) is not Outcome.READY
    ):
        running = " ".join(c.running_nodes(1))
        return ctx.unavailable(NAME, f"the nodes did not form one cluster: {running}", log, *logs)
    if started or formed:
        say(f"{NAME}: {SIZE} nodes clustered and ready after {time.monotonic() - started_at:.0f} s")
    else:
        say(f"{NAME}: already running")
    for n in range(1, SIZE + 1):
        write_ctl(c.dir / f"rabbitmqctl-{n}", ctl_script(c.chroot, c.env(n), c.node(n)))
    # TLS facts only when every node's listener answers; a TLS problem never takes the
    # plain listeners down (tests needing TLS then skip)
    closed = [n for n in range(1, SIZE + 1) if not port_open(LOOPBACK, c.tls(n))]
    if with_tls and closed:
        say(
            f"{NAME}: WARNING: the TLS listener of node(s) {closed} is not open (see their "
            "logs); TLS tests will skip"
        )
    tls_up = with_tls and not closed
    _write_env(ctx, c, tls_up)
    shown = f"TLS on {LOOPBACK}:{c.tls(1)}-{c.tls(SIZE)}" if tls_up else "no TLS"
    say(f"{NAME}: up, {' '.join(c.running_nodes(1))} ({shown})")
    return True


def _started_otherwise(c: Cluster, n: int, with_tls: bool) -> bool:
    """Node ``n`` was started with another configuration than the one written now (its
    recorded digest differs), or runs without the TLS listener it should have."""
    file = c.digest_file(n)
    recorded = file.read_text(encoding="utf-8").strip() if file.is_file() else ""
    if recorded != c.digest(n):
        return True
    return with_tls and port_open(LOOPBACK, c.stream(n)) and not port_open(LOOPBACK, c.tls(n))


def _stop_node(c: Cluster, n: int, log: Path) -> None:
    """rabbitmqctl stop, then SIGKILL to the VM if it is still there after 60 s."""
    c.ctl(n, "stop", log=log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not c.beam_running(n):
            return
        time.sleep(0.5)
    say(f"{NAME}: node {n} did not stop within 60 s; killing it")
    terminate_rounds(lambda: c.beam_pids(n), rounds=1)


def down(ctx: Context, ops: MountOps | None = None) -> None:
    c = Cluster.select(ctx)
    if partition.heal():
        say(f"{NAME}: the partition made by fault partition is healed")
    (ctx.state / f"{NAME}.env").unlink(missing_ok=True)
    for n in range(1, SIZE + 1):
        c.digest_file(n).unlink(missing_ok=True)
    if not c.rootfs.is_dir():
        return
    other = owner_elsewhere(c.rootfs, ctx.state)
    if other is not None:  # a shared STREAMWIRE_CACHE: those processes are not ours
        say(f"{NAME}: the chroot {c.rootfs} belongs to the harness in {other}; not stopping it")
        return
    for n in range(SIZE, 0, -1):
        if c.beam_running(n):
            say(f"{NAME}: stopping node {n}")
            c.dir.mkdir(parents=True, exist_ok=True)
            _stop_node(c, n, c.dir / "harness.log")
    terminate_rounds(c.chroot.pids)
    unbind_chroot(c.rootfs, ops or SystemMounts())


def _checked(ctx: Context, text: str) -> int | None:
    n = parse_node(text)
    if n is None:
        say(f"{NAME}: node number must be 1..{SIZE}, not '{text}'")
    return n


def _not_up(ctx: Context) -> bool:
    if (ctx.state / f"{NAME}.env").is_file():
        return False
    say(f"{NAME}: not up (run: integration/brokers.sh up {NAME})")
    return True


def stop(ctx: Context, text: str) -> int:
    """Takes node N down (the others keep serving): 0, 2 for a bad N, 3 when the harness
    runs no cluster."""
    n = _checked(ctx, text)
    if n is None:
        return 2
    if _not_up(ctx):
        return 3
    c = Cluster.select(ctx)
    if not c.beam_running(n):
        say(f"{NAME}: node {n} is already stopped")
        return 0
    say(f"{NAME}: stopping node {n} ({c.node(n)})")
    _stop_node(c, n, c.dir / "harness.log")
    say(f"{NAME}: node {n} stopped")
    return 0


def start(ctx: Context, text: str, ops: MountOps | None = None) -> int:
    """Brings node N back; returns once it is ready and running in the cluster again."""
    n = _checked(ctx, text)
    if n is None:
        return 2
    if _not_up(ctx):
        return 3
    c = Cluster.select(ctx)
    log = c.dir / "harness.log"
    started = time.monotonic()
    if c.beam_running(n):
        say(f"{NAME}: node {n} is already running")
    else:
        _mount(c, ops or SystemMounts())
        if not _launch(c, n, log):
            return 1
    if not _wait_ready(ctx, c, n, log, started):
        tails = log_tail([log, c.log(n)])
        sys.stderr.write("".join(f"    {line}\n" for line in tails.splitlines()))
        return 1
    sees_node1 = wait_until(lambda: c.node(1) in c.running_nodes(n), lambda: True, 60)
    if sees_node1 is not Outcome.READY:
        say(f"{NAME}: node {n} is up but does not see {c.node(1)} as running")
        return 1
    say(f"{NAME}: node {n} ready after {time.monotonic() - started:.0f} s")
    return 0


def status_lines(ctx: Context) -> list[str]:
    """One line per node for ``status``: up, starting or down, and cluster membership."""
    c = Cluster.select(ctx)
    members: list[str] = []
    for n in range(1, SIZE + 1):
        if c.beam_running(n) and port_open(LOOPBACK, c.stream(n)):
            members = c.running_nodes(n)
            if members:
                break
    lines = []
    for n in range(1, SIZE + 1):
        if port_open(LOOPBACK, c.stream(n)):
            state = "up"
        elif c.beam_running(n):
            state = "starting"
        else:
            state = "down"
        where = "running in the cluster" if c.node(n) in members else "not running in the cluster"
        lines.append(
            f"  node {n}  {state:<8} {c.node(n):<22} stream {LOOPBACK}:{c.stream(n)} (TLS "
            f"{c.tls(n)}), {where}"
        )
    return lines
