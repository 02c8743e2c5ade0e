"""``streamwire.liftbridge.connect`` argument handling that needs no server."""

from __future__ import annotations

import grpc
import pytest
import trustme

import streamwire.liftbridge as lb
from streamwire.errors import ConfigurationError, ConnectError
from streamwire.liftbridge import _nats_servers
from streamwire.liftbridge._grpc import grpc_credentials, without_client_certificate
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


def test_a_refusal_for_want_of_a_client_certificate_says_so() -> None:
    seen = ConnectError(
        "cannot reach Liftbridge at localhost:9294: FetchMetadata: server unavailable (failed "
        "to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:9294: Unwrap "
        "failed (TSI_DATA_CORRUPTED))"
    )  # what grpcio 1.85 reports when a TLS 1.3 server wants a certificate it did not get
    trust = lb.TLSOptions(ca_file="/ca.pem")
    clearer = without_client_certificate(trust, seen)
    assert clearer is not None
    assert type(clearer) is ConnectError
    assert str(clearer).startswith(str(seen))
    assert "without a client certificate" in str(clearer)
    assert "cert_file=" in str(clearer)
    # a certificate was given, TLS was not asked for, another failure: unchanged
    with_cert = lb.TLSOptions(ca_file="/ca.pem", cert_file="/c.pem", key_file="/c.key")
    assert without_client_certificate(with_cert, seen) is None
    assert without_client_certificate(None, seen) is None
    refused = ConnectError("cannot reach Liftbridge at localhost:1: Connection refused")
    assert without_client_certificate(trust, refused) is None
