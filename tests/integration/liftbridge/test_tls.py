"""Liftbridge over TLS on the real server: the harness's TLS-only second Liftbridge v1.9.0
(``TLS_URL``, gRPC with the harness's server certificate) on the TLS nats-server, and its
third, which requires a client certificate signed by the harness CA (``MTLS_URL``, mutual TLS).

``integration/brokers.sh up liftbridge`` records ``TLS_PORT``, ``TLS_URL`` and ``TLS_CA`` in
``.brokers/liftbridge.env`` only when that server answers a TLS handshake; without them (docker
backend, no openssl, the TLS server did not start) the tests skip, naming the missing keys.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

import streamwire.liftbridge as lb
from integration.harness import tls
from streamwire import Message
from streamwire.errors import ConnectError
from streamwire.liftbridge._h2_subscription import H2Subscription
from streamwire.liftbridge._publish_calls import H2PublishCall
from tests.brokers import require, require_tls, skip_missing

pytestmark = [pytest.mark.integration, pytest.mark.liftbridge]

_TIMEOUT = 10.0


def _tls_facts() -> tuple[str, str, int]:
    """(TLS_URL, TLS_CA, TLS_PORT) of the harness's liftbridge broker, or skip."""
    return require_tls(
        "liftbridge",
        "TLS_URL",
        "the docker backend has no TLS Liftbridge, or the native one did not start (see "
        ".brokers/liftbridge/liftbridge-tls.log and the [brokers] warning)",
    )


async def _read(consumer: lb.Consumer, count: int) -> list[Message]:
    out: list[Message] = []
    async with asyncio.timeout(_TIMEOUT):
        while len(out) < count:
            out.extend(await consumer.next_batch(count - len(out), timeout=_TIMEOUT))
    return out


@pytest.mark.parametrize("transport", ["grpcio", "http2"])
async def test_tls_round_trip_with_the_harness_ca(transport: str) -> None:
    url, ca, port = _tls_facts()
    assert url.startswith("liftbridge+tls://localhost:")
    assert "nats=tls://" in url  # NATS over TLS too, through the TLS nats-server
    trust = lb.TLSOptions(ca_file=ca)
    client = await lb.connect(
        url,
        tls=trust,
        nats_tls=trust,
        timeout=_TIMEOUT,
        subscribe_transport=transport,
        publish_transport=transport,
    )
    name = f"sw-lb-tls-{uuid.uuid4().hex[:12]}"
    try:
        assert client.port == port
        assert all(s.startswith("tls://") for s in client.nats_servers)
        await client.create_stream(name)
        assert await client.stream_exists(name)
        async with client.producer(name) as producer:  # publishes over NATS (TLS)
            first = await producer.send_and_wait(b"over tls", key=b"k", headers={"h": "v"})
        ack = await client.publish(name, b"through grpc")  # the Publish RPC (TLS)
        assert first.offset == 0
        assert ack is not None
        assert ack.offset == 1
        async with client.producer(name, transport="grpc") as producer:  # PublishAsync (TLS)
            third = await producer.send_and_wait(b"publish async", key=b"a")
            assert producer._grpc is not None
            h2 = isinstance(producer._grpc._call, H2PublishCall)
            assert h2 is (transport == "http2")
        assert third.offset == 2
        async with client.consumer(name, offset="first") as consumer:  # Subscribe (TLS)
            got = await _read(consumer, 3)
            reader = consumer._subscription
            assert isinstance(reader, H2Subscription) is (transport == "http2")
        assert [m.value for m in got] == [b"over tls", b"through grpc", b"publish async"]
        assert got[0].key == b"k"
        assert got[2].key == b"a"
        assert got[0].headers["h"].as_bytes() == b"v"
        assert [m.offset for m in got] == [0, 1, 2]
    finally:
        try:
            await client.delete_stream(name, missing_ok=True)
        finally:
            await client.close()


async def test_tls_without_the_ca_is_refused() -> None:
    url, _, port = _tls_facts()
    # liftbridge+tls:// with no TLSOptions: the system trust store, which lacks the harness CA.
    with pytest.raises(ConnectError) as info:
        await lb.connect(url, timeout=5.0)
    text = str(info.value)
    assert f"cannot reach Liftbridge at localhost:{port}" in text
    assert "CERTIFICATE_VERIFY_FAILED" in text


async def test_nats_tls_without_the_ca_is_refused() -> None:
    url, ca, _ = _tls_facts()
    # gRPC trusts the harness CA, NATS (tls:// in the URL, nats_tls defaulted) does not.
    with pytest.raises(ConnectError) as info:
        await lb.connect(url, tls=lb.TLSOptions(ca_file=ca), timeout=5.0)
    assert "certificate verify failed" in str(info.value).lower()


# --- mutual TLS: the harness's third Liftbridge requires a client certificate -------------


def _mtls_facts() -> tuple[str, lb.TLSOptions, lb.TLSOptions, int]:
    """(MTLS_URL, CA only, CA + the harness's client certificate, MTLS_PORT), or skip."""
    url, ca, port = require_tls(
        "liftbridge",
        "MTLS_URL",
        "the docker backend has no mutual-TLS Liftbridge, or the native one did not start "
        "(see .brokers/liftbridge/liftbridge-mtls.log and the [brokers] warning)",
        prefix="MTLS_",
    )
    extra = require("liftbridge").extra
    cert, key = extra.get("MTLS_CLIENT_CERT", ""), extra.get("MTLS_CLIENT_KEY", "")
    if not (cert and key and Path(cert).is_file() and Path(key).is_file()):
        skip_missing("the harness records no client certificate for the mutual-TLS Liftbridge")
    trust = lb.TLSOptions(ca_file=ca)
    return url, trust, lb.TLSOptions(ca_file=ca, cert_file=cert, key_file=key), port


@pytest.mark.parametrize("transport", ["grpcio", "http2"])
async def test_mutual_tls_round_trip_with_a_client_certificate(transport: str) -> None:
    url, trust, with_cert, port = _mtls_facts()
    client = await lb.connect(
        url,
        tls=with_cert,
        nats_tls=trust,
        timeout=_TIMEOUT,
        subscribe_transport=transport,
        publish_transport=transport,
    )
    name = f"sw-lb-mtls-{uuid.uuid4().hex[:12]}"
    try:
        assert client.port == port
        await client.create_stream(name)
        async with client.producer(name) as producer:  # NATS (TLS)
            first = await producer.send_and_wait(b"over nats", key=b"k")
        async with client.producer(name, transport="grpc") as producer:  # PublishAsync
            second = await producer.send_and_wait(b"over grpc")
            assert producer._grpc is not None
            h2 = isinstance(producer._grpc._call, H2PublishCall)
            assert h2 is (transport == "http2")
        assert (first.offset, second.offset) == (0, 1)
        async with client.consumer(name, offset="first") as consumer:  # Subscribe (mTLS)
            got = await _read(consumer, 2)
            reader = consumer._subscription
            assert isinstance(reader, H2Subscription) is (transport == "http2")
        assert [m.value for m in got] == [b"over nats", b"over grpc"]
        assert got[0].key == b"k"
    finally:
        try:
            await client.delete_stream(name, missing_ok=True)
        finally:
            await client.close()


async def test_mutual_tls_without_a_client_certificate_is_refused_clearly() -> None:
    url, trust, _, port = _mtls_facts()
    with pytest.raises(ConnectError) as info:
        await lb.connect(url, tls=trust, nats_tls=trust, timeout=5.0)
    text = str(info.value)
    assert f"cannot reach Liftbridge at localhost:{port}" in text
    assert "without a client certificate" in text
    assert "cert_file=" in text
    assert isinstance(info.value.__cause__, ConnectError)  # grpc's own words, chained


async def test_mutual_tls_refuses_a_certificate_of_another_ca(tmp_path: Path) -> None:
    url, trust, _, _ = _mtls_facts()
    if not tls.ensure(tmp_path / "other"):
        pytest.skip("openssl could not make a second throwaway PKI")
    stranger = lb.TLSOptions(
        ca_file=trust.ca_file,
        cert_file=tmp_path / "other" / "client.pem",
        key_file=tmp_path / "other" / "client.key",
    )
    with pytest.raises(ConnectError) as info:
        await lb.connect(url, tls=stranger, nats_tls=trust, timeout=5.0)
    assert "without a client certificate" not in str(info.value)  # it did send one
