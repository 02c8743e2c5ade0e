"""TLS options and the client ``ssl.SSLContext`` built from them.

Certificate and hostname verification are **on** by default. With ``ca_file``/``ca_data``
only those CAs are trusted; without them the system trust store is used.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

from streamwire.errors import ConfigurationError

__all__ = ("TLSOptions", "create_ssl_context", "TLSConfig", "is_tls_setting")

_PEM_MARKER = b"-----BEGIN"


@dataclass(frozen=True, slots=True, kw_only=True)
class TLSOptions:
    """How to secure a connection. All fields are optional; the default verifies everything.

    * ``verify``: check the server certificate chain. ``False`` also disables the hostname
      check, and may not be combined with ``ca_file``/``ca_data``.
    * ``ca_file`` / ``ca_data``: the CAs to trust instead of the system store. ``ca_data``
      is PEM text (``str`` or ``bytes``) or DER ``bytes``.
    * ``cert_file`` / ``key_file`` / ``key_password``: a client certificate for mutual TLS.
      ``key_file`` may be omitted when ``cert_file`` holds the key too.
    * ``server_hostname``: the name sent as SNI and checked against the certificate, when it
      differs from the host connected to.
    * ``check_hostname``: compare the certificate with the host name (needs ``verify``).
    * ``minimum_version``: the lowest TLS version accepted (default TLS 1.2).
    """

    verify: bool = True
    ca_file: str | os.PathLike[str] | None = None
    ca_data: str | bytes | None = None
    cert_file: str | os.PathLike[str] | None = None
    key_file: str | os.PathLike[str] | None = None
    key_password: str | bytes | None = None
    server_hostname: str | None = None
    check_hostname: bool = True
    minimum_version: ssl.TLSVersion | None = ssl.TLSVersion.TLSv1_2

    def __repr__(self) -> str:
        # key_password must never end up in a log line or a traceback.
        shown = ", ".join(
            f"{name}={'***' if name == 'key_password' else repr(getattr(self, name))}"
            for name in self.__dataclass_fields__
            if getattr(self, name) is not None
        )
        return f"TLSOptions({shown})"

    def __post_init__(self) -> None:
        if not self.verify and (self.ca_file is not None or self.ca_data is not None):
            raise ConfigurationError("ca_file/ca_data given but verify=False disables checks")
        if self.key_file is not None and self.cert_file is None:
            raise ConfigurationError("key_file needs cert_file (the client certificate)")
        if self.key_password is not None and self.cert_file is None:
            raise ConfigurationError("key_password needs cert_file (the client certificate)")
        if self.server_hostname is not None and not self.server_hostname.strip():
            raise ConfigurationError("server_hostname must not be empty")
        if isinstance(self.ca_data, str | bytes) and not self.ca_data:
            raise ConfigurationError("ca_data must not be empty")
        if self.minimum_version is not None and not isinstance(
            self.minimum_version, ssl.TLSVersion
        ):
            raise ConfigurationError(
                f"minimum_version must be an ssl.TLSVersion, not {self.minimum_version!r}"
            )


def _ca_data(data: str | bytes) -> str | bytes:
    # ssl wants PEM as str and DER as bytes; PEM often arrives as bytes (trustme, files).
    if isinstance(data, bytes) and data.lstrip().startswith(_PEM_MARKER):
        return data.decode("ascii")
    return data


def create_ssl_context(opts: TLSOptions | None = None) -> ssl.SSLContext:
    """Build a client-side ``ssl.SSLContext`` from ``opts`` (``None`` means the defaults).

    Raises :class:`~streamwire.errors.ConfigurationError` when a CA, certificate or key
    cannot be loaded (missing file, bad PEM, wrong password), chained to the ssl error.
    """
    opts = opts if opts is not None else TLSOptions()
    ca_data = _ca_data(opts.ca_data) if opts.ca_data is not None else None
    try:
        ctx = ssl.create_default_context(
            ssl.Purpose.SERVER_AUTH,
            cafile=os.fspath(opts.ca_file) if opts.ca_file is not None else None,
            cadata=ca_data,
        )
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise ConfigurationError(f"cannot load the trusted CAs: {exc}") from exc
    if opts.minimum_version is not None:
        ctx.minimum_version = opts.minimum_version
    if not opts.verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif not opts.check_hostname:
        ctx.check_hostname = False
    if opts.cert_file is not None:
        try:
            ctx.load_cert_chain(
                os.fspath(opts.cert_file),
                os.fspath(opts.key_file) if opts.key_file is not None else None,
                password=opts.key_password,
            )
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot load the client certificate: {exc}") from exc
    return ctx


TLSConfig = TLSOptions | ssl.SSLContext
"""What a ``tls=`` argument accepts: options for :func:`create_ssl_context`, or a context."""


def is_tls_setting(value: object) -> bool:
    """Whether ``value`` can be a connect function's ``tls=``: ``None``, a bool, a
    :class:`TLSOptions` or an :class:`ssl.SSLContext`."""
    return value is None or isinstance(value, bool | TLSOptions | ssl.SSLContext)
