"""OAuth 2 access tokens for the harness's RabbitMQ nodes: RS256 JWTs signed with the key the
harness generated (``OAUTH2_SIGNING_KEY`` in the broker's env file), as an authorization
server would issue them (docs/brokers.md, "OAuth 2")."""

from __future__ import annotations

import base64
import json
import time
import uuid
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.brokers import BrokerInfo

__all__ = ["issue_token", "oauth2_reason", "token_expiry"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def oauth2_reason(broker: BrokerInfo) -> str | None:
    """Why ``broker`` cannot take tokens (None when it can)."""
    if "OAUTH2_SIGNING_KEY" not in broker.extra:
        return f"{broker.name} has no OAuth 2 backend (the harness records OAUTH2_SIGNING_KEY)"
    return None


def issue_token(broker: BrokerInfo, *, lifetime: float, subject: str = "streamwire-app") -> str:
    """A token for ``subject`` with configure/read/write on every vhost and resource, valid
    for ``lifetime`` seconds from now."""
    key = serialization.load_pem_private_key(
        Path(broker.extra["OAUTH2_SIGNING_KEY"]).read_bytes(), password=None
    )
    assert isinstance(key, rsa.RSAPrivateKey)
    resource = broker.extra["OAUTH2_RESOURCE"]
    now = int(time.time())
    header = {"alg": "RS256", "typ": "JWT", "kid": broker.extra["OAUTH2_KEY_ID"]}
    claims = {
        "sub": subject,
        "aud": [resource],
        "scope": [f"{resource}.{p}:*/*" for p in ("configure", "read", "write")],
        "iat": now,
        "exp": now + int(lifetime),
        "jti": uuid.uuid4().hex,
    }
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64(signature)}"


def token_expiry(token: str) -> float:
    """The ``exp`` claim of a token :func:`issue_token` made: whole seconds, so up to a second
    before ``now + lifetime``."""
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return float(claims["exp"])
