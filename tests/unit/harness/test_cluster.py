"""The three-node cluster's names, ports, per-node environment and the stop/start argument."""

from __future__ import annotations

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
