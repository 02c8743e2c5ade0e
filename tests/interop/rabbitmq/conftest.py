"""Fixtures for RabbitMQ Streams interop tests: streamwire against independent clients
(rstream, rbfly, the Java reference client) through the broker from integration/brokers.sh.

Peer-involved streams get ASCII names: rstream 1.1.1 and rbfly 0.10.0 write the length of a
protocol string as its number of characters, not of UTF-8 bytes (see test_non_ascii.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import streamwire.rabbitmq as rmq
from tests.brokers import BrokerInfo, require, skip_missing
from tests.interop.rabbitmq._peers import credentials

JAVA_DIR = Path(__file__).resolve().parent.parent / "java"
#: per attempt: offline (local Maven repository only), then online (first build downloads
#: the client and its dependencies); test_java.py raises its pytest timeout to match
BUILD_TIMEOUTS = {True: 300.0, False: 600.0}
_JAVA_TIMEOUT = 90.0


@pytest.fixture
def broker() -> BrokerInfo:
    return require("rabbitmq")


@pytest.fixture
async def client(broker: BrokerInfo) -> AsyncIterator[rmq.Client]:
    c = await rmq.connect(broker.url, timeout=10)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
async def stream(client: rmq.Client) -> AsyncIterator[str]:
    name = f"sw-interop-{uuid.uuid4().hex[:12]}"  # ASCII: the peers mis-frame anything else
    await client.create_stream(name)
    try:
        yield name
    finally:
        await client.delete_stream(name, missing_ok=True)


class JavaInterop:
    """Runs tests/interop/java's ``Interop`` main (the RabbitMQ Java stream client)."""

    def __init__(self, java: str, classpath: str) -> None:
        self.java = java
        self.classpath = classpath

    async def run(self, broker: BrokerInfo, *args: str) -> list[dict[str, Any]]:
        """Run one subcommand against ``broker``; its JSON lines, parsed."""
        user, password = credentials(broker)
        env = {
            **os.environ,
            "RMQ_HOST": broker.host,
            "RMQ_PORT": str(broker.port),
            "RMQ_USER": user,
            "RMQ_PASSWORD": password,
        }
        proc = await asyncio.create_subprocess_exec(
            self.java,
            "-cp",
            self.classpath,
            "Interop",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        try:
            async with asyncio.timeout(_JAVA_TIMEOUT):
                out, err = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(f"Java Interop {args} ran over {_JAVA_TIMEOUT} s") from None
        text = out.decode("utf-8")
        assert proc.returncode == 0, (
            f"Java Interop {args} exited {proc.returncode}\nstdout:\n{text}\n"
            f"stderr:\n{err.decode('utf-8', 'replace')}"
        )
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def _build_java() -> str | None:
    """Build the helper (offline first, then online); None on success, else why not."""
    mvn = shutil.which("mvn")
    if mvn is None:
        return "mvn is not on PATH"
    failures = []
    for offline in (True, False):
        cmd = [mvn, "-q", "-B", *(["-o"] if offline else []), "package"]
        try:
            proc = subprocess.run(
                cmd, cwd=JAVA_DIR, capture_output=True, text=True, timeout=BUILD_TIMEOUTS[offline]
            )
        except subprocess.TimeoutExpired:
            failures.append(f"{' '.join(cmd[1:])}: timed out after {BUILD_TIMEOUTS[offline]} s")
            continue
        if proc.returncode == 0:
            return None
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-8:]
        failures.append(f"{' '.join(cmd[1:])}: exit {proc.returncode}: " + " | ".join(tail))
    return "; ".join(failures)


@pytest.fixture(scope="session")
def java_interop() -> JavaInterop:
    """The Java helper, built once per session into tests/interop/java/target (git-ignored)."""
    require("rabbitmq")  # no build when the broker is down anyway
    java = shutil.which("java")
    if java is None:
        skip_missing("Java interop: java is not on PATH")
    failure = _build_java()
    if failure is not None:
        skip_missing(f"Java interop: the helper in {JAVA_DIR} did not build: {failure}")
    target = JAVA_DIR / "target"
    classpath = os.pathsep.join((str(target / "classes"), str(target / "dependency" / "*")))
    return JavaInterop(java, classpath)
