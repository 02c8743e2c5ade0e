"""go-liftbridge, the Liftbridge project's Go client, as a benchmark peer.

``bench/go_liftbridge`` is a small Go main over ``github.com/liftbridge-io/go-liftbridge/v2``
v2.3.0 (pinned in its go.mod and go.sum, fetched through the Go module proxy): ``publish``
(PublishAsync, LEADER acks, a window of messages awaiting their ack) and ``consume``
(Subscribe from the earliest offset), each timed inside the Go process, which reports its
own CPU time. The binary is built once per source version into ``.cache/go-liftbridge/`` of
the repository (gitignored), named after a hash of the sources and the Go version, so a
warm run does not build at all. Without ``go`` on PATH, or when the build fails, the calls
raise :class:`GoUnavailable` and the runner reports the peer as skipped, with the reason.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from bench._common import Measurement

__all__ = ("GO_DIR", "GoUnavailable", "binary", "go_consume", "go_publish")

GO_DIR = Path(__file__).resolve().parent / "go_liftbridge"
CACHE = Path(__file__).resolve().parent.parent / ".cache" / "go-liftbridge"
BUILD_TIMEOUT = 300.0
RUN_TIMEOUT = 330.0
"""A little above the Go program's own 300 s bound."""
_SOURCES = ("go.mod", "go.sum", "main.go")


class GoUnavailable(RuntimeError):
    """Go is missing or the peer does not build (the message says why)."""


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise GoUnavailable("go is not on PATH")
    return go


def _version(go: str) -> str:
    try:
        proc = subprocess.run([go, "version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GoUnavailable(f"go version: {exc}") from exc
    if proc.returncode != 0:
        raise GoUnavailable(f"go version exited {proc.returncode}")
    return proc.stdout.strip()


@functools.cache
def binary() -> Path:
    """The built peer (built now unless the cache has this version); :class:`GoUnavailable`
    when Go is missing or the build fails."""
    go = _go()
    digest = hashlib.sha256(_version(go).encode())
    for name in _SOURCES:
        digest.update((GO_DIR / name).read_bytes())
    target = CACHE / f"goliftbridge-{digest.hexdigest()[:16]}"
    if target.exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    # -mod=readonly: the pins in go.mod/go.sum are used as they are, never updated
    cmd = [go, "build", "-mod=readonly", "-trimpath", "-o", str(partial), "."]
    try:
        proc = subprocess.run(
            cmd, cwd=GO_DIR, capture_output=True, text=True, timeout=BUILD_TIMEOUT
        )
    except subprocess.TimeoutExpired as exc:
        raise GoUnavailable(f"go build timed out after {BUILD_TIMEOUT:g} s") from exc
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise GoUnavailable(f"go build exited {proc.returncode}: {tail}")
    partial.replace(target)
    return target


async def _run(*args: str) -> Measurement:
    exe = await asyncio.to_thread(binary)
    proc = await asyncio.create_subprocess_exec(
        str(exe), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
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
        raise RuntimeError(f"go-liftbridge {args[0]} exited {proc.returncode}: {tail}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    return Measurement(int(result["messages"]), result["seconds"], result["cpu_seconds"])


async def go_publish(address: str, stream: str, count: int, size: int, window: int) -> Measurement:
    """``count`` messages of ``size`` bytes to partition 0 of ``stream`` (LEADER acks, at
    most ``window`` awaiting their ack); the Go process's wall clock and CPU time."""
    return await _run("publish", address, stream, str(count), str(size), str(window))


async def go_consume(address: str, stream: str, count: int) -> Measurement:
    """Read ``count`` messages of partition 0 of ``stream`` from its first offset."""
    return await _run("consume", address, stream, str(count))
