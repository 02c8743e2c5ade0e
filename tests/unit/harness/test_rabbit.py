"""The RabbitMQ 4.x chroot lane: what it writes into a chroot, and the digest that decides
whether a running node is restarted. (Building a chroot and running a node need root and
minutes; the harness verification in docs/brokers.md covers those.)"""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

from integration.harness import config, lanes, rabbit


def _node(tmp_path: Path, **environ: str) -> rabbit.Node:
    paths = config.Paths(tmp_path, tmp_path / "cache", tmp_path / "venv", tmp_path / "state")
    return rabbit.Node.select(lanes.Context(paths, environ), "rabbitmq40")


def test_select_reads_the_moved_ports_and_node_name(tmp_path: Path) -> None:
    n = _node(tmp_path, STREAMWIRE_RABBITMQ40_STREAM_PORT="17554", STREAMWIRE_RABBITMQ40_NODE="x@y")
    assert (n.suite, n.node, n.stream_port, n.tls_port) == ("trixie", "x@y", 17554, 5555)
    assert n.rootfs == tmp_path / "cache" / "rabbitmq-trixie"
    assert n.node_log == tmp_path / "state" / "rabbitmq40" / "data" / "log" / "x@y.log"
    assert "ERL_EPMD_PORT=4371" in n.env


def test_node_config_with_and_without_tls(tmp_path: Path) -> None:
    n = _node(tmp_path, STREAMWIRE_RABBITMQ40_DIST_PORT="17626")
    plain, env = rabbit.node_config(n, with_tls=False)
    assert "stream.listeners.tcp.1 = 127.0.0.1:5554\n" in plain
    assert "distribution.listener.port_range.min = 17626\n" in plain
    assert "ssl_options" not in plain
    assert "NODENAME=rabbit40@localhost\n" in env
    assert "DIST_PORT=17626\n" in env
    assert "MNESIA_BASE=/srv/streamwire/mnesia\n" in env
    with_tls, _ = rabbit.node_config(n, with_tls=True)
    assert with_tls.startswith(plain)
    assert "stream.listeners.ssl.1 = 127.0.0.1:5555\n" in with_tls
    assert f"ssl_options.keyfile = {rabbit.TLS_ETC}/server.key\n" in with_tls


def test_config_digest_is_the_one_the_bash_harness_recorded(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc/rabbitmq").mkdir(parents=True)
    (rootfs / "etc/rabbitmq/rabbitmq.conf").write_text("a = 1\n", encoding="utf-8")
    (rootfs / "etc/rabbitmq/enabled_plugins").write_text("[rabbitmq_stream].\n", encoding="utf-8")
    # the formula of the bash harness, run by bash (files that do not exist are left out)
    script = r"""
    for f in "$1/etc/rabbitmq/rabbitmq.conf" "$1/etc/rabbitmq/rabbitmq-env.conf" \
      "$1/etc/rabbitmq/enabled_plugins" "$1/etc/security/limits.d/streamwire-rabbitmq.conf" \
      "$1/etc/rabbitmq/tls/ca.pem" "$1/etc/rabbitmq/tls/server.pem" \
      "$1/etc/rabbitmq/tls/server.key"; do
      if [[ -f "$f" ]]; then printf '%s ' "${f#"$1"}"; sha256sum <"$f"; fi
    done | sha256sum | cut -d' ' -f1
    """
    bash = subprocess.run(
        ["bash", "-c", script, "_", str(rootfs)], capture_output=True, text=True, check=True
    )
    assert rabbit.config_digest(rootfs) == bash.stdout.strip()
    before = rabbit.config_digest(rootfs)
    (rootfs / "etc/rabbitmq/rabbitmq.conf").write_text("a = 2\n", encoding="utf-8")
    assert rabbit.config_digest(rootfs) != before


def test_the_ctl_wrapper_runs_rabbitmqctl_for_the_node_inside(tmp_path: Path) -> None:
    rootfs = tmp_path / "my rootfs"
    for version in ("4.3.5", "4.3.6"):
        (rootfs / f"usr/lib/rabbitmq/lib/rabbitmq_server-{version}/plugins").mkdir(parents=True)
    chroot = rabbit.Chroot(rootfs)
    assert chroot.plugins_dir() == "/usr/lib/rabbitmq/lib/rabbitmq_server-4.3.6/plugins"
    text = rabbit.ctl_script(chroot, ["ERL_EPMD_PORT=17369"], "h2@localhost")
    lines = text.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert lines[2] == (
        f"exec chroot '{rootfs}' /usr/bin/env -i ERL_EPMD_PORT=17369 "
        "RABBITMQ_PLUGINS_DIR=/usr/lib/rabbitmq/lib/rabbitmq_server-4.3.6/plugins "
        'rabbitmqctl -n h2@localhost "$@"'
    )
    check = subprocess.run(["bash", "-n"], input=text, text=True, check=False)
    assert check.returncode == 0


def test_prepare_etc_writes_limits_and_localhost_once(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc/rabbitmq").mkdir(parents=True)
    (rootfs / "etc/rabbitmq/enabled_plugins").write_text(
        "[rabbitmq_auth_mechanism_ssl,rabbitmq_stream].\n", encoding="utf-8"
    )  # both enabled already: no rabbitmq-plugins call
    (rootfs / "etc/hosts").write_text("::1 ip6-localhost\n", encoding="utf-8")
    chroot = rabbit.Chroot(rootfs)
    for _ in range(2):
        rabbit.prepare_etc(chroot, [], ["rabbitmq_stream", "rabbitmq_auth_mechanism_ssl"])
    hosts = (rootfs / "etc/hosts").read_text(encoding="utf-8")
    assert hosts.count("127.0.0.1\tlocalhost\n") == 1
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    limit = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    assert (rootfs / rabbit.LIMITS).read_text(encoding="utf-8") == (
        f"rabbitmq soft nofile {limit}\nrabbitmq hard nofile {limit}\n"
    )
