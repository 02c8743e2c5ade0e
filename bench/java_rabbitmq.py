"""The RabbitMQ Java stream client as a benchmark peer (``bench/java``: a small main over
``com.rabbitmq:stream-client`` from Maven Central, timed inside the JVM after a warm-up).

``stream-perf-test``, the Java client's own tool, is not published to Maven Central (its
jar comes from GitHub releases), so the same client is measured through this main instead.
Built once per process with ``mvn package`` (offline first, then online); when Java or Maven
is missing, or the build fails, the calls raise :class:`JavaUnavailable` and the runner
reports the column as failed.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

from streamwire import parse_url

JAVA_DIR = Path(__file__).resolve().parent / "java"
BUILD_TIMEOUT = 600.0
RUN_TIMEOUT = 300.0


class JavaUnavailable(RuntimeError):
    """Java, Maven or the helper's build is missing (the message says which)."""


@functools.cache
def classpath() -> str:
    """Build the helper once; its classpath, or :class:`JavaUnavailable`."""
    mvn, java = shutil.which("mvn"), shutil.which("java")
    if mvn is None or java is None:
        raise JavaUnavailable("java and mvn must be on PATH")
    failures = []
    for offline in (True, False):
        cmd = [mvn, "-q", "-B", *(["-o"] if offline else []), "package"]
        try:
            proc = subprocess.run(
                cmd, cwd=JAVA_DIR, capture_output=True, text=True, timeout=BUILD_TIMEOUT
            )
        except subprocess.TimeoutExpired:
            failures.append(f"{' '.join(cmd[1:])}: timed out")
            continue
        if proc.returncode == 0:
            target = JAVA_DIR / "target"
            return os.pathsep.join((str(target / "classes"), str(target / "dependency" / "*")))
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        failures.append(f"{' '.join(cmd[1:])}: exit {proc.returncode}: {tail}")
    raise JavaUnavailable("; ".join(failures))


async def _run(url: str, *args: str) -> float:
    cp = classpath()
    parsed = parse_url(url)
    env = {
        **os.environ,
        "RMQ_HOST": parsed.host,
        "RMQ_PORT": str(parsed.port),
        "RMQ_USER": parsed.username or "guest",
        "RMQ_PASSWORD": parsed.password or "guest",
    }
    proc = await asyncio.create_subprocess_exec(
        "java",
        "-cp",
        cp,
        "StreamBench",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(RUN_TIMEOUT):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    if proc.returncode != 0:
        tail = " | ".join(err.decode(errors="replace").strip().splitlines()[-3:])
        raise RuntimeError(f"StreamBench {args[0]} exited {proc.returncode}: {tail}")
    rate = json.loads(out.decode().strip().splitlines()[-1])["rate"]
    return float(rate)


async def java_publish(url: str, stream: str, count: int, size: int) -> float:
    return await _run(url, "publish", stream, str(count), str(size))


async def java_consume(url: str, stream: str, count: int) -> float:
    return await _run(url, "consume", stream, str(count))
