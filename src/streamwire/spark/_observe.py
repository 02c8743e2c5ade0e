"""The ``observer`` option: streamwire metrics from the Python processes Spark runs.

A query's source and sink run in Python processes the application does not start: the
driver's data source runner (which plans micro-batches) and the executors' Python workers.
An observer the application installed with ``streamwire.otel.instrument()`` in its own
process reaches none of them. ``observer="package.module:function"`` names a function,
importable in every one of those processes, that is called once in each before its first
connection: it sets up the metrics pipeline there (an OpenTelemetry ``MeterProvider`` and
exporter, say) and returns a :class:`streamwire.metrics.Observer` to install, or installs
one itself and returns ``None``.

Then the executors' producers and consumers report as everywhere else, and the streaming
source's driver reports each planned batch's lag per partition
(:class:`streamwire.metrics.LagObserver`: offsets and estimated bytes behind the tails).
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import threading
from collections.abc import Mapping
from typing import Any, Final

from streamwire.metrics import Destination, LagObserver, current_observer, set_observer
from streamwire.spark.errors import SparkConfigurationError

__all__ = ("check_spec", "install", "report_lag")

_SPEC: Final = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")

_log = logging.getLogger("streamwire.metrics")
_lock = threading.Lock()
_installed: set[tuple[int, str]] = set()


def check_spec(spec: str) -> str:
    """``spec`` stripped, or a SparkConfigurationError when it is not ``module:function``."""
    spec = spec.strip()
    if not _SPEC.fullmatch(spec):
        raise SparkConfigurationError(
            f"observer must name a function as 'package.module:function', got {spec!r}"
        )
    return spec


def install(spec: str | None) -> None:
    """Call the function ``spec`` names, once in this process, and install the observer it
    returns (if any). Failing to import or call it raises: a query asked to be observed is
    not run unobserved."""
    if spec is None:
        return
    key = (os.getpid(), spec)
    with _lock:
        if key in _installed:
            return
        module_name, _, path = spec.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for name in path.split("."):
                target = getattr(target, name)
        except (ImportError, AttributeError) as exc:
            raise SparkConfigurationError(
                f"observer {spec!r} cannot be imported in this Python process (pid "
                f"{os.getpid()}): {exc}. It must be importable on the driver and on every "
                "executor: install its package there, or ship it with spark.submit.pyFiles"
            ) from exc
        if not callable(target):
            raise SparkConfigurationError(f"observer {spec!r} is not callable")
        observer = target()
        if observer is not None:
            set_observer(observer)
        _installed.add(key)


def report_lag(
    system: str,
    stream: str,
    address: str,
    behind: Mapping[int, int],
    sizes: Mapping[int, float] | None,
) -> None:
    """Tell the installed observer, when it takes lags (:class:`LagObserver`), how many
    offsets of each partition lie ``behind`` the tails, with their bytes where a mean size
    is known (``sizes``; partitions without one get the mean of the others)."""
    observer: object = current_observer()
    if not isinstance(observer, LagObserver):
        return
    where = Destination(system, stream, address)
    mean = sum(sizes.values()) / len(sizes) if sizes else None
    for partition, messages in sorted(behind.items()):
        size = sizes.get(partition, mean) if sizes else None
        nbytes = 0 if messages == 0 else None if size is None else round(messages * size)
        try:
            observer.partition_lag(where, partition, messages, nbytes)
        except Exception:  # observing never fails the query (as streamwire.metrics)
            _log.exception("the metrics observer %r raised; ignored", observer)
