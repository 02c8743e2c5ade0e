"""The signing key of the RabbitMQ 4.x nodes' OAuth 2 backend: an RSA key pair generated once
with openssl into ``.brokers/oauth2``. The broker gets the public key; tests sign their own
access tokens (RS256 JWTs) with the private one (docs/brokers.md, "OAuth 2")."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from .envfile import say

__all__ = ["KEY_ID", "PRIVATE", "PUBLIC", "RESOURCE", "ensure"]

KEY_ID = "streamwire-test"
"""The ``kid`` tokens name; the broker's ``auth_oauth2.default_key`` too."""
RESOURCE = "streamwire"
"""``auth_oauth2.resource_server_id``: audience and scope prefix (``streamwire.read:*/*``)."""
PRIVATE = "signing.key"
PUBLIC = "signing.pub.pem"


def _ok(args: list[str], cwd: Path) -> bool:
    return (
        subprocess.run(args, cwd=cwd, capture_output=True, timeout=60, check=False).returncode == 0
    )


def ensure(directory: Path) -> bool:
    """The key pair in ``directory`` (made when missing or unreadable); False, saying why,
    when openssl is missing or fails: the nodes then run without the OAuth 2 backend."""
    if shutil.which("openssl") is None:
        say("oauth2: openssl not found: no OAuth 2 backend")
        return False
    private, public = directory / PRIVATE, directory / PUBLIC
    if (
        private.is_file()
        and public.is_file()
        and _ok(["openssl", "pkey", "-in", PRIVATE, "-noout"], directory)
    ):
        return True
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        tmp = Path(scratch)
        made = _ok(
            [
                "openssl",
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
                PRIVATE,
            ],
            tmp,
        ) and _ok(["openssl", "pkey", "-in", PRIVATE, "-pubout", "-out", PUBLIC], tmp)
        if not made:
            say("oauth2: openssl could not make the signing key: no OAuth 2 backend")
            return False
        (tmp / PRIVATE).chmod(0o600)
        (tmp / PUBLIC).replace(public)
        (tmp / PRIVATE).replace(private)
    return True
