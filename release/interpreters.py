"""The CPython interpreters streamwire supports, found on this machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

__all__ = ("SUPPORTED", "find", "tag")

SUPPORTED: Final = ("3.11", "3.12", "3.13")
"""The versions the classifiers claim; each gets a native wheel and the unit/property run."""


def tag(version: str) -> str:
    """The wheel's interpreter tag of ``version``: ``3.12`` -> ``cp312``."""
    major, minor = version.split(".")
    return f"cp{major}{minor}"


def _runs(python: str, version: str) -> bool:
    try:
        probe = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0 and probe.stdout.strip() == version


def find(version: str) -> str | None:
    """An interpreter of ``version``: this one, ``python3.X`` on PATH, or one pyenv installed
    (pyenv's shims answer only for the versions it has selected, so its versions folder is
    searched too)."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        return sys.executable
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [shutil.which(f"python{version}")]
    candidates += [
        str(p) for p in sorted(pyenv_root.glob(f"versions/{version}*/bin/python{version}"))
    ]
    return next((c for c in candidates if c and _runs(c, version)), None)
