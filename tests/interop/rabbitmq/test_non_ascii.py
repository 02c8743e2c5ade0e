"""Non-ASCII stream names: streamwire vs the Python peers.

Observed with rstream 1.1.1 and rbfly 0.10.0 against RabbitMQ 4.0.5 (the probe runs in a
child process, each peer call under a 2 s asyncio timeout):

* rstream: ``Producer.create_stream("sw-interop-café-ß-…")`` never returns (timeout): it
  writes the string length as the number of characters, not of UTF-8 bytes, so the frame
  is malformed and the broker never answers;
* rbfly: ``create_stream`` fails with ``ConnectionError: connection closed``: the broker
  drops the connection on the same malformed frame;
* neither creates a stream, not even one under a prefix of the name;
* streamwire creates, publishes to, reads and deletes the same stream.

That is why every other interop test gives peer-involved streams ASCII names.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid

import pytest

import streamwire.rabbitmq as rmq
from streamwire import HeaderValue
from tests.brokers import REPO_ROOT, BrokerInfo
from tests.interop.rabbitmq._peers import credentials, streamwire_read

pytestmark = [pytest.mark.interop, pytest.mark.integration, pytest.mark.rabbitmq]

PROBE_TIMEOUT = 2.0


async def test_peers_cannot_create_non_ascii_streams_streamwire_can(
    broker: BrokerInfo, client: rmq.Client
) -> None:
    name = f"sw-interop-café-ß-{uuid.uuid4().hex[:6]}"
    user, password = credentials(broker)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.interop.rabbitmq._non_ascii_probe",
        broker.host,
        str(broker.port),
        user,
        password,
        name,
        str(PROBE_TIMEOUT),
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(60):
            out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode(errors="replace")
        outcome = json.loads(out.decode().strip().splitlines()[-1])
        # pinned peer versions (pyproject): update the module docstring if this changes
        assert outcome["rstream"] == "timeout", outcome
        assert outcome["rbfly"].startswith("error: ConnectionError"), outcome
        # what a reader of len(name) bytes (the characters count) would have seen
        truncated = name.encode()[: len(name)].decode(errors="ignore")
        for prefix in (name, truncated, "sw-interop-café-"):
            assert not await client.stream_exists(prefix), (prefix, outcome)

        # streamwire handles the same name end to end
        await client.create_stream(name)
        async with client.producer(name) as producer:
            await producer.send_and_wait(b"ok", headers={"name": name, "n": HeaderValue.uint8(1)})
        (message,) = await streamwire_read(client, name, 1)
        assert message.value == b"ok"
        assert message.stream == name
        assert message.headers["name"] == HeaderValue.string(name)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await client.delete_stream(name, missing_ok=True)
