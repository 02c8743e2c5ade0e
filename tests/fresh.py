"""Code run in a fresh interpreter: what a new process (a Spark worker, the CLI) imports
and does first, unaffected by what the test session imported already."""

from __future__ import annotations

import subprocess
import sys

__all__ = ("run_fresh",)


def run_fresh(code: str) -> None:
    """Run ``code`` in a new interpreter of this one; fail with its stderr unless it exits 0."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
