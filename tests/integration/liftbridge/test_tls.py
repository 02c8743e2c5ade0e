"""Liftbridge over TLS on the real server: the harness's TLS-only second Liftbridge v1.9.0
(``TLS_URL``, gRPC with the harness's server certificate) on the TLS nats-server.

``integration/brokers.sh up liftbridge`` records ``TLS_PORT``, ``TLS_URL`` and ``TLS_CA`` in
``.brokers/liftbridge.env`` only when that server answers a TLS handshake; without them (docker
backend, no openssl, the TLS server did not start) the tests skip, naming the missing keys.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

import streamwire.liftbridge as lb
from streamwire import Message
from streamwire.errors import ConnectError
from tests.brokers import require_tls

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


async def test_tls_round_trip_with_the_harness_ca() -> None:
    url, ca, port = _tls_facts()
    assert url.startswith("liftbridge+tls://localhost:")
    assert "nats=tls://" in url  # NATS over TLS too, through the TLS nats-server
    trust = lb.TLSOptions(ca_file=ca)
    client = await lb.connect(url, tls=trust, nats_tls=trust, timeout=_TIMEOUT)
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
        async with client.consumer(name, offset="first") as consumer:  # Subscribe (TLS)
            got = await _read(consumer, 2)
        assert [m.value for m in got] == [b"over tls", b"through grpc"]
        assert got[0].key == b"k"
        assert got[0].headers["h"].as_bytes() == b"v"
        assert [m.offset for m in got] == [0, 1]
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
