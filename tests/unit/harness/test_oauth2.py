"""The OAuth 2 signing key of the 4.x nodes, generated with the real openssl, and the
configuration that points the broker's OAuth 2 backend at it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from integration.harness import config, lanes, oauth2, rabbit

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def test_ensure_makes_a_key_pair_once(tmp_path: Path) -> None:
    directory = tmp_path / "oauth2"
    assert oauth2.ensure(directory)
    private = (directory / oauth2.PRIVATE).read_bytes()
    assert (directory / oauth2.PRIVATE).stat().st_mode & 0o077 == 0  # the private key is private
    assert oauth2.ensure(directory)  # kept: tokens signed earlier stay valid
    assert (directory / oauth2.PRIVATE).read_bytes() == private
    key = serialization.load_pem_private_key(private, password=None)
    public = serialization.load_pem_public_key((directory / oauth2.PUBLIC).read_bytes())
    assert isinstance(key, rsa.RSAPrivateKey)
    assert isinstance(public, rsa.RSAPublicKey)
    signature = key.sign(b"claims", padding.PKCS1v15(), hashes.SHA256())
    public.verify(signature, b"claims", padding.PKCS1v15(), hashes.SHA256())  # a pair


def test_a_damaged_key_is_made_again(tmp_path: Path) -> None:
    directory = tmp_path / "oauth2"
    assert oauth2.ensure(directory)
    (directory / oauth2.PRIVATE).write_text("not a key", encoding="utf-8")
    assert oauth2.ensure(directory)
    serialization.load_pem_private_key((directory / oauth2.PRIVATE).read_bytes(), password=None)


def test_node_config_names_the_backend_and_the_key(tmp_path: Path) -> None:
    paths = config.Paths(tmp_path, tmp_path / "cache", tmp_path / "venv", tmp_path / "state")
    n = rabbit.Node.select(lanes.Context(paths, {}), "rabbitmq")
    without, _ = rabbit.node_config(n, with_tls=False)
    assert "auth_backends" not in without
    conf, _ = rabbit.node_config(n, with_tls=False, with_oauth2=True)
    assert "auth_backends.1 = rabbit_auth_backend_internal\n" in conf  # guest still logs in
    assert "auth_backends.2 = rabbit_auth_backend_oauth2\n" in conf
    assert f"auth_oauth2.resource_server_id = {oauth2.RESOURCE}\n" in conf
    assert (
        f"auth_oauth2.signing_keys.{oauth2.KEY_ID} = {rabbit.OAUTH2_ETC}/{oauth2.PUBLIC}\n" in conf
    )
