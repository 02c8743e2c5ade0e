"""URL parsing and ``streamwire.connect`` dispatch."""

from __future__ import annotations

import pytest

import streamwire
from streamwire import ConfigurationError, parse_url


def test_rabbitmq_url_defaults_and_vhost() -> None:
    u = parse_url("rabbitmq-stream://guest:s%40cret@localhost/%2F")
    assert (u.protocol, u.tls, u.host, u.port) == ("rabbitmq", False, "localhost", 5552)
    assert (u.username, u.password, u.vhost) == ("guest", "s@cret", "/")
    assert parse_url("rabbitmq-stream://h").vhost == "/"
    assert parse_url("rabbitmq-stream://h/prod").vhost == "prod"
    tls = parse_url("rabbitmq-stream+tls://h:5551")
    assert tls.tls
    assert tls.port == 5551


def test_password_never_shown() -> None:
    u = parse_url("iggy://iggy:topsecret@127.0.0.1:8090")
    assert "topsecret" not in repr(u)
    assert "topsecret" not in str(u)
    assert str(u) == "iggy://iggy:***@127.0.0.1:8090"
    assert parse_url("iggy://[::1]").redacted() == "iggy://[::1]:8090"


def test_liftbridge_url_with_nats_query() -> None:
    u = parse_url("liftbridge://127.0.0.1:9292?nats=nats://127.0.0.1:4222")
    assert (u.protocol, u.port) == ("liftbridge", 9292)
    assert u.param("nats") == "nats://127.0.0.1:4222"
    assert u.param("missing", "d") == "d"


@pytest.mark.parametrize(
    "url", ["http://x", "rabbitmq-stream://", "iggy://h:notaport", "kafka://h:9092", ""]
)
def test_bad_urls(url: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_url(url)


def test_non_string_url() -> None:
    with pytest.raises(ConfigurationError):
        parse_url(b"iggy://h")  # type: ignore[arg-type]


def test_connect_validates_before_awaiting() -> None:
    with pytest.raises(ConfigurationError, match="unknown URL scheme"):
        streamwire.connect("amqp://localhost")


@pytest.mark.parametrize("protocol", ["rabbitmq", "liftbridge", "iggy"])
async def test_connect_to_a_protocol_that_has_not_landed(protocol: str) -> None:
    import importlib.util

    if importlib.util.find_spec(f"streamwire.{protocol}") is not None:
        pytest.skip(f"streamwire.{protocol} exists; covered by its own tests")
    url = {
        "rabbitmq": "rabbitmq-stream://localhost",
        "liftbridge": "liftbridge://localhost",
        "iggy": "iggy://localhost",
    }[protocol]
    with pytest.raises(ConfigurationError, match="not supported by this version"):
        await streamwire.connect(url)
    with pytest.raises(ConfigurationError, match="not supported by this version"):
        async with streamwire.connect(url):
            pass
