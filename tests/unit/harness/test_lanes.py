"""The Python lanes with real processes: nats-server from the venv (when the dev extras are
installed) and an Iggy stand-in (a small script that listens where IGGY_* tells it)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from integration.harness import config, envfile, lanes, procs, tls
from integration.harness.readiness import port_open


def _free_ports(count: int) -> list[int]:
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _context(tmp_path: Path, environ: dict[str, str]) -> lanes.Context:
    paths = config.Paths(
        repo=tmp_path, cache=tmp_path / "cache", venv=Path(sys.prefix), state=tmp_path / "state"
    )
    return lanes.Context(paths, {**environ, "STREAMWIRE_READY_TIMEOUT": "20"})


def test_liftbridge_config_leaves_out_telemetry_for_v1_9_0() -> None:
    old = lanes.liftbridge_config(
        port=17292, data=Path("/d"), nats_port=17222, module_version="v1.9.0"
    )
    assert "listen: 127.0.0.1:17292\n" in old
    assert "    - nats://127.0.0.1:17222\n" in old
    assert f"server.id: {lanes.LIFTBRIDGE_SERVER_ID}" in old
    assert "telemetry" not in old
    new = lanes.liftbridge_config(
        port=1, data=Path("/d"), nats_port=2, module_version=lanes.LIFTBRIDGE_PREFERRED_VERSIONS[0]
    )
    assert new.endswith("telemetry:\n  enabled: false\n")


def test_liftbridge_tls_config_is_a_tls_only_node_of_its_own_on_the_tls_nats() -> None:
    tls_dir = Path("/s/tls")
    text = lanes.liftbridge_tls_config(
        port=17293, data=Path("/d/tls-data"), nats_tls_port=17443, tls_dir=tls_dir,
        module_version="v1.9.0",
    )  # fmt: skip
    assert "listen: 127.0.0.1:17293\n" in text
    assert "data:\n  dir: /d/tls-data\n" in text
    assert "tls:\n  cert: /s/tls/server.pem\n  key: /s/tls/server.key\n" in text
    assert (
        "nats:\n  servers:\n    - tls://localhost:17443\n  tls:\n"
        "    cert: /s/tls/client.pem\n    key: /s/tls/client.key\n    ca: /s/tls/ca.pem\n"
    ) in text
    assert f"server.id: {lanes.LIFTBRIDGE_TLS_SERVER_ID}\n" in text
    assert f"namespace: {lanes.LIFTBRIDGE_TLS_NAMESPACE}\n" in text
    assert lanes.LIFTBRIDGE_TLS_SERVER_ID != lanes.LIFTBRIDGE_SERVER_ID
    assert "nats://" not in text  # never the plain NATS
    assert "client.auth" not in text  # client certificates are not required
    assert "telemetry" not in text
    newer = lanes.liftbridge_tls_config(
        port=1, data=Path("/d"), nats_tls_port=2, tls_dir=tls_dir,
        module_version=lanes.LIFTBRIDGE_PREFERRED_VERSIONS[0],
    )  # fmt: skip
    assert newer.endswith("telemetry:\n  enabled: false\n")


def test_the_mutual_tls_liftbridge_requires_client_certificates_of_the_harness_ca() -> None:
    tls_dir = Path("/s/tls")
    text = lanes.liftbridge_tls_config(
        port=17294, data=Path("/d/mtls-data"), nats_tls_port=17443, tls_dir=tls_dir,
        module_version="v1.9.0", instance=lanes.LIFTBRIDGE_MTLS,
    )  # fmt: skip
    assert "listen: 127.0.0.1:17294\n" in text
    assert (
        "tls:\n  cert: /s/tls/server.pem\n  key: /s/tls/server.key\n"
        "  client.auth.enabled: true\n  client.auth.ca: /s/tls/ca.pem\n"
    ) in text
    assert "    - tls://localhost:17443\n" in text
    assert f"server.id: {lanes.LIFTBRIDGE_MTLS.server_id}\n" in text
    assert f"namespace: {lanes.LIFTBRIDGE_MTLS.namespace}\n" in text
    ids = {
        lanes.LIFTBRIDGE_SERVER_ID,
        lanes.LIFTBRIDGE_TLS_SERVER_ID,
        lanes.LIFTBRIDGE_MTLS.server_id,
    }
    assert len(ids) == 3  # three one-node clusters of their own
    assert lanes.LIFTBRIDGE_MTLS.namespace != lanes.LIFTBRIDGE_TLS.namespace


def test_the_env_facts_of_the_tls_and_mutual_tls_liftbridges(tmp_path: Path) -> None:
    ctx = _context(
        tmp_path,
        {
            "STREAMWIRE_LIFTBRIDGE_TLS_PORT": "17293",
            "STREAMWIRE_LIFTBRIDGE_MTLS_PORT": "17294",
            "STREAMWIRE_NATS_TLS_PORT": "17443",
        },
    )
    directory = tmp_path / "state" / "liftbridge"
    plain = lanes._lb_tls_facts(ctx, directory, lanes.LIFTBRIDGE_TLS)
    assert (plain["TLS_PORT"], plain["PORT_GRPC_TLS"]) == ("17293", "17293")
    assert plain["TLS_URL"] == "liftbridge+tls://localhost:17293?nats=tls://localhost:17443"
    assert plain["TLS_SERVER_ID"] == lanes.LIFTBRIDGE_TLS_SERVER_ID
    assert plain["TLS_LOG"] == str(directory / "liftbridge-tls.log")
    assert "TLS_CLIENT_CERT" not in plain
    mutual = lanes._lb_tls_facts(ctx, directory, lanes.LIFTBRIDGE_MTLS)
    assert (mutual["MTLS_PORT"], mutual["PORT_GRPC_MTLS"]) == ("17294", "17294")
    assert mutual["MTLS_URL"] == "liftbridge+tls://localhost:17294?nats=tls://localhost:17443"
    assert mutual["MTLS_CA"] == str(tmp_path / "state" / "tls" / "ca.pem")
    assert mutual["MTLS_CLIENT_CERT"] == str(tmp_path / "state" / "tls" / "client.pem")
    assert mutual["MTLS_CLIENT_KEY"] == str(tmp_path / "state" / "tls" / "client.key")
    assert mutual["MTLS_PID_FILE"] == str(directory / "liftbridge-mtls.pid")


def test_tls_handshake_presents_the_client_certificate(tmp_path: Path) -> None:
    """A TLS 1.2 server that requires a client certificate (with TLS 1.3 a client finishes
    its handshake before the server checks): the probe passes only with the certificate."""
    import ssl
    import threading

    if not tls.ensure(tmp_path / "tls"):
        pytest.skip("openssl could not make the throwaway PKI")
    pki = tmp_path / "tls"
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.pem"))
    server_ctx.load_cert_chain(pki / "server.pem", pki / "server.key")
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    server_ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    server_ctx.set_alpn_protocols(["h2"])
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        for _ in range(2):
            conn, _ = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True):
                    pass
            except (OSError, ssl.SSLError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        assert not lanes.tls_handshake(port, pki / "ca.pem", timeout=5)
        assert lanes.tls_handshake(
            port, pki / "ca.pem", client=(pki / "client.pem", pki / "client.key")
        )
    finally:
        thread.join(10)
        listener.close()


def test_tls_handshake_needs_the_right_ca_and_a_tls_listener(tmp_path: Path) -> None:
    import ssl
    import threading

    if not tls.ensure(tmp_path / "tls"):
        pytest.skip("openssl could not make the throwaway PKI")
    if not tls.ensure(tmp_path / "other"):
        pytest.skip("openssl could not make the throwaway PKI")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(tmp_path / "tls" / "server.pem", tmp_path / "tls" / "server.key")
    server_ctx.set_alpn_protocols(["h2"])
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        for _ in range(2):
            conn, _ = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True):
                    pass
            except (OSError, ssl.SSLError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        assert lanes.tls_handshake(port, tmp_path / "tls" / "ca.pem")
        assert not lanes.tls_handshake(port, tmp_path / "other" / "ca.pem")
    finally:
        thread.join(10)
        listener.close()
    plain = socket.create_server(("127.0.0.1", 0))
    try:  # accepts (the backlog) but never answers the ClientHello
        assert not lanes.tls_handshake(
            plain.getsockname()[1], tmp_path / "tls" / "ca.pem", timeout=0.5
        )
    finally:
        plain.close()
    assert not lanes.tls_handshake(_free_ports(1)[0], tmp_path / "tls" / "ca.pem")


def test_liftbridge_tls_is_left_out_without_the_nats_tls_server(tmp_path: Path) -> None:
    if not tls.ensure(tmp_path / "state" / "tls"):
        pytest.skip("openssl could not make the throwaway PKI")
    (port,) = _free_ports(1)
    ctx = _context(tmp_path, {"STREAMWIRE_LIFTBRIDGE_TLS_PORT": str(port)})
    directory = tmp_path / "state" / "liftbridge"
    directory.mkdir(parents=True)
    said: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lanes, "say", said.append)
        assert not lanes._lb_tls_up(ctx, directory, Path("/bin/true"), "v1.9.0")
    assert said == ["liftbridge: the NATS TLS server is not running; no Liftbridge TLS"]
    assert not (directory / "liftbridge-tls.yml").exists()  # nothing was started
    assert not (directory / "liftbridge-tls.pid").exists()


def test_liftbridge_versions() -> None:
    assert lanes.liftbridge_versions({}) == lanes.LIFTBRIDGE_PREFERRED_VERSIONS
    assert lanes.liftbridge_versions({"STREAMWIRE_LIFTBRIDGE_VERSION": "v1.8.0"}) == ("v1.8.0",)


@pytest.mark.skipif(
    not (Path(sys.prefix) / "bin" / "nats-server").is_file(),
    reason="nats-server is not in this venv (dev extras)",
)
def test_nats_up_restart_down(tmp_path: Path) -> None:
    port, tls_port = _free_ports(2)
    ctx = _context(
        tmp_path, {"STREAMWIRE_NATS_PORT": str(port), "STREAMWIRE_NATS_TLS_PORT": str(tls_port)}
    )
    try:
        assert lanes.up_nats(ctx)
        facts = envfile.read_env(ctx.state / "nats.env")
        assert facts["PORT"] == str(port)
        assert facts["URL"] == f"nats://127.0.0.1:{port}"
        assert facts["VERSION"].startswith("v2.")
        assert port_open("127.0.0.1", port)
        if "TLS_PORT" in facts:  # openssl at hand
            assert facts["TLS_PORT"] == str(tls_port)
            assert port_open("127.0.0.1", tls_port)
        pid = procs.read_pid(ctx.state / "nats" / "nats.pid")
        assert pid is not None
        assert os.getsid(pid) == pid
        assert lanes.up_nats(ctx)  # already running: the same process
        assert procs.read_pid(ctx.state / "nats" / "nats.pid") == pid
        assert lanes.restart_nats(ctx) == 0
        assert procs.read_pid(ctx.state / "nats" / "nats.pid") != pid
        assert port_open("127.0.0.1", port)
    finally:
        lanes.down_nats(ctx)
    assert not port_open("127.0.0.1", port)
    assert not port_open("127.0.0.1", tls_port)
    assert not (ctx.state / "nats.env").exists()
    assert not (ctx.state / "nats" / "nats.pid").exists()
    assert lanes.restart_nats(ctx) == 3  # not running


def test_nats_port_taken_by_someone_else(tmp_path: Path) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        ctx = _context(tmp_path, {"STREAMWIRE_NATS_PORT": str(port)})
        if not (ctx.paths.venv / "bin" / "nats-server").is_file():
            pytest.skip("nats-server is not in this venv (dev extras)")
        assert not lanes.up_nats(ctx)
    reason = (ctx.state / "nats.unavailable").read_text(encoding="utf-8").splitlines()[0]
    assert reason == f"port {port} is in use by a process outside the harness"


_IGGY_STAND_IN = """#!{python}
import os, socket, sys, time
if sys.argv[1:] == ["--version"]:
    print("iggy-server 0.9.9")
    raise SystemExit(0)
assert os.environ["IGGY_ROOT_USERNAME"] == "iggy"
assert os.environ["IGGY_SYSTEM_SHARDING_PIN_CORES"] == "false"
assert os.path.isdir(os.environ["IGGY_SYSTEM_PATH"])
print("cwd", os.getcwd(), flush=True)
host, port = os.environ["IGGY_TCP_ADDRESS"].rsplit(":", 1)
s = socket.socket(); s.bind((host, int(port))); s.listen()
time.sleep(60)
"""


def test_iggy_runs_the_given_binary_with_its_settings(tmp_path: Path) -> None:
    server = tmp_path / "iggy-server"
    server.write_text(_IGGY_STAND_IN.format(python=sys.executable), encoding="utf-8")
    server.chmod(0o755)
    (port,) = _free_ports(1)
    ctx = _context(tmp_path, {"IGGY_SERVER_BIN": str(server), "STREAMWIRE_IGGY_PORT": str(port)})
    try:
        assert lanes.up_iggy(ctx)
        facts = envfile.read_env(ctx.state / "iggy.env")
        assert facts["URL"] == f"iggy://iggy:iggy@127.0.0.1:{port}"
        assert facts["VERSION"] == "0.9.9"
        assert facts["BINARY"] == str(server)
        assert f"cwd {ctx.state / 'iggy'}" in (ctx.state / "iggy" / "iggy.log").read_text(
            encoding="utf-8"
        )
    finally:
        lanes.down_iggy(ctx)
    assert not port_open("127.0.0.1", port)
    assert not (ctx.state / "iggy.env").exists()


def test_iggy_that_exits_at_once_is_reported(tmp_path: Path) -> None:
    server = tmp_path / "iggy-server"
    server.write_text("#!/bin/sh\necho 'cannot start: no config' >&2\nexit 4\n", encoding="utf-8")
    server.chmod(0o755)
    (port,) = _free_ports(1)
    ctx = _context(tmp_path, {"IGGY_SERVER_BIN": str(server), "STREAMWIRE_IGGY_PORT": str(port)})
    assert not lanes.up_iggy(ctx)
    text = (ctx.state / "iggy.unavailable").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "the Iggy server exited during startup"
    assert "cannot start: no config" in text


def test_iggy_without_a_binary(tmp_path: Path) -> None:
    ctx = _context(tmp_path, {})
    assert not lanes.up_iggy(ctx)
    reason = (ctx.state / "iggy.unavailable").read_text(encoding="utf-8").splitlines()[0]
    assert reason == lanes.IGGY_NATIVE_REASON
