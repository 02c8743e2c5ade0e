"""Optional extras: check that a feature's third-party modules import, or say what to install.

The core (RabbitMQ Streams and Iggy) needs only the base dependencies; Liftbridge, Spark and
the pytest plugin each have an extra (``pyproject.toml``, docs/development.md "Extras").
"""

from __future__ import annotations

import importlib.util

from streamwire.errors import MissingDependency

__all__ = ("require",)


def require(feature: str, extra: str, *modules: str) -> None:
    """Raise :class:`MissingDependency` naming ``pip install 'streamwire[extra]'`` when any of
    ``modules`` (top-level import names) cannot be found. Nothing is imported here."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingDependency(feature, extra, module)
