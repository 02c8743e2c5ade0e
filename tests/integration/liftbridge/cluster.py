"""A throw-away Liftbridge cluster for failover tests: N nodes of the harness's binary on
free loopback ports, a private namespace and data directories, all on the harness's NATS.

Each test owns its processes and stops them by pid (TERM, then KILL) when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import streamwire.liftbridge as lb
from streamwire.errors import StreamwireError
from tests.brokers import require, skip_missing

__all__ = (
    "ClusterDidNotForm",
    "LocalCluster",
    "NatsServer",
    "Node",
    "ServerDidNotStart",
    "harness_liftbridge",
)


class ClusterDidNotForm(Exception):
    """The servers never all saw each other (see the message for their logs)."""


class ServerDidNotStart(Exception):
    """A private server did not answer in time (see the message for its log)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Node:
    server_id: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, no goodbye: what a crashed leader looks like."""
        if self.running:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def pause(self) -> None:
        """SIGSTOP: the server keeps its sockets but answers nothing (a hung process)."""
        if self.running:
            os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`: the server answers again, with what it knew then."""
        if self.running:
            os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.running:
            self.resume()  # a paused process would not act on SIGTERM
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    async def stop_async(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``, without blocking the event loop."""
        await _terminate(self.process, timeout)


async def _terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        await asyncio.to_thread(process.wait, timeout)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        await asyncio.to_thread(process.wait, 10)


def _spawn(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session, appending its output to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


class NatsServer:
    """A private nats-server (the harness's binary) on a free loopback port, with a log in
    ``workdir``. It keeps its port across :meth:`stop` and :meth:`start`, so a client's
    reconnects find it again; the test that starts it stops it (by pid)."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = _free_port()
        self.log = workdir / f"nats-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def start(self, timeout: float = 15.0) -> None:
        """Start (again, on the same port) and wait until it sends its INFO line."""
        if self.running:
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        process = self.process = _spawn(
            [self.binary, "-a", "127.0.0.1", "-p", str(self.port)], self.log
        )
        try:
            async with asyncio.timeout(timeout):
                while not await self._answers():
                    if process.poll() is not None:
                        raise ServerDidNotStart(f"nats-server exited:\n{self.logs()}")
                    await asyncio.sleep(0.1)
        except TimeoutError:
            await self.stop()
            raise ServerDidNotStart(
                f"nats-server silent after {timeout} s:\n{self.logs()}"
            ) from None

    async def _answers(self) -> bool:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            return False
        try:
            async with asyncio.timeout(2):
                return (await reader.readline()).startswith(b"INFO ")
        except (OSError, TimeoutError):
            return False
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (SIGKILL after ``timeout``); idempotent."""
        if self.process is not None:
            await _terminate(self.process, timeout)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


class LocalCluster:
    def __init__(
        self,
        binary: str,
        nats_url: str,
        workdir: Path,
        *,
        size: int = 3,
        version: str = "",
        activity: bool = False,
        node_nats: list[str] | None = None,
    ) -> None:
        self.binary = binary
        self.activity = activity  # record the cluster's activity in __activity
        self.nats_url = nats_url
        #: Each node's own NATS URL, by node number (the first node's is ``node_nats[0]``):
        #: a proxy per node in front of NATS partitions one node from its peers, whose Raft
        #: and replication all go through NATS. Clients still use ``nats_url``.
        self.node_nats = node_nats
        self.workdir = workdir
        self.size = size
        self.version = version
        self.namespace = ""
        self.nodes: dict[str, Node] = {}

    def _config(self, server_id: str, port: int, peers: list[str]) -> str:
        nats = self.node_nats[peers.index(server_id)] if self.node_nats else self.nats_url
        lines = [
            f"listen: 127.0.0.1:{port}",
            "data:",
            f"  dir: {self.workdir / server_id / 'data'}",
            "logging:",
            "  level: info",
            "nats:",
            "  servers:",
            f"    - {nats}",
            "clustering:",
            f"  server.id: {server_id}",
            f"  namespace: {self.namespace}",
            f"  raft.bootstrap.peers: [{', '.join(peers)}]",
            # A partition fails over once a quorum of its followers reported the leader
            # within one replica.max.leader.timeout (v1.9.0's ReportLeader), and a follower
            # reports at most once a replica.max.idle.wait less up to 2 s of jitter: the
            # timeout must be longer than the idle wait (the defaults: 15 s and 10 s). With
            # a 2 s timeout and the 10 s wait, two followers' reports met only by chance and
            # a killed leader's partition stayed leaderless for minutes (seen: over 2
            # minutes, a CI timeout). Reports every 1-3 s within a 4 s window always meet.
            "  replica.max.idle.wait: 3s",
            "  replica.max.leader.timeout: 4s",
            "cursors:",
            "  stream.partitions: 1",
            "  stream.auto.pause.time: 0",
        ]
        if self.activity:
            lines += ["activity:", "  stream.enabled: true"]
        if self.version != "v1.9.0":  # newer servers report home unless told not to
            lines += ["telemetry:", "  enabled: false"]
        return "\n".join(lines) + "\n"

    async def start(self, *, attempts: int = 2, timeout: float = 30.0) -> None:
        """Start the nodes and wait until they form a cluster; start over (new namespace,
        new directories) if they do not within ``timeout``."""
        reasons: list[str] = []
        for _ in range(attempts):
            self._launch()
            try:
                await self.wait_ready(timeout)
                return
            except ClusterDidNotForm as exc:
                reasons.append(str(exc))
                self.stop()
        raise ClusterDidNotForm("\n".join(reasons))

    def _launch(self) -> None:
        self.namespace = f"sw-fo-{uuid.uuid4().hex[:8]}"
        self.nodes = {}
        peers = [f"{self.namespace}-n{i}" for i in range(1, self.size + 1)]
        for server_id in peers:
            port = _free_port()
            (self.workdir / server_id).mkdir(parents=True)
            config = self.workdir / f"{server_id}.yml"
            config.write_text(self._config(server_id, port, peers), encoding="utf-8")
            log = self.workdir / f"{server_id}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    [self.binary, "-c", str(config)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.nodes[server_id] = Node(server_id, port, process, log)

    def respawn(self, server_id: str) -> None:
        """Start a stopped node again: same configuration, port and data directory (its
        log is appended to)."""
        node = self.nodes[server_id]
        if node.running:
            raise RuntimeError(f"{server_id} is still running")
        node.process = _spawn([self.binary, "-c", str(self.workdir / f"{server_id}.yml")], node.log)

    def url(self, server_id: str) -> str:
        return f"liftbridge://127.0.0.1:{self.nodes[server_id].port}?nats={self.nats_url}"

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Every node answers and sees the whole cluster, and a metadata leader exists."""
        last: dict[str, str] = {}
        try:
            async with asyncio.timeout(timeout):
                for server_id in self.nodes:
                    while True:
                        try:
                            async with await lb.connect(self.url(server_id), timeout=5) as c:
                                md = await c.fetch_metadata()
                                last[server_id] = f"brokers {sorted(md.brokers)}"
                                if len(md.brokers) == self.size:
                                    break
                        except StreamwireError as exc:
                            last[server_id] = repr(exc)
                        await asyncio.sleep(0.3)
        except TimeoutError:
            raise ClusterDidNotForm(f"not ready after {timeout} s: {last}\n{self.logs()}") from None

    async def create_stream(self, server_id: str, name: str, **options: object) -> None:
        """Create a stream, retrying while the new cluster still settles (right after
        forming, forwarding to the metadata leader can fail with INTERNAL "no responders")."""
        async with await lb.connect(self.url(server_id), timeout=10) as c, asyncio.timeout(30):
            while True:
                try:
                    await c.create_stream(name, exist_ok=True, **options)  # type: ignore[arg-type]
                    return
                except StreamwireError as exc:
                    if not getattr(exc, "retriable", False):
                        raise
                await asyncio.sleep(0.3)

    def partition_dir(self, server_id: str, stream: str, partition: int = 0) -> Path:
        """Where ``server_id`` keeps the log files of ``stream``'s ``partition``."""
        return self.workdir / server_id / "data" / "streams" / stream / str(partition)

    def stop(self) -> None:
        for node in self.nodes.values():
            node.stop()

    def logs(self) -> str:
        return "\n".join(
            f"--- {n.server_id}\n" + n.log.read_text(errors="replace")[-3000:]
            for n in self.nodes.values()
        )


def harness_liftbridge() -> tuple[str, str, str]:
    """(binary, NATS URL, version) of the harness's Liftbridge, for starting a cluster of it;
    skips when the harness recorded no binary."""
    info = require("liftbridge")
    binary = info.extra.get("BINARY", "")
    if not binary or not Path(binary).is_file():
        skip_missing("the harness recorded no Liftbridge binary to start a cluster with")
    return binary, info.extra.get("NATS_URL", "nats://127.0.0.1:4222"), info.version
