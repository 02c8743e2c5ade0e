"""``streamwire.liftbridge.connect`` argument handling that needs no server."""

from __future__ import annotations

import grpc
import pytest
import trustme

import streamwire.liftbridge as lb
from streamwire.errors import ConfigurationError
from streamwire.liftbridge import _nats_servers
from streamwire.liftbridge._grpc import grpc_credentials
from streamwire.liftbridge.consumer import ConsumerOptions
from streamwire.liftbridge.producer import ProducerOptions


def test_nats_urls_from_the_query() -> None:
    assert _nats_servers(["nats://a:1,nats://b:2", "c:3"]) == (
        ["nats://a:1", "nats://b:2", "nats://c:3"],
        False,
    )
    assert _nats_servers(["nats+tls://a:1"]) == (["tls://a:1"], True)
    assert _nats_servers(["tls://a:1"]) == (["tls://a:1"], True)
    assert _nats_servers([""]) == ([], False)
    with pytest.raises(ConfigurationError):
        _nats_servers(["http://a:1"])


async def test_connect_refuses_other_schemes() -> None:
    with pytest.raises(ConfigurationError, match="not a Liftbridge URL"):
        await lb.connect("iggy://localhost:8090")


async def test_connect_refuses_an_ssl_context_for_grpc() -> None:
    import ssl

    with pytest.raises(ConfigurationError):
        await lb.connect("liftbridge://localhost", tls=ssl.create_default_context())  # type: ignore[arg-type]


def test_grpc_credentials_from_tls_options() -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    creds = grpc_credentials(lb.TLSOptions(ca_data=ca.cert_pem.bytes()))
    assert isinstance(creds, grpc.ChannelCredentials)
    with cert.private_key_and_cert_chain_pem.tempfile() as both:
        mutual = grpc_credentials(lb.TLSOptions(ca_data=ca.cert_pem.bytes(), cert_file=both))
    assert isinstance(mutual, grpc.ChannelCredentials)
    with pytest.raises(ConfigurationError):
        grpc_credentials(lb.TLSOptions(verify=False))
    with pytest.raises(ConfigurationError):
        grpc_credentials(lb.TLSOptions(cert_file="/nonexistent/cert.pem"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_in_flight": 0},
        {"ack_policy": 7},
        {"partitioner": "random"},
        {"max_message_bytes": 0},
        {"ack_timeout": -1.0},
        {"transport": "http"},
        {"transport": None},
        {"transport": "grpc", "envelope": False},
        {"transport": "auto", "subject": "a.b"},
    ],
)
def test_producer_options_are_checked(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        ProducerOptions(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs", [{"max_buffered_messages": 0}, {"stop_offset": 1, "stop_latest": True}]
)
def test_consumer_options_are_checked(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        ConsumerOptions(**kwargs)  # type: ignore[arg-type]
