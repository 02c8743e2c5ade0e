"""The three-node cluster's names, ports, per-node environment and the stop/start argument."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from integration.harness import cluster, config, lanes


def _cluster(tmp_path: Path, **environ: str) -> cluster.Cluster:
    paths = config.Paths(tmp_path, tmp_path / "cache", tmp_path / "venv", tmp_path / "state")
    return cluster.Cluster.select(lanes.Context(paths, environ))


@pytest.mark.parametrize(
    ("text", "node"),
    [("1", 1), ("3", 3), ("0", None), ("4", None), ("01", None), ("x", None), ("", None)],
)
def test_parse_node(text: str, node: int | None) -> None:
    assert cluster.parse_node(text) == node


def test_node_n_adds_n_minus_1_to_each_base_port(tmp_path: Path) -> None:
    c = _cluster(
        tmp_path,
        STREAMWIRE_RABBITMQ_CLUSTER_STREAM_PORT="17561",
        STREAMWIRE_RABBITMQ_CLUSTER_NODE_PREFIX="h2c",
    )
    assert [c.node(n) for n in (1, 2, 3)] == ["h2c1@localhost", "h2c2@localhost", "h2c3@localhost"]
    assert (c.stream(3), c.amqp(3), c.dist(3)) == (17563, 5683, 25683)
    assert c.rootfs == tmp_path / "cache" / "rabbitmq-sid-cluster"
    assert c.log(2) == tmp_path / "state/rabbitmq-cluster/data/node2/log/h2c2@localhost.log"
    text = cluster.node_config(c, 2)
    assert "stream.listeners.tcp.1 = 127.0.0.1:17562\n" in text
    assert "listeners.tcp.1 = 127.0.0.1:5682\n" in text
    assert "distribution.listener.port_range.max = 25682\n" in text


def test_each_node_gets_its_settings_in_its_environment(tmp_path: Path) -> None:
    env = _cluster(tmp_path, STREAMWIRE_RABBITMQ_CLUSTER_EPMD_PORT="17372").env(3)
    assert "RABBITMQ_NODENAME=rabbitc3@localhost" in env
    assert "RABBITMQ_CONFIG_FILE=/etc/rabbitmq/node3/rabbitmq.conf" in env
    assert "RABBITMQ_MNESIA_BASE=/srv/streamwire/node3/mnesia" in env
    assert "ERL_EPMD_PORT=17372" in env
    assert "RABBITMQ_NODE_PORT=5683" in env


def test_each_node_has_a_stream_tls_listener_of_its_own(tmp_path: Path) -> None:
    assert _cluster(tmp_path).tls(1) == 5571  # the default base: 5571, 5572, 5573
    c = _cluster(tmp_path, STREAMWIRE_RABBITMQ_CLUSTER_TLS_PORT="17571")
    assert [c.tls(n) for n in (1, 2, 3)] == [17571, 17572, 17573]
    text = cluster.node_config(c, 2, with_tls=True)
    assert "stream.listeners.ssl.1 = 127.0.0.1:17572\n" in text
    assert "stream.advertised_tls_host = localhost\n" in text
    assert "stream.advertised_tls_port = 17572\n" in text
    assert "ssl_options.certfile = /etc/rabbitmq/tls/server.pem\n" in text
    assert "stream.listeners.tcp.1 = 127.0.0.1:5562\n" in text  # the plain one stays
    assert "ssl" not in cluster.node_config(c, 2)


def test_the_env_file_records_every_nodes_tls_listener(tmp_path: Path) -> None:
    c = _cluster(tmp_path, STREAMWIRE_RABBITMQ_CLUSTER_TLS_PORT="17571")
    facts = cluster.tls_facts(c, Path("/s/tls"))
    assert (facts["TLS_PORT"], facts["PORT_STREAM_TLS"]) == ("17571", "17571")
    assert [facts[f"PORT_TLS_NODE{n}"] for n in (1, 2, 3)] == ["17571", "17572", "17573"]
    assert facts["TLS_URL"] == "rabbitmq-stream+tls://guest:guest@localhost:17571/"
    assert facts["TLS_URL_ALL"] == (
        "rabbitmq-stream+tls://guest:guest@localhost:17571,localhost:17572,localhost:17573/"
    )
    assert facts["TLS_URLS"].split(",")[2] == "rabbitmq-stream+tls://guest:guest@localhost:17573/"
    assert (facts["TLS_CA"], facts["TLS_CLIENT_KEY"]) == ("/s/tls/ca.pem", "/s/tls/client.key")


class _Scripted(cluster.Cluster):
    """A cluster whose membership views are given and whose rabbitmqctl calls are recorded
    (``reset`` takes the node out of its own view; ``join_cluster`` and ``forget_cluster_node``
    change node 1's and the node's as RabbitMQ does)."""

    views: dict[int, list[str]]
    calls: list[tuple[int, tuple[str, ...]]]

    def members(self, n: int) -> list[str]:
        return sorted(self.views[n])

    def ctl(self, n: int, *args: str, log: Path | None = None) -> subprocess.CompletedProcess[str]:
        self.calls.append((n, args))
        if args[0] == "reset":
            self.views[n] = [self.node(n)]
        elif args[0] == "forget_cluster_node":
            self.views[1] = [x for x in self.views[1] if x != args[1]]
        elif args[0] == "join_cluster":
            self.views[1] = [*self.views[1], self.node(n)]
            self.views[n] = list(self.views[1])
        return subprocess.CompletedProcess(["rabbitmqctl", *args], 0, "", "")


def _scripted(tmp_path: Path, views: dict[int, list[int]]) -> _Scripted:
    c = _cluster(tmp_path)
    s = _Scripted(**{f.name: getattr(c, f.name) for f in dataclasses.fields(c)})
    object.__setattr__(s, "views", {n: [c.node(m) for m in ms] for n, ms in views.items()})
    object.__setattr__(s, "calls", [])
    return s


def test_form_leaves_a_formed_cluster_alone(tmp_path: Path) -> None:
    c = _scripted(tmp_path, {1: [1, 2, 3], 2: [1, 2, 3], 3: [1, 2, 3]})
    assert cluster._form(c, tmp_path / "log") == []
    assert c.calls == []


def test_form_joins_a_node_that_left_and_forgets_it_on_node_1_first(tmp_path: Path) -> None:
    # node 3 was reset (it counts only itself) while node 1 still lists it
    c = _scripted(tmp_path, {1: [1, 2, 3], 2: [1, 2, 3], 3: [3]})
    assert cluster._form(c, tmp_path / "log") == [3]  # booted afresh by up afterwards
    n3, n1 = c.node(3), c.node(1)
    assert c.calls == [
        (3, ("stop_app",)),
        (3, ("reset",)),
        (1, ("forget_cluster_node", n3)),
        (3, ("join_cluster", n1)),
    ]
    assert c.members(1) == c.members(3) == sorted(c.node(n) for n in (1, 2, 3))


def test_form_joins_a_node_that_node_1_does_not_list_without_forgetting(tmp_path: Path) -> None:
    c = _scripted(tmp_path, {1: [1, 3], 2: [2], 3: [1, 3]})
    assert cluster._form(c, tmp_path / "log") == [2]
    assert [call for call in c.calls if call[0] == 1] == []
    assert [args[0] for n, args in c.calls] == ["stop_app", "reset", "join_cluster"]


def test_a_node_started_from_another_configuration_is_restarted(tmp_path: Path) -> None:
    c = _cluster(tmp_path)
    etc = c.rootfs / "etc" / "rabbitmq"
    for n in (1, 2, 3):
        (etc / f"node{n}").mkdir(parents=True)
        (etc / f"node{n}" / "rabbitmq.conf").write_text(cluster.node_config(c, n, with_tls=True))
    (etc / "tls").mkdir()
    (etc / "tls" / "server.pem").write_text("first certificate")
    assert len({c.digest(n) for n in (1, 2, 3)}) == 3  # each node its own
    c.dir.mkdir(parents=True)
    for n in (1, 2, 3):
        c.digest_file(n).write_text(c.digest(n) + "\n")
    assert not any(cluster._started_otherwise(c, n, with_tls=False) for n in (1, 2, 3))
    (etc / "tls" / "server.pem").write_text("a new certificate")
    assert all(cluster._started_otherwise(c, n, with_tls=False) for n in (1, 2, 3))
    c.digest_file(2).write_text(c.digest(2) + "\n")
    assert not cluster._started_otherwise(c, 2, with_tls=False)
    (etc / "node2" / "rabbitmq.conf").write_text(cluster.node_config(c, 2))  # TLS gone
    assert cluster._started_otherwise(c, 2, with_tls=False)
    c.digest_file(3).unlink()  # started by a harness that recorded nothing
    assert cluster._started_otherwise(c, 3, with_tls=False)
