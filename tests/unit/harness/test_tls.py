"""The throwaway PKI, generated with the real openssl."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from integration.harness import tls

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def _subject(cert: Path) -> str:
    done = subprocess.run(
        ["openssl", "x509", "-noout", "-subject", "-in", str(cert)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_ensure_generates_a_ca_a_server_and_a_client_certificate(tmp_path: Path) -> None:
    directory = tmp_path / "tls"
    assert not tls.valid(directory)
    assert tls.ensure(directory)
    assert tls.valid(directory)
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        [*tls.FILES, "ca.srl", "openssl.cnf", "openssl.log"]
    )
    assert _subject(directory / "client.pem").endswith(f"CN = {tls.CLIENT_CN}")
    assert (directory / "server.key").stat().st_mode & 0o777 == 0o600
    assert not list(tmp_path.glob("tls.tmp.*"))
    # kept as long as it is valid
    before = (directory / "ca.pem").read_bytes()
    assert tls.ensure(directory)
    assert (directory / "ca.pem").read_bytes() == before
    # a client certificate from another CA makes the set invalid: all of it is made anew
    (directory / "client.pem").write_bytes((directory / "ca.pem").read_bytes())
    shutil.copy(directory / "ca.key", directory / "client.key")
    other = tmp_path / "other"
    assert tls.ensure(other)
    (directory / "client.pem").write_bytes((other / "client.pem").read_bytes())
    assert not tls.valid(directory)
    assert tls.ensure(directory)
    assert tls.valid(directory)
    assert (directory / "ca.pem").read_bytes() != before


def test_a_missing_file_is_invalid(tmp_path: Path) -> None:
    directory = tmp_path / "tls"
    assert tls.ensure(directory)
    (directory / "client.key").unlink()
    assert not tls.valid(directory)
