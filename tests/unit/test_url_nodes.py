"""Broker URLs naming several nodes of a cluster (``h1:5561,h2:5562``)."""

from __future__ import annotations

import pytest

from streamwire import parse_url
from streamwire.errors import ConfigurationError


def test_one_node_has_one_address() -> None:
    url = parse_url("rabbitmq-stream://guest:guest@localhost/")
    assert url.addresses == (("localhost", 5552),)
    assert (url.host, url.port) == ("localhost", 5552)


def test_several_nodes_in_order_with_default_ports() -> None:
    url = parse_url(
        "rabbitmq-stream://u:p%40ss@127.0.0.1:5561,node-b,[::1]:5563/vh?mechanism=PLAIN"
    )
    assert url.addresses == (("127.0.0.1", 5561), ("node-b", 5552), ("::1", 5563))
    assert (url.host, url.port) == ("127.0.0.1", 5561)
    assert (url.username, url.password, url.vhost) == ("u", "p@ss", "vh")
    assert url.param("mechanism") == "PLAIN"
    assert str(url) == "rabbitmq-stream://u:***@127.0.0.1:5561,node-b:5552,[::1]:5563/vh"
    assert "p@ss" not in repr(url)


@pytest.mark.parametrize(
    "bad",
    [
        "rabbitmq-stream://h1:5561,:5562/",  # a node without a host
        "rabbitmq-stream://h1:5561,h2:port/",  # a port that is not a number
        "rabbitmq-stream://h1:5561,h2:99999/",  # out of range
        "rabbitmq-stream://h1,/",  # an empty entry
    ],
)
def test_a_bad_node_is_a_configuration_error(bad: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_url(bad)
