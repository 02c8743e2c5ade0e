"""RabbitMQ 4.x in Debian chroots: ``rabbitmq`` (sid, 4.3.x) and ``rabbitmq40`` (trixie,
4.0.x), each built once with debootstrap into the cache and run as root through ``chroot``,
with the host's ``/proc`` and ``/dev`` (read-only) and the node's data bind-mounted inside."""

from __future__ import annotations

import hashlib
import os
import resource
import secrets
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import config, oauth2, tls
from .envfile import say, write_env
from .lanes import Context
from .mounts import (
    MOUNT_DATA,
    MountOps,
    SystemMounts,
    bind_chroot,
    claim,
    is_mounted,
    owner_elsewhere,
    safe_rm_tree,
    unbind_chroot,
    unmount_all_under,
)
from .procs import comm, pids_rooted_at, terminate_rounds
from .readiness import port_open, rabbit_started

__all__ = [
    "SUITES",
    "TLS_ETC",
    "Chroot",
    "Node",
    "config_digest",
    "ctl_script",
    "down",
    "install_tls",
    "node_config",
    "restart",
    "tls_listener_config",
    "up",
]

LOOPBACK = config.LOOPBACK
#: the Debian suite each chroot target is built from
SUITES: Mapping[str, str] = {"rabbitmq": "sid", "rabbitmq40": "trixie"}
#: where the broker's CA, certificate and key are copied in the chroot
TLS_ETC = "/etc/rabbitmq/tls"
OAUTH2_ETC = "/etc/rabbitmq/oauth2"
COMPLETE = ".streamwire-complete"  # in a finished chroot: the rabbitmq-server version
DATA_VERSION = ".streamwire-rabbitmq-version"
LIMITS = "etc/security/limits.d/streamwire-rabbitmq.conf"
BASE_ENV = (
    "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=/var/lib/rabbitmq",
    "LANG=C.UTF-8",
    "LC_ALL=C.UTF-8",
)


@dataclass(frozen=True)
class Chroot:
    """A Debian root file system with rabbitmq-server in it."""

    rootfs: Path

    def argv(self, env: Sequence[str], command: Sequence[str]) -> list[str]:
        return ["chroot", str(self.rootfs), "/usr/bin/env", "-i", *env, *command]

    def run(
        self, env: Sequence[str], command: Sequence[str], *, log: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Runs ``command`` inside, its output captured (or appended to ``log``)."""
        if log is None:
            return subprocess.run(
                self.argv(env, command), capture_output=True, text=True, check=False
            )
        with log.open("a", encoding="utf-8") as out:
            return subprocess.run(
                self.argv(env, command), stdout=out, stderr=subprocess.STDOUT, text=True,
                check=False,
            )  # fmt: skip

    def rabbitmq_ids(self) -> tuple[int, int]:
        uid = subprocess.run(["chroot", str(self.rootfs), "id", "-u", "rabbitmq"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        gid = subprocess.run(["chroot", str(self.rootfs), "id", "-g", "rabbitmq"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        return int(uid), int(gid)

    def version(self) -> str:
        return (self.rootfs / COMPLETE).read_text(encoding="utf-8").strip()

    def pids(self) -> list[int]:
        return pids_rooted_at(self.rootfs)

    def beam_pids(self) -> list[int]:
        return [p for p in self.pids() if comm(p) == "beam.smp"]

    def plugins_dir(self) -> str:
        """The plugins folder of the installed RabbitMQ, as seen inside (for the ctl wrapper:
        without RABBITMQ_PLUGINS_DIR the CLI in the chroot finds no plugin commands)."""
        found = sorted(p for p in self.rootfs.glob("usr/lib/rabbitmq/lib/*/plugins") if p.is_dir())
        return "/" + str(found[-1].relative_to(self.rootfs)) if found else ""


def ctl_script(chroot: Chroot, env: Sequence[str], node: str) -> str:
    """``.brokers/<target>/rabbitmqctl``: rabbitmqctl for ``node`` inside the chroot."""
    words = [*chroot.argv(env, []), f"RABBITMQ_PLUGINS_DIR={chroot.plugins_dir()}"]
    words += ["rabbitmqctl", "-n", node]
    return (
        "#!/usr/bin/env bash\n"
        f"# written by integration/brokers.sh: rabbitmqctl for {node} (chroot: run as root)\n"
        f'exec {" ".join(shlex.quote(w) for w in words)} "$@"\n'
    )


def write_ctl(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o755)
    os.replace(tmp, path)


def nofile_limit() -> str:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return "unlimited" if hard == resource.RLIM_INFINITY else str(hard)


def prepare_etc(chroot: Chroot, env: Sequence[str], plugins: Sequence[str]) -> None:
    """What every node in a chroot needs besides its config: the plugins enabled (offline),
    an open-file limit the Debian wrapper's ``su`` keeps (its pam_limits would cut it back
    to 1024) and a ``localhost`` that resolves (short node names)."""
    etc = chroot.rootfs / "etc" / "rabbitmq"
    enabled = etc / "enabled_plugins"
    for plugin in plugins:
        text = enabled.read_text(encoding="utf-8") if enabled.is_file() else ""
        if plugin not in text.replace("[", " ").replace("]", " ").replace(",", " ").split():
            chroot.run(env, ["rabbitmq-plugins", "enable", "--offline", plugin])
    limits = chroot.rootfs / LIMITS
    limits.parent.mkdir(parents=True, exist_ok=True)
    n = nofile_limit()
    limits.write_text(f"rabbitmq soft nofile {n}\nrabbitmq hard nofile {n}\n", encoding="utf-8")
    hosts = chroot.rootfs / "etc" / "hosts"
    text = hosts.read_text(encoding="utf-8") if hosts.is_file() else ""
    if not any(
        line.split()[:1] == ["127.0.0.1"] and "localhost" in line.split()[1:]
        for line in text.splitlines()
    ):
        with hosts.open("a", encoding="utf-8") as f:
            f.write("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")


def ensure_debootstrap(log: Path) -> bool:
    if shutil.which("debootstrap"):
        return True
    say("installing debootstrap")
    with log.open("a", encoding="utf-8") as out:
        install = ["apt-get", *config.APT_WAIT, "install", "-y", "-q", "debootstrap"]
        if subprocess.run(install, stdout=out, stderr=out, check=False).returncode == 0:
            return True
        subprocess.run(["apt-get", "update", "-q"], stdout=out, stderr=out, check=False)
        return subprocess.run(install, stdout=out, stderr=out, check=False).returncode == 0


def build_rootfs(
    rootfs: Path, suite: str, target: str, log: Path, mirror: str, ops: MountOps
) -> bool:
    """Builds the chroot once (debootstrap minbase + rabbitmq-server, the stream plugin
    enabled offline) in a temporary folder that becomes ``rootfs`` when complete."""
    if (rootfs / COMPLETE).is_file():
        return True
    rootfs.parent.mkdir(parents=True, exist_ok=True)
    if not ensure_debootstrap(log):
        say("cannot install debootstrap")
        return False
    for old in sorted(rootfs.parent.glob(f"{rootfs.name}.tmp.*")):
        say(f"{target}: removing interrupted chroot build {old}")
        if not safe_rm_tree(old, ops):
            return False
    if rootfs.exists():
        say(f"{target}: removing incomplete chroot {rootfs}")
        if not safe_rm_tree(rootfs, ops):
            return False
    tmp = Path(tempfile.mkdtemp(prefix=f"{rootfs.name}.tmp.", dir=rootfs.parent))
    tmp.chmod(0o755)  # becomes "/" of the chroot; 0700 would lock out the rabbitmq user
    started = time.monotonic()
    say(
        f"{target}: building the Debian {suite} chroot {rootfs} (debootstrap, about 1-2 "
        "minutes the first time)"
    )
    with log.open("a", encoding="utf-8") as out:
        built = subprocess.run(
            ["debootstrap", "--variant=minbase", "--include=rabbitmq-server", suite, str(tmp),
             mirror], stdout=out, stderr=out, check=False,
        ).returncode == 0  # fmt: skip
    unmount_all_under(tmp, ops)
    if not built:
        say(f"{target}: debootstrap failed")
        return False
    env = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/var/lib/rabbitmq", "LANG=C.UTF-8"]
    chroot = Chroot(tmp)
    if chroot.run(env, ["rabbitmq-plugins", "enable", "--offline", "rabbitmq_stream"],
                  log=log).returncode != 0:  # fmt: skip
        say(f"{target}: rabbitmq-plugins enable --offline rabbitmq_stream failed")
        return False
    version = subprocess.run(
        ["chroot", str(tmp), "dpkg-query", "-W", "-f=${Version}\n", "rabbitmq-server"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    (tmp / COMPLETE).write_text(version, encoding="utf-8")
    tmp.rename(rootfs)
    size = subprocess.run(["du", "-sh", "--one-file-system", str(rootfs)], capture_output=True,
                          text=True, check=False).stdout.split("\t")[0]  # fmt: skip
    say(f"{target}: chroot ready in {time.monotonic() - started:.0f} s ({size})")
    return True


# ---------------------------------------------------------------------------------------------
# one node per chroot: rabbitmq, rabbitmq40


@dataclass(frozen=True)
class Node:
    """A 4.x target: its chroot, folder, node name and ports."""

    target: str
    suite: str
    chroot: Chroot
    dir: Path
    node: str
    stream_port: int
    tls_port: int
    amqp_port: int
    dist_port: int
    epmd_port: int

    @classmethod
    def select(cls, ctx: Context, target: str) -> Node:
        suite = SUITES[target]
        return cls(
            target=target,
            suite=suite,
            chroot=Chroot(ctx.paths.cache / f"rabbitmq-{suite}"),
            dir=ctx.state / target,
            node=config.setting(target, "NODE", ctx.environ),
            stream_port=ctx.port(target, "STREAM_PORT"),
            tls_port=ctx.port(target, "TLS_PORT"),
            amqp_port=ctx.port(target, "AMQP_PORT"),
            dist_port=ctx.port(target, "DIST_PORT"),
            epmd_port=ctx.port(target, "EPMD_PORT"),
        )

    @property
    def env(self) -> list[str]:
        """The environment every RabbitMQ command inside the chroot runs with."""
        return [*BASE_ENV, f"ERL_EPMD_ADDRESS={LOOPBACK}", f"ERL_EPMD_PORT={self.epmd_port}"]

    @property
    def rootfs(self) -> Path:
        return self.chroot.rootfs

    @property
    def node_log(self) -> Path:
        return self.dir / "data" / "log" / f"{self.node}.log"

    def ctl(self, *args: str, log: Path | None = None) -> subprocess.CompletedProcess[str]:
        return self.chroot.run(
            self.env, ["timeout", "90", "rabbitmqctl", "-n", self.node, *args], log=log
        )

    def beam_running(self) -> bool:
        return bool(self.chroot.beam_pids())

    def node_ok(self) -> bool:
        return self.ctl("-q", "status").returncode == 0


def tls_listener_config(port: int) -> str:
    """The ``rabbitmq.conf`` lines of a stream TLS listener on ``port`` (advertised as
    ``localhost``, the name the harness's server certificate is for) with the harness's CA,
    certificate and key as :func:`install_tls` copies them into the chroot."""
    return f"""\
# stream over TLS; client certificates are checked when sent, but not required
stream.listeners.ssl.1 = {LOOPBACK}:{port}
stream.advertised_tls_host = localhost
stream.advertised_tls_port = {port}
ssl_options.cacertfile = {TLS_ETC}/ca.pem
ssl_options.certfile = {TLS_ETC}/server.pem
ssl_options.keyfile = {TLS_ETC}/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
"""


def node_config(n: Node, *, with_tls: bool, with_oauth2: bool = False) -> tuple[str, str]:
    """``rabbitmq.conf`` and ``rabbitmq-env.conf`` of a 4.x node (loopback only)."""
    conf = f"""\
# written by integration/brokers.sh; loopback only
listeners.tcp.1 = {LOOPBACK}:{n.amqp_port}
stream.listeners.tcp.1 = {LOOPBACK}:{n.stream_port}
stream.advertised_host = localhost
stream.advertised_port = {n.stream_port}
distribution.listener.interface = {LOOPBACK}
distribution.listener.port_range.min = {n.dist_port}
distribution.listener.port_range.max = {n.dist_port}
# 4.0's default mechanisms plus EXTERNAL (rabbitmq_auth_mechanism_ssl). The broker offers
# EXTERNAL on TLS connections only; the user is the client certificate's CN.
auth_mechanisms.1 = PLAIN
auth_mechanisms.2 = AMQPLAIN
auth_mechanisms.3 = ANONYMOUS
auth_mechanisms.4 = EXTERNAL
ssl_cert_login_from = common_name
"""
    if with_oauth2:
        conf += f"""\
# internal users first (guest), then OAuth 2 access tokens (RS256 JWTs, as the PLAIN password)
# signed with the harness's key (.brokers/oauth2), audience and scope prefix "{oauth2.RESOURCE}"
auth_backends.1 = rabbit_auth_backend_internal
auth_backends.2 = rabbit_auth_backend_oauth2
auth_oauth2.resource_server_id = {oauth2.RESOURCE}
auth_oauth2.default_key = {oauth2.KEY_ID}
auth_oauth2.signing_keys.{oauth2.KEY_ID} = {OAUTH2_ETC}/{oauth2.PUBLIC}
"""
    if with_tls:
        conf += tls_listener_config(n.tls_port)
    env = f"""\
# written by integration/brokers.sh
NODENAME={n.node}
USE_LONGNAME=false
# Besides distribution.listener.port_range in rabbitmq.conf: the prelaunch check that the
# distribution port is free looks at DIST_PORT (default: AMQP port + 20000) and refuses to boot
# when that port is taken, even by another node on another epmd.
DIST_PORT={n.dist_port}
MNESIA_BASE={MOUNT_DATA}/mnesia
LOG_BASE={MOUNT_DATA}/log
"""
    return conf, env


def config_digest(rootfs: Path, conf: str = "/etc/rabbitmq/rabbitmq.conf") -> str:
    """A hash of everything a node reads at start (config, plugins, limits, the TLS files in
    the chroot), the same value the bash harness recorded: ``up`` restarts a running node
    whose recorded digest differs. ``conf``: the node's ``rabbitmq.conf`` in the chroot (a
    cluster node's is ``/etc/rabbitmq/nodeN/rabbitmq.conf``)."""
    lines = []
    for rel in (
        conf,
        "/etc/rabbitmq/rabbitmq-env.conf",
        "/etc/rabbitmq/enabled_plugins",
        "/" + LIMITS,
        f"{TLS_ETC}/ca.pem",
        f"{TLS_ETC}/server.pem",
        f"{TLS_ETC}/server.key",
        f"{OAUTH2_ETC}/{oauth2.PUBLIC}",
    ):
        path = rootfs / rel.lstrip("/")
        if path.is_file():
            lines.append(f"{rel} {hashlib.sha256(path.read_bytes()).hexdigest()}  -\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def install_tls(chroot: Chroot, source: Path) -> None:
    """Copies the harness's CA, server certificate and key (from ``source``) to
    :data:`TLS_ETC` in the chroot, the key readable by the rabbitmq group only."""
    dst = chroot.rootfs / TLS_ETC.lstrip("/")
    dst.mkdir(parents=True, exist_ok=True)
    dst.chmod(0o755)
    _uid, gid = chroot.rabbitmq_ids()
    for name, mode in (("ca.pem", 0o644), ("server.pem", 0o644), ("server.key", 0o640)):
        tmp = dst / f".{name}.tmp"
        shutil.copyfile(source / name, tmp)
        tmp.chmod(mode)
        if name == "server.key":
            os.chown(tmp, 0, gid)  # readable by the broker's rabbitmq group only
        os.replace(tmp, dst / name)


def _install_oauth2(n: Node, source: Path) -> None:
    dst = n.rootfs / OAUTH2_ETC.lstrip("/")
    dst.mkdir(parents=True, exist_ok=True)
    dst.chmod(0o755)
    tmp = dst / f".{oauth2.PUBLIC}.tmp"
    shutil.copyfile(source / oauth2.PUBLIC, tmp)
    tmp.chmod(0o644)
    os.replace(tmp, dst / oauth2.PUBLIC)


def _write_config(n: Node, with_tls: bool, with_oauth2: bool = False) -> None:
    etc = n.rootfs / "etc" / "rabbitmq"
    etc.mkdir(parents=True, exist_ok=True)
    conf, env = node_config(n, with_tls=with_tls, with_oauth2=with_oauth2)
    (etc / "rabbitmq.conf").write_text(conf, encoding="utf-8")
    (etc / "rabbitmq-env.conf").write_text(env, encoding="utf-8")
    plugins = ["rabbitmq_stream", "rabbitmq_auth_mechanism_ssl"]
    if with_oauth2:
        plugins.append("rabbitmq_auth_backend_oauth2")
    prepare_etc(n.chroot, n.env, plugins)


def _chown_tree(top: Path, uid: int, gid: int) -> None:
    subprocess.run(["chown", "-R", f"{uid}:{gid}", str(top)], check=True)


def _mount(n: Node, ops: MountOps) -> None:
    """Binds the node's data, kept across down/up but only for the RabbitMQ version that
    wrote it: another version's data is test data, and upgrading it in place is not what
    the tests are about, so the node starts empty instead."""
    data = n.dir / "data"
    want = n.chroot.version()
    stamp = data / DATA_VERSION
    have = stamp.read_text(encoding="utf-8").strip() if stamp.is_file() else ""
    mounted = is_mounted(n.rootfs / MOUNT_DATA.lstrip("/"), ops)
    mnesia = data / "mnesia"
    if have != want and not mounted and mnesia.is_dir() and any(mnesia.iterdir()):
        say(
            f"{n.target}: {data} was written by RabbitMQ {have or '(unrecorded version)'}, "
            f"this chroot runs {want}: starting from empty data"
        )
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(data)], check=False)
    (data / "mnesia").mkdir(parents=True, exist_ok=True)
    (data / "log").mkdir(parents=True, exist_ok=True)
    stamp.write_text(want + "\n", encoding="utf-8")
    uid, gid = n.chroot.rabbitmq_ids()
    _chown_tree(data, uid, gid)
    bind_chroot(n.rootfs, data, ops)


def _stop_node(n: Node, log: Path) -> None:
    """rabbitmqctl stop, then SIGKILL to the VM if it is still there after 30 s (epmd and
    the mounts stay, for a restart)."""
    n.ctl("stop", log=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not n.beam_running():
            return
        time.sleep(0.5)
    say(f"{n.target}: the VM did not stop within 30 s; killing it")
    terminate_rounds(n.chroot.beam_pids, rounds=1)


def _retire_previous_default(ctx: Context, n: Node, ops: MountOps) -> None:
    """Before ``rabbitmq`` became sid's 4.3, it was trixie's 4.0 in the chroot that
    ``rabbitmq40`` uses now. A node still running there on ``rabbitmq``'s stream port was
    started by an earlier harness as ``rabbitmq``: stop it and unmount its binds, so that the
    4.3 node can take the ports. A node on any other port stays."""
    old = Chroot(ctx.paths.cache / "rabbitmq-trixie")
    if n.target != "rabbitmq" or n.rootfs == old.rootfs or not old.rootfs.is_dir():
        return
    conf = old.rootfs / "etc" / "rabbitmq" / "rabbitmq.conf"
    line = f"stream.listeners.tcp.1 = {LOOPBACK}:{n.stream_port}"
    try:
        if line not in conf.read_text(encoding="utf-8").splitlines():
            return
    except OSError:
        return
    if not old.pids():
        return
    say(
        f"{n.target}: stopping the RabbitMQ node that an earlier harness started as "
        f"'rabbitmq' in {old.rootfs} (that chroot is rabbitmq40's now, on its own ports)"
    )
    terminate_rounds(old.pids, rounds=40)
    unbind_chroot(old.rootfs, ops)
    conf.unlink(missing_ok=True)  # rewritten by the next `up rabbitmq40`


def _ensure_external_user(n: Node, log: Path) -> bool:
    """The user SASL EXTERNAL logs in as (the client certificate's CN), without a password
    (so PLAIN cannot log in as it), with full permissions on vhost /. Idempotent."""
    user = tls.CLIENT_CN
    perms = n.ctl("-q", "list_user_permissions", "--no-table-headers", user)
    if perms.returncode == 0 and "/\t.*\t.*\t.*" in perms.stdout.splitlines():
        return True
    users = n.ctl("-q", "list_users", "--no-table-headers").stdout.splitlines()
    if user not in [u.split("\t")[0] for u in users]:
        # add_user wants a password: give a random one and clear it at once
        if n.ctl("add_user", user, secrets.token_hex(24), log=log).returncode != 0:
            return False
        if n.ctl("clear_password", user, log=log).returncode != 0:
            return False
    return n.ctl("set_permissions", "-p", "/", user, ".*", ".*", ".*", log=log).returncode == 0


def _mirror(ctx: Context) -> str:
    return ctx.environ.get("STREAMWIRE_DEBIAN_MIRROR", "") or "http://deb.debian.org/debian"


def up(ctx: Context, target: str, ops: MountOps | None = None) -> bool:
    mounts = ops or SystemMounts()
    n = Node.select(ctx, target)
    n.dir.mkdir(parents=True, exist_ok=True)
    log = n.dir / "harness.log"
    log.write_text("", encoding="utf-8")
    build_log = n.dir / "build.log"
    if not build_rootfs(n.rootfs, n.suite, target, build_log, _mirror(ctx), mounts):
        return ctx.unavailable(
            target, f"could not build the Debian {n.suite} chroot with rabbitmq-server", build_log
        )
    other = owner_elsewhere(n.rootfs, ctx.state)
    if other is not None and n.beam_running():
        return ctx.unavailable(
            target,
            f"the chroot {n.rootfs} runs a node of the harness in {other} (a shared "
            "STREAMWIRE_CACHE); give this harness its own cache",
        )
    claim(n.rootfs, ctx.state)
    tls_dir = ctx.state / "tls"
    with_tls = tls.ensure(tls_dir)
    if with_tls:
        install_tls(n.chroot, tls_dir)
    oauth2_dir = ctx.state / "oauth2"
    with_oauth2 = oauth2.ensure(oauth2_dir)
    if with_oauth2:
        _install_oauth2(n, oauth2_dir)
    _write_config(n, with_tls, with_oauth2)
    _mount(n, mounts)
    digest = config_digest(n.rootfs)
    recorded_file = n.dir / "config.sha256"
    started = time.monotonic()
    # A node started from an older configuration (or one whose TLS listener is missing) is
    # restarted, once, so that `up` always leaves the configuration written above running.
    if n.beam_running():
        recorded = (
            recorded_file.read_text(encoding="utf-8").strip() if recorded_file.is_file() else ""
        )
        if recorded != digest:
            say(
                f"{target}: running with an older configuration; restarting it to apply the "
                "current one"
            )
            _stop_node(n, log)
        elif (
            with_tls
            and port_open(LOOPBACK, n.stream_port)
            and not port_open(LOOPBACK, n.tls_port)
            and n.node_ok()
        ):
            say(
                f"{target}: running without its TLS listener {LOOPBACK}:{n.tls_port}; restarting it"
            )
            _stop_node(n, log)
    if n.beam_running() and port_open(LOOPBACK, n.stream_port) and n.node_ok():
        say(f"{target}: already running")
    else:
        if not n.beam_running():
            _retire_previous_default(ctx, n, mounts)
            taken = [n.stream_port, n.amqp_port] + ([n.tls_port] if with_tls else [])
            if any(port_open(LOOPBACK, p) for p in taken):
                return ctx.unavailable(
                    target,
                    f"port {n.stream_port}, {n.amqp_port} or {n.tls_port} is in use by a "
                    "process outside the harness",
                )
            # stale after an unclean stop
            (n.dir / "data" / "mnesia" / f"{n.node}.pid").unlink(missing_ok=True)
            if with_tls:
                say(
                    f"{target}: starting {n.node} (stream {LOOPBACK}:{n.stream_port}, stream TLS "
                    f"{LOOPBACK}:{n.tls_port}, AMQP {LOOPBACK}:{n.amqp_port})"
                )
            else:
                say(
                    f"{target}: starting {n.node} (stream {LOOPBACK}:{n.stream_port}, AMQP "
                    f"{LOOPBACK}:{n.amqp_port}; no TLS)"
                )
            recorded_file.write_text(digest + "\n", encoding="utf-8")
            if n.chroot.run(n.env, ["rabbitmq-server", "-detached"], log=log).returncode != 0:
                return ctx.unavailable(target, "rabbitmq-server -detached failed", log, n.node_log)
        if not rabbit_started(
            ctx.unavailable,
            target,
            "RabbitMQ",
            host=LOOPBACK,
            stream_port=n.stream_port,
            beam_running=n.beam_running,
            ctl=n.ctl,
            timeout=ctx.timeout(120),
            log=log,
            node_log=n.node_log,
        ):
            return False
        say(f"{target}: ready after {time.monotonic() - started:.0f} s")
    # TLS facts are recorded only when the listener answers and the EXTERNAL user exists; a
    # TLS problem never takes the plain listeners down (tests needing TLS then skip).
    tls_facts: dict[str, str] = {}
    tls_up = with_tls and port_open(LOOPBACK, n.tls_port)
    if tls_up:
        tls_facts = {
            "PORT_STREAM_TLS": str(n.tls_port),
            "TLS_PORT": str(n.tls_port),
            "TLS_URL": f"rabbitmq-stream+tls://guest:guest@localhost:{n.tls_port}/",
            "TLS_CA": str(tls_dir / "ca.pem"),
            "TLS_CLIENT_CERT": str(tls_dir / "client.pem"),
            "TLS_CLIENT_KEY": str(tls_dir / "client.key"),
            "ADVERTISED_TLS_HOST": "localhost",
            "ADVERTISED_TLS_PORT": str(n.tls_port),
        }
        if _ensure_external_user(n, log):
            tls_facts["EXTERNAL_USER"] = tls.CLIENT_CN
        else:
            say(f"{target}: could not create the SASL EXTERNAL user {tls.CLIENT_CN} (see {log})")
    elif with_tls:
        say(
            f"{target}: WARNING: the TLS listener {LOOPBACK}:{n.tls_port} is not open (see "
            f"{n.node_log}); TLS tests will skip"
        )
    write_ctl(n.dir / "rabbitmqctl", ctl_script(n.chroot, n.env, n.node))
    version = "".join(n.ctl("version").stdout.strip().splitlines()[-1:]).strip() or "unknown"
    write_env(
        ctx.state,
        target,
        {
            "HOST": LOOPBACK,
            "PORT": str(n.stream_port),
            "PORT_STREAM": str(n.stream_port),
            "PORT_AMQP": str(n.amqp_port),
            "PORT_DIST": str(n.dist_port),
            "PORT_EPMD": str(n.epmd_port),
            "URL": f"rabbitmq-stream://guest:guest@{LOOPBACK}:{n.stream_port}/",
            "AMQP_URL": f"amqp://guest:guest@{LOOPBACK}:{n.amqp_port}/",
            "VERSION": version,
            "USER": "guest",
            "PASSWORD": "guest",
            "VHOST": "/",
            "ADVERTISED_HOST": "localhost",
            "NODE": n.node,
            "BACKEND": "native-chroot",
            "LOG": str(n.node_log),
            "ROOTFS": str(n.rootfs),
            "CTL": str(n.dir / "rabbitmqctl"),
            **tls_facts,
            **(
                {
                    "OAUTH2_SIGNING_KEY": str(oauth2_dir / oauth2.PRIVATE),
                    "OAUTH2_KEY_ID": oauth2.KEY_ID,
                    "OAUTH2_RESOURCE": oauth2.RESOURCE,
                }
                if with_oauth2
                else {}
            ),
        },
    )
    if tls_up:
        say(f"{target}: up, version {version} (TLS on {LOOPBACK}:{n.tls_port})")
    else:
        say(f"{target}: up, version {version} (no TLS)")
    return True


def down(ctx: Context, target: str, ops: MountOps | None = None) -> None:
    n = Node.select(ctx, target)
    (ctx.state / f"{target}.env").unlink(missing_ok=True)
    (n.dir / "config.sha256").unlink(missing_ok=True)
    if not n.rootfs.is_dir():
        return
    other = owner_elsewhere(n.rootfs, ctx.state)
    if other is not None:  # a shared STREAMWIRE_CACHE: those processes are not ours
        say(f"{target}: the chroot {n.rootfs} belongs to the harness in {other}; not stopping it")
        return
    if n.beam_running():
        say(f"{target}: stopping {n.node}")
        n.dir.mkdir(parents=True, exist_ok=True)
        n.ctl("stop", log=n.dir / "harness.log")
    # whatever still runs inside the chroot (epmd, a wedged VM): TERM, then KILL
    terminate_rounds(n.chroot.pids)
    unbind_chroot(n.rootfs, ops or SystemMounts())


def restart(ctx: Context, target: str) -> int:
    """Stops the VM only (data, mounts, epmd and the env file stay) and runs ``up``: 0 up
    again, 1 not, 3 when the harness does not run it."""
    n = Node.select(ctx, target)
    if not n.beam_running():
        say(f"{target}: the harness does not run it; nothing to restart")
        return 3
    say(f"{target}: stopping {n.node} for a restart")
    _stop_node(n, n.dir / "harness.log")
    (ctx.state / f"{target}.unavailable").unlink(missing_ok=True)
    return 0 if up(ctx, target) else 1
