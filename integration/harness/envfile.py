"""``.brokers/<name>.env`` (how to reach a broker that is up) and ``.brokers/<name>.unavailable``
(why one is not), the files ``tests/brokers.py`` reads."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

__all__ = ["TAIL_LINES", "log_tail", "mark_unavailable", "read_env", "say", "write_env"]

TAIL_LINES = 15
_KEY = re.compile(r"[A-Z][A-Z0-9_]*")


def say(message: str, stream: TextIO | None = None) -> None:
    """One ``[brokers] ...`` line on stderr, as every harness message."""
    out = sys.stderr if stream is None else stream
    print(f"[brokers] {message}", file=out, flush=True)


def _replace(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` through a temporary file and a rename (readers never see
    half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_env(
    state: Path, name: str, facts: Mapping[str, str], *, now: datetime | None = None
) -> Path:
    """Writes ``state/<name>.env`` (``NAME`` first, then ``facts`` in order; line breaks in
    values become spaces) and removes ``state/<name>.unavailable``."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [f"# written by integration/brokers.sh at {stamp}", f"NAME={name}"]
    for key, value in facts.items():
        if not _KEY.fullmatch(key) or key == "NAME":
            raise ValueError(f"not an env file key: {key!r}")
        lines.append(f"{key}={value.replace(chr(10), ' ').replace(chr(13), ' ')}")
    path = state / f"{name}.env"
    _replace(path, "\n".join(lines) + "\n")
    (state / f"{name}.unavailable").unlink(missing_ok=True)
    return path


def parse_facts(pairs: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` arguments (as the bash lanes pass them) as a mapping, in order."""
    facts: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"not KEY=VALUE: {pair!r}")
        facts[key] = value
    return facts


def read_env(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of an env file (``#`` comments, no quoting)."""
    values: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        values[key.strip()] = value.strip()
    return values


def log_tail(paths: Iterable[Path], lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of every non-empty file, each under a ``--- last lines of``
    heading."""
    parts: list[str] = []
    for path in paths:
        try:
            if path.stat().st_size == 0:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        tail = text.splitlines()[-lines:]
        parts.append(f"--- last lines of {path} ---\n" + "".join(t + "\n" for t in tail))
    return "".join(parts)


def mark_unavailable(
    state: Path, name: str, reason: str, logs: Iterable[Path] = (), stream: TextIO | None = None
) -> Path:
    """Records why ``name`` is not running: ``state/<name>.unavailable`` holds ``reason`` and
    the tails of ``logs``; ``state/<name>.env`` is removed. Says so, with the tails indented."""
    tails = log_tail(list(logs))
    (state / f"{name}.env").unlink(missing_ok=True)
    path = state / f"{name}.unavailable"
    _replace(path, f"{reason}\n{tails}")
    say(f"{name}: UNAVAILABLE: {reason}", stream)
    if tails:
        out = sys.stderr if stream is None else stream
        out.write("".join(f"    {line}\n" for line in tails.splitlines()))
        out.flush()
    return path
