"""The throwaway PKI of the TLS listeners (RabbitMQ stream TLS, the NATS TLS server): a CA, a
server certificate for localhost/127.0.0.1 and a client certificate whose CN is the user SASL
EXTERNAL logs in as, generated once with openssl into ``.brokers/tls``."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from .envfile import say

__all__ = ["CLIENT_CN", "FILES", "ensure", "valid"]

CLIENT_CN = "streamwire-client"
FILES = ("ca.pem", "ca.key", "server.pem", "server.key", "client.pem", "client.key")

_OPENSSL_CNF = """\
# written by integration/brokers.sh: throwaway test PKI, loopback only
[req]
distinguished_name = dn
prompt = no
[dn]
CN = streamwire throwaway test CA
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
"""


def _quiet(args: list[str], cwd: Path | None = None) -> bool:
    done = subprocess.run(
        args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    return done.returncode == 0


def valid(directory: Path) -> bool:
    """Every file is there, both leaf certificates chain to the CA, and none of the three
    certificates expires within a day."""
    if not all((directory / f).is_file() and (directory / f).stat().st_size for f in FILES):
        return False
    ca, server, client = (str(directory / f) for f in ("ca.pem", "server.pem", "client.pem"))
    if not _quiet(["openssl", "verify", "-CAfile", ca, server, client]):
        return False
    return all(
        _quiet(["openssl", "x509", "-noout", "-checkend", "86400", "-in", cert])
        for cert in (ca, server, client)
    )


def ensure(directory: Path) -> bool:
    """Generates the CA and both certificates (RSA 2048, SHA-256) unless :func:`valid`; False
    (and says why) when openssl is missing or fails: brokers then run without TLS."""
    if valid(directory):
        return True
    if shutil.which("openssl") is None:
        say("tls: openssl not found: no TLS listeners")
        return False
    parent = directory.parent
    parent.mkdir(parents=True, exist_ok=True)
    for old in parent.glob(f"{directory.name}.tmp.*"):  # left by an earlier failed attempt
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(old)], check=False)
    tmp = Path(tempfile.mkdtemp(prefix=f"{directory.name}.tmp.", dir=parent))
    (tmp / "openssl.cnf").write_text(_OPENSSL_CNF, encoding="utf-8")
    say(
        "tls: generating a throwaway CA, a server certificate (localhost, 127.0.0.1) and a "
        f"client certificate (CN={CLIENT_CN}) in {directory}"
    )
    steps = [
        ["openssl", "req", "-x509", "-new", "-newkey", "rsa:2048", "-nodes", "-sha256",
         "-days", "3650", "-config", "openssl.cnf", "-extensions", "ca",
         "-subj", "/CN=streamwire throwaway test CA", "-keyout", "ca.key", "-out", "ca.pem"],
        ["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-sha256",
         "-config", "openssl.cnf", "-subj", "/CN=localhost",
         "-keyout", "server.key", "-out", "server.csr"],
        ["openssl", "x509", "-req", "-sha256", "-days", "825", "-in", "server.csr",
         "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-CAserial", "ca.srl",
         "-extfile", "openssl.cnf", "-extensions", "server", "-out", "server.pem"],
        ["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-sha256",
         "-config", "openssl.cnf", "-subj", f"/CN={CLIENT_CN}",
         "-keyout", "client.key", "-out", "client.csr"],
        ["openssl", "x509", "-req", "-sha256", "-days", "825", "-in", "client.csr",
         "-CA", "ca.pem", "-CAkey", "ca.key", "-CAserial", "ca.srl",
         "-extfile", "openssl.cnf", "-extensions", "client", "-out", "client.pem"],
    ]  # fmt: skip
    with (tmp / "openssl.log").open("ab") as log:
        for step in steps:
            if subprocess.run(step, cwd=tmp, stdout=log, stderr=log, check=False).returncode:
                say(f"tls: openssl failed (see {tmp / 'openssl.log'}): no TLS listeners")
                return False
    for name in ("ca.key", "server.key", "client.key"):
        (tmp / name).chmod(0o600)
    for name in ("ca.pem", "server.pem", "client.pem"):
        (tmp / name).chmod(0o644)
    for name in ("server.csr", "client.csr"):
        (tmp / name).unlink()
    tmp.chmod(0o755)
    if directory.exists():
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(directory)], check=False)
    tmp.rename(directory)
    if not valid(directory):
        say(f"tls: the generated certificates in {directory} do not verify: no TLS listeners")
        return False
    return True
