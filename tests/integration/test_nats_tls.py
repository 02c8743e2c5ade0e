"""The harness's TLS nats-server (``NATS_TLS_URL``, 4443), with nats-py.

``integration/brokers.sh up nats`` runs a second nats-server, TLS only, next to the plain one on
4222 (which Liftbridge uses), with a server certificate for ``localhost`` signed by the harness's
throwaway CA (``TLS_CA``). Without those facts (docker backend, TLS server down) the tests skip.
"""

from __future__ import annotations

import ssl
import uuid

import nats
import pytest

from tests.brokers import require_tls

pytestmark = [pytest.mark.integration, pytest.mark.nats]

_TIMEOUT = 10.0


def _tls_facts() -> tuple[str, str, int]:
    """(NATS_TLS_URL, TLS_CA, TLS_PORT) of the harness's nats broker, or skip."""
    return require_tls(
        "nats",
        "NATS_TLS_URL",
        "the docker backend has no TLS nats-server, or the native one did not start (see "
        ".brokers/nats/nats-tls.log)",
    )


async def test_nats_tls_round_trip_with_the_harness_ca() -> None:
    url, ca, port = _tls_facts()
    context = ssl.create_default_context(cafile=ca)
    client = await nats.connect(url, tls=context, connect_timeout=_TIMEOUT, allow_reconnect=False)
    try:
        assert client.connected_url is not None
        assert client.connected_url.scheme == "tls"
        assert client.connected_url.port == port
        subject = f"streamwire.tls.{uuid.uuid4().hex}"
        subscription = await client.subscribe(subject)
        await client.flush(timeout=int(_TIMEOUT))
        await client.publish(subject, b"over tls", headers={"X-Streamwire": "tls"})
        message = await subscription.next_msg(timeout=_TIMEOUT)
        assert message.data == b"over tls"
        assert message.headers == {"X-Streamwire": "tls"}
        await subscription.unsubscribe()
    finally:
        await client.close()


async def test_nats_tls_without_the_ca_fails_verification() -> None:
    url, _, _ = _tls_facts()
    errors: list[Exception] = []

    async def record(exc: Exception) -> None:
        errors.append(exc)

    # tls:// with no context: nats-py uses the system trust store, which lacks the harness CA.
    with pytest.raises(ssl.SSLCertVerificationError) as info:
        await nats.connect(
            url,
            connect_timeout=_TIMEOUT,
            allow_reconnect=False,
            max_reconnect_attempts=0,
            error_cb=record,
        )
    assert "certificate verify failed" in str(info.value)
    assert all(isinstance(e, ssl.SSLCertVerificationError) for e in errors)
